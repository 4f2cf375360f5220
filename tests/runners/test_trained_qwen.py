"""The text-generation proof on a second trained decoder, one over the 2 GiB contract limit in float32 (issue 34):
Qwen2.5-Coder-0.5B-Instruct (Qwen2: q/k/v biases, grouped-query attention 14/2, an untied head, a vocabulary
of 151,936), from the GGUF file ``make qwen25`` installs in six wheels (``fixtures/models/qwen25.py``; the
tests skip without them: 490 MB, not part of ``make venv``). The SPEC ``:first_layers`` keeps the trained
embedding, the first 2 of the 24 layers, the final norm and the head: an fp16 pair of 2 x 0.6 GB, exported at
C 96, P 32 with the 20-token prompt's padded block and proven by the export at fp16's tolerance. One fault a
real export or host loop could have fails it: the cache written one slot late, and a weight off by 1 % fails
teacher forcing against the model in float16."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from support import FIXTURES

import portable.runners.generation as generation

SPEC = f"{FIXTURES / 'models' / 'qwen25.py'}"
PROMPT = "The capital of France is"
README = FIXTURES.parent / "README.md"
pytestmark = pytest.mark.slow
# Teacher forcing of the fp16 pair against the model in fp16 over the README's first 480 tokens (5 windows of
# 96), max |log-prob diff|: 0.018 nats for the model itself, 0.062 with layer 1's down_proj x 1.01 (means
# 0.0035 and 0.0137). The float pair's default budget (0.01) is below fp16's own noise.
FP16_LOGPROB = 0.035


def _fixture():
    found = importlib.util.spec_from_file_location("qwen25_fixture", SPEC)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def qwen_file():
    """The checked GGUF file, or a skip when the wheels are not installed (``make qwen25``)."""
    fixture = _fixture()
    try:
        return fixture.gguf_path()
    except fixture.GGUFMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def qwen16(qwen_file, tmp_path_factory):
    """``(export result, the trained model in float32)``: the fp16 pair at C 96, P 32, proven by the export."""
    from portable.exporters.textgen import export_text_generation_spec
    from portable.spec import load_spec

    out = tmp_path_factory.mktemp("qwen25") / "qwen16"
    result = export_text_generation_spec(f"{SPEC}:first_layers", out, context=96, prefill=32, tokens=16,
                                         precision="fp16")
    return result, load_spec(f"{SPEC}:first_layers").module


def _half(model):
    from portable.exporters.job import convert_precision

    half, _ = convert_precision(model, (), "fp16")
    return half


def test_the_fixture_checks_the_joined_file(qwen_file, tmp_path, monkeypatch):
    fixture = _fixture()
    assert qwen_file.stat().st_size == fixture.SIZE
    wrong = tmp_path / "wrong.gguf"
    wrong.write_bytes(b"GGUF" + bytes(60))
    monkeypatch.setenv(fixture.ENV, str(wrong))
    with pytest.raises(fixture.GGUFMismatch, match="expected 1d9614638d18"):
        fixture.gguf_path()
    monkeypatch.setenv(fixture.ENV, str(tmp_path / "absent.gguf"))
    with pytest.raises(fixture.GGUFMissing, match="no such file"):
        fixture.gguf_path()


def test_the_fp16_pair_of_the_trained_layers_passes_its_proof_through_the_padded_block(qwen16):
    result, model = qwen16
    proof = result.proof.to_dict()
    (comparison,) = proof["comparisons"]
    assert proof["passed"] and comparison["tokens_identical"], result.proof.message()
    assert proof["setup"]["prompt_length"] == 20 and proof["setup"]["prefill_tokens"] == 32  # a padded block
    assert comparison["tolerance"]["source"] == "default float16"
    assert proof["logits_spread"] > 1 and proof["distinct_tokens"] >= 3  # trained logits, not a flat vector
    assert result.manifest["precision"] == "fp16" and result.manifest["cache"]["dtype"] == "float16"
    assert not model.config.tie_word_embeddings  # the untied head: two vocabulary-sized tables
    size = result.prefill.path.stat().st_size
    assert 0.55e9 < size < 0.65e9 and abs(result.decode.path.stat().st_size - size) < 1e6  # 302M params in fp16


def test_the_pair_generates_from_the_models_own_tokenizer_as_generate_does(qwen16):
    from portable.runners.generation import PairFiles, PairSession, torch_generate
    from portable.runners.generation_report import compare_traces
    from portable.runners.tolerances import DEFAULT_TOLERANCES

    result, model = qwen16
    tokenizer = _fixture().tokenizer()
    ids = np.array([tokenizer(PROMPT)["input_ids"]], np.int64)
    assert tokenizer.decode(ids[0]) == PROMPT and ids.shape[1] == 5
    ours = PairSession(PairFiles.find(result.manifest_path)).generate(ids, 8)
    comparison = compare_traces(ours, torch_generate(_half(model), ids, 8), DEFAULT_TOLERANCES["float16"])
    assert comparison.passed, comparison.message()


def test_the_cache_written_one_slot_late_fails_the_fp16_proof(qwen16, monkeypatch):
    from portable.runners.textgen import compare_text_generation

    result, model = qwen16
    original = generation.step_feeds

    def feeds(context, ids, position, tokens):
        out = dict(original(context, ids, position, tokens))
        if tokens == 1:
            out["cache_position"] = out["cache_position"] + 1  # each new key lands one slot late
        return out

    monkeypatch.setattr(generation, "step_feeds", feeds)
    report = compare_text_generation(result.manifest_path, _half(model), tokens=12, compile=False)
    (comparison,) = report.comparisons
    assert not report.passed and report.exit_code == 1 and comparison.first_logits_beyond == 1, comparison.message()


def test_a_weight_off_by_one_percent_fails_teacher_forcing_against_the_model_in_fp16(qwen16):
    """The fp16 pair against the model in fp16, and against it with one weight off by 1 %: the budget on the
    log-probabilities (fp16's, FP16_LOGPROB) passes the first and fails the second."""
    import copy

    import torch

    from portable.runners.generation import PairFiles, PairSession
    from portable.runners.teacher_forced import Budgets, teacher_forced
    from portable.runners.textgen import text_for

    result, model = qwen16
    text = text_for(f"{SPEC}:first_layers", model, None, README)
    session = PairSession(PairFiles.find(result.manifest_path))
    budgets = Budgets(0.99, 1.01, FP16_LOGPROB)  # 2 layers, 480 tokens: tighter than the fp16 default (0.1)
    assert Budgets.of(False, precision="fp16").max_logprob_diff > FP16_LOGPROB
    good = teacher_forced(session, _half(model), text.teacher[:, :480], budgets)
    assert good.passed and good.windows == 5 and good.tokens > 400, good.message()
    scaled = copy.deepcopy(model)
    with torch.no_grad():
        scaled.model.layers[1].mlp.down_proj.weight.mul_(1.01)
    off = teacher_forced(session, _half(scaled), text.teacher[:, :480], budgets)
    assert not off.passed and off.max_abs_logprob > FP16_LOGPROB, off.message()
    assert off.mean_abs_logprob > 2 * good.mean_abs_logprob and math.isfinite(off.ppl_ratio)


def test_the_makefile_checks_the_same_digest_as_the_fixture():
    """`make qwen25` checks the joined file with `sha256sum -c` against QWEN25_SHA256: the fixture's SHA256, not a
    second number that could drift from it (runs without the wheels)."""
    makefile = (FIXTURES.parent / "Makefile").read_text()
    (line,) = [row for row in makefile.splitlines() if row.startswith("QWEN25_SHA256 :=")]
    assert line.split(":=")[1].strip() == _fixture().SHA256
    assert "sha256sum -c" in makefile
