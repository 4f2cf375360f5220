"""The text-generation zoo: six decoder families (transformers' own classes, tiny configs, random weights of
``fixtures/models/tiny_llm.py``) exported with ``--task text-generation`` at C = 256, P = 32, each graph
validated clean, the pair rules clean, and 32 greedy tokens identical to the model's eager ``generate``.
The weights give logits that vary (a spread above 0.1, several distinct tokens), so the proof is not on
a degenerate run."""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from support import FIXTURES, tiny_llm

from portable.validators import validate
from portable.validators.pairs.engine import validate_pair

FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "phi3", "gpt_neox")


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_exports_as_a_pair_that_generates_the_same_32_tokens(family, tmp_path):
    from portable.exporters.textgen import export_text_generation_spec

    result = export_text_generation_spec(f"{FIXTURES / 'models' / 'tiny_llm.py'}:{family}", tmp_path / family)
    proof = result.proof
    assert proof is not None and proof.passed, proof.message() if proof else None
    assert proof.setup["context"] == 256 and len(proof.tokens[0]) == 32
    assert proof.distinct_tokens >= 8 and proof.logits_spread > 0.1 and not proof.warnings
    for path in (result.prefill.path, result.decode.path):
        assert validate(path).ok
        graph = onnx.load(str(path)).graph
        assert all(d.HasField("dim_value") for v in (*graph.input, *graph.output) for d in v.type.tensor_type.shape.dim)
    assert all(r.ok for r in validate_pair(result.prefill.path, result.decode.path, context=256))
    if importlib.util.find_spec("openvino") is not None:  # optional: `pip install openvino` (docs/llm.md)
        for path in (result.prefill.path, result.decode.path):
            _openvino_agrees(path)


def _feeds(session) -> dict[str, np.ndarray]:
    """One call at slot 3 over a random cache (the first 3 + T slots marked filled)."""
    rng, feeds = np.random.default_rng(0), {}
    for value in session.get_inputs():
        width = value.shape[1]  # T for the ids and positions, C for the mask
        feeds[value.name] = {"input_ids": np.arange(5, 5 + width)[None], "position_ids": np.arange(3, 3 + width)[None],
                             "cache_position": np.array([[3]]),
                             "attention_mask": (np.arange(width) < 3 + 32)[None].astype(np.int64)}.get(value.name)
        if feeds[value.name] is None:
            feeds[value.name] = rng.standard_normal(value.shape).astype(np.float32)
    return feeds


def _openvino_agrees(path) -> None:
    """OpenVINO CPU (fp32 inference, not its bf16 default on AMX hosts) loads the graph and matches ONNX Runtime."""
    import onnxruntime as ort
    import openvino as ov

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = _feeds(session)
    expected = session.run(None, feeds)
    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(feeds)
    for output, want in zip(compiled.outputs, expected):
        np.testing.assert_allclose(got[output], want, rtol=1e-3, atol=1e-4)


def test_the_fixture_families_are_the_zoo_families():
    assert set(tiny_llm().FAMILIES) == set(FAMILIES)
