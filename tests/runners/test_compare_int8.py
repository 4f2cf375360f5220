"""``compare`` on an int8 file judges it as quantize did, not by fp32's atol/rtol (issue 48 item 5).

``compare int8.onnx --reference SPEC`` applied fp32's atol 1e-4 to a file whose manifest says ``int8-qdq``, and so
did ``compare --runtime``: every int8 file "failed". Now each float output is judged by a figure, the embedding
by its mean cosine and the logits by SQNR, against the budgets the manifest records (or quantize's defaults), and
the report says which figure judges each output and why. ``--min-cosine``/``--min-sqnr`` set them for any file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

import portable
from portable.runners.budgets import read_quantized
from portable.runners.constraints import constraints_of
from portable.runners.inputs import graph_io, make_feeds
from portable.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = f"{ROOT}/fixtures/models/sentence_encoder.py:build"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    """The float export and its int8 file, calibrated on the seeded inputs compare draws (padded masks)."""
    folder = tmp_path_factory.mktemp("int8")
    loaded = load_spec(SPEC)
    source = portable.export(loaded.module, loaded.example_inputs, folder / "encoder.onnx",
                             input_names=("input_ids", "attention_mask")).path
    specs, _ = graph_io(source)
    np.savez(folder / "calibration.npz", **make_feeds(specs, 64, seed=1, constraints=constraints_of(source)))
    result = portable.quantize(source, folder / "encoder.int8.onnx", calibration=folder / "calibration.npz",
                               latency=False, per_node=False)
    assert result.written and result.budgets_ok
    return source, result.path, loaded


def _compare(path: Path, loaded, **options):
    return portable.compare(path, loaded.module, example_inputs=loaded.example_inputs, device="cpu",
                            compile_mode=None, providers="cpu", batches=[1, 3], timing=None, **options)


def test_an_int8_file_is_judged_by_cosine_and_sqnr_at_the_budgets_its_manifest_records(files) -> None:
    _, int8, loaded = files
    report = _compare(int8, loaded)
    assert report.passed, report.failures  # was: every output beyond fp32's atol 1e-4
    embedding, logits = report.parity[0].outputs
    assert embedding.judge is not None and embedding.judge.figure == "cosine" and embedding.judge.limit == 0.99
    # quantize's default floor judges by kind: the manifest's quantization.judged says which figure and limit
    assert f"the file's manifest judges {embedding.output!r} by cosine" in embedding.judge.why
    assert "the int8-qdq file's quantization.judged (quantize's default floor)" in embedding.judge.why
    assert logits.judge is not None and (logits.judge.figure, logits.judge.limit) == ("sqnr", 20.0)
    assert "the int8-qdq file's quantization.judged (quantize's default floor)" in logits.judge.why
    assert all(o.stats.max_abs > 1e-4 for p in report.parity for o in p.outputs)  # fp32's atol would fail each
    assert embedding.judgement().startswith(f"output {embedding.output!r}: cosine >= 0.99: ")
    assert embedding.tolerance.describe() == "cosine >= 0.99" and logits.tolerance.describe() == "SQNR >= 20 dB"
    row = report.to_dict()["parity"][0]["outputs"][0]
    assert row["judge"]["figure"] == "cosine" and row["judge"]["measured"] >= 0.99


def test_the_users_atol_still_judges_alone_and_fails_the_int8_file(files) -> None:
    from portable.runners.tolerances import parse_overrides

    _, int8, loaded = files
    report = _compare(int8, loaded, tolerances=parse_overrides(["1e-4"], []))
    assert not report.passed and all(o.judge is None for p in report.parity for o in p.outputs)


def test_a_broken_int8_file_fails_by_its_figure(files, tmp_path: Path) -> None:
    """The embedding table's scale doubled: judged by the same figures, the file fails, and the verdict says by
    which figure and how far."""
    _, int8, loaded = files
    model = onnx.load(str(int8))
    broken = next(i for i in model.graph.initializer if i.name == "embed.weight_scale")
    broken.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(broken) * 2, broken.name))
    path = tmp_path / "broken.int8.onnx"
    onnx.save(model, str(path))
    shutil.copy(f"{int8}.json", f"{path}.json")
    report = _compare(path, loaded)
    assert not report.passed
    problems = [p for pair in report.parity for p in pair.problems()]
    assert any("under SQNR >= 20 dB" in p for p in problems), problems


def test_read_quantized_reads_the_per_output_figure_quantize_records() -> None:
    manifest = {"precision": "int8-qdq", "quantization": {
        "budgets": {"min_sqnr_db": 25.0, "min_cosine": 0.995, "default_floor": False},
        "accuracy": [{"output": "emb", "judged_by": "cosine"}, {"output": "logits", "judged_by": "top1"}]}}
    figures = read_quantized(manifest, "m.int8.onnx.json")
    assert figures is not None and (figures.min_cosine, figures.min_sqnr_db) == (0.995, 25.0)
    logits = figures.judge("logits", np.ones((2, 5), np.float32))
    assert logits is not None and logits.figure == "sqnr" and "judges 'logits' by top1" in logits.why
    emb = figures.judge("emb", np.ones((2, 5), np.float32))  # not unit norm: the manifest's word decides
    assert emb is not None and emb.figure == "cosine" and emb.limit == 0.995
    assert read_quantized({"precision": "fp32"}, "m.onnx.json") is None


def test_min_cosine_and_min_sqnr_judge_a_float_file_from_the_cli(files, cli) -> None:
    source, _, _ = files
    passed = cli("compare", str(source), "--reference", SPEC, "--no-latency", "--no-compile", "--min-cosine", "0.9999",
                 "--min-sqnr", "60", "--device", "cpu")
    assert passed.exit_code == 0, passed.output
    assert "judged: output" in passed.stdout and "cosine >= 0.9999: " in passed.stdout
    assert "given (--min-sqnr)" in passed.stdout and "input 'attention_mask': a padding mask" in passed.stdout
    failed = cli("compare", str(source), "--reference", SPEC, "--no-latency", "--no-compile", "--min-sqnr", "250",
                 "--device", "cpu")
    assert failed.exit_code == 1 and "SQNR >= 250 dB: " in failed.stdout and "parity: FAIL" in failed.stdout


def test_compare_runtime_judges_the_int8_file_as_quantize_did(files, cli) -> None:
    _, int8, _ = files
    result = cli("compare", str(int8), "--runtime", "ort", "--reference", SPEC, "--format", "json")
    assert result.exit_code == 0, result.output  # was: 0.064 at atol 1e-4 (issue 48)
    records = json.loads(result.stdout)["records"]
    assert {r["status"] for r in records} == {"pass"}
    assert all(r["tolerance"] == "SQNR >= 20 dB; cosine >= 0.99" for r in records), records
