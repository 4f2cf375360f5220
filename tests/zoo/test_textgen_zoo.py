"""The text-generation zoo: six decoder families (transformers' own classes, tiny configs, random weights of
``fixtures/models/tiny_llm.py``) exported with ``--task text-generation`` at C = 256, P = 32, each graph
validated clean, the pair rules clean, and 32 greedy tokens identical to the model's eager ``generate``.
The weights give logits that vary (a spread above 0.1, several distinct tokens), so the proof is not on
a degenerate run."""

from __future__ import annotations

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


def test_the_fixture_families_are_the_zoo_families():
    assert set(tiny_llm().FAMILIES) == set(FAMILIES)
