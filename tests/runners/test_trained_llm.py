"""The text-generation proof on a trained decoder (issue 34): SmolLM2-135M-Instruct's trained weights
(``fixtures/models/smollm2.py:first_layers``: the trained embedding, first 2 of its 30 layers, final norm
and tied head; a vocabulary of 49,152), exported as a pair whose 20-token prompt leaves a padded prefill
block of 32. The pair passes; each fault a real export or host loop could have fails it: a weight off by
1 %, the cache written one slot off, the mask one slot short (one slot long is hidden by the causal mask)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from support import FIXTURES

import portable.runners.generation as generation
from portable.runners.textgen import compare_text_generation

SPEC = f"{FIXTURES / 'models' / 'smollm2.py'}"
PROMPT = "The capital of France is"
README = FIXTURES.parent / "README.md"  # a real text of about 1,770 SmolLM2 tokens
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    """``(export result, the trained model)``: the pair at C 96, P 32, proven by the export (16 tokens)."""
    from portable.exporters.textgen import export_text_generation_spec
    from portable.spec import load_spec

    out = tmp_path_factory.mktemp("smollm2") / "smol"
    result = export_text_generation_spec(f"{SPEC}:first_layers", out, context=96, prefill=32, tokens=16, prompt=PROMPT)
    return result, load_spec(f"{SPEC}:first_layers").module


def _compare(result, model, tokens=12):
    (comparison,) = compare_text_generation(result.manifest_path, model, tokens=tokens, compile=False).comparisons
    return comparison


def test_the_trained_pair_matches_generate_through_the_padded_block(smol):
    result, model = smol
    report = compare_text_generation(result.manifest_path, model, tokens=12, compile=False)
    (comparison,) = report.comparisons
    assert report.passed and report.exit_code == 0, comparison.message()
    assert report.setup["prompt_length"] == 20 and report.setup["prefill_tokens"] == 32  # a padded block
    assert comparison.tokens_identical and max(comparison.max_abs_per_step) < 1e-3
    assert report.logits_spread > 1 and report.distinct_tokens >= 3  # trained logits, not a flat vector


def test_the_exports_proof_generated_from_the_text_given(smol):
    result, _ = smol
    proof = result.proof.to_dict()
    assert proof["texts"]["prompt"] == PROMPT and proof["setup"]["seed"] is None
    assert proof["texts"]["onnxruntime"] == proof["texts"]["torch-eager"] and proof["passed"]
    assert len(proof["prompt"][0]) < 32  # the text's tokens in one padded block


def test_teacher_forcing_over_a_real_text_passes_and_each_budget_decides(smol):
    from portable.runners.generation import PairFiles, PairSession
    from portable.runners.teacher_forced import Budgets, teacher_forced
    from portable.runners.textgen import text_for

    result, model = smol
    text = text_for(f"{SPEC}:first_layers", model, None, README)
    session = PairSession(PairFiles.find(result.manifest_path))
    good = teacher_forced(session, model, text.teacher)
    assert good.passed and good.tokens >= 512 and good.windows > 1, good.message()
    assert good.top1 > 0.999 and good.max_abs_logprob < 1e-3 and abs(good.ppl_ratio - 1) < 1e-4
    scaled = copy.deepcopy(model)
    import torch

    with torch.no_grad():
        scaled.model.layers[1].mlp.down_proj.weight.mul_(1.01)
    off = teacher_forced(session, scaled, text.teacher)
    assert not off.passed and off.max_abs_logprob > 0.01, off.message()  # the log-probs see a 1 % weight
    loose = teacher_forced(session, scaled, text.teacher, Budgets(0.9, 1.05, float("inf")))
    assert loose.passed and loose.to_dict()["budgets"]["max_logprob_diff"] is None  # a quantized pair's budgets
    strict = teacher_forced(session, scaled, text.teacher, Budgets(1.0, 1.05, float("inf")))
    assert not strict.passed  # top-1 agreement alone decides here


def test_compare_takes_a_prompt_and_a_text_and_its_json_agrees_with_the_exit_code(smol, cli):
    import json

    result, _ = smol
    run = cli("compare", str(result.manifest_path), "--reference", f"{SPEC}:first_layers", "--task",
              "text-generation", "--prompt", PROMPT, "--text", str(README), "--tokens", "6", "--no-compile",
              "--no-latency", "--format", "json")
    data = json.loads(run.stdout)
    assert run.exit_code == 0 == data["exit_code"] and data["passed"], run.stderr[-2000:]
    assert "de-quantizing" not in run.stderr  # transformers' GGUF progress bar is library noise
    assert data["texts"]["prompt"] == PROMPT and data["teacher_forced"]["passed"]
    assert data["teacher_forced"]["tokens"] >= 512


def test_a_weight_off_by_one_percent_fails_on_the_trained_model(smol):
    import torch

    result, model = smol
    scaled = copy.deepcopy(model)
    with torch.no_grad():
        scaled.model.layers[1].mlp.down_proj.weight.mul_(1.01)
    comparison = _compare(result, scaled)
    assert not comparison.passed and comparison.first_logits_beyond is not None, comparison.message()


def _shifted(monkeypatch, edit):
    """The host loop's step inputs edited on every decode step (one token at a time)."""
    original = generation.step_feeds

    def feeds(context, ids, position, tokens):
        out = dict(original(context, ids, position, tokens))
        if tokens == 1:
            edit(out, context, position)
        return out

    monkeypatch.setattr(generation, "step_feeds", feeds)


def test_the_cache_written_one_slot_off_fails(smol, monkeypatch):
    result, model = smol

    def one_slot_on(out, context, position):
        out["cache_position"] = out["cache_position"] + 1  # each new key lands one slot late

    _shifted(monkeypatch, one_slot_on)
    comparison = _compare(result, model)
    assert not comparison.passed and comparison.first_logits_beyond == 1, comparison.message()


def _mask_shifted(monkeypatch, shift):
    def off(out, context, position):
        out["attention_mask"] = (np.arange(context) < position + 1 + shift).astype(np.int64)[None, :]

    _shifted(monkeypatch, off)


def test_a_mask_one_slot_short_hides_the_new_token_and_fails(smol, monkeypatch):
    result, model = smol
    _mask_shifted(monkeypatch, -1)
    comparison = _compare(result, model)
    assert not comparison.passed and comparison.first_logits_beyond == 1, comparison.message()


def test_a_mask_one_slot_long_is_hidden_by_the_graphs_causal_mask(smol, monkeypatch):
    """The slot after the new token is empty, and later than the query: the causal mask the graph builds from
    cache_position hides it, whatever attention_mask says (a graph without one would fail here)."""
    result, model = smol
    _mask_shifted(monkeypatch, 1)
    comparison = _compare(result, model)
    assert comparison.passed, comparison.message()


def test_the_tokenizer_beside_the_model_reads_real_text(smol):
    """The model's own tokenizer (from the GGUF file) round-trips a sentence; the pair generates from it as
    generate does."""
    import importlib.util

    from portable.runners.generation import PairFiles, PairSession, torch_generate
    from portable.runners.generation_report import compare_traces
    from portable.runners.tolerances import Tolerance

    result, model = smol
    found = importlib.util.spec_from_file_location("smollm2_fixture", SPEC)
    assert found is not None and found.loader is not None
    fixture = importlib.util.module_from_spec(found)
    found.loader.exec_module(fixture)
    tokenizer = fixture.tokenizer()
    text = "The capital of France is"
    ids = np.array([tokenizer(text)["input_ids"]], np.int64)
    assert tokenizer.decode(ids[0]) == text and ids.shape[1] < 32
    ours = PairSession(PairFiles.find(result.manifest_path)).generate(ids, 8)
    comparison = compare_traces(ours, torch_generate(model, ids, 8), Tolerance(1e-4, 1e-3))
    assert comparison.passed, comparison.message()


@pytest.fixture(scope="module")
def smol_w8(smol, tmp_path_factory, cli):
    """The weight-only int8 pair of the trained pair (``portable quantize NAME.textgen.json --weight-only``)."""
    import json

    result, _ = smol
    out = tmp_path_factory.mktemp("smollm2-w8") / "smol-w8"
    run = cli("quantize", str(result.manifest_path), "-o", str(out), "--weight-only", "--format", "json")
    assert run.exit_code == 0, run.output[-2000:]
    return json.loads(run.stdout)["weight_only"]


def test_the_weight_only_pair_is_a_quarter_of_the_size_and_portable(smol, smol_w8):
    import json

    import onnx

    result, _ = smol
    assert smol_w8["bytes_after"] < smol_w8["bytes_before"] / 3.5 and smol_w8["quantized_initializers"] == 9
    manifest = json.loads(open(smol_w8["manifest"]).read())
    assert manifest["quantization"]["source_weights_fingerprint"] == result.weights_fingerprint
    assert manifest["weights_fingerprint"] != result.weights_fingerprint and manifest["proof"] is None
    for path in smol_w8["files"]:
        model = onnx.load(path)
        assert {n.domain for n in model.graph.node} == {""} and model.opset_import[0].version == 18
        int8 = [i for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT8]
        assert len(int8) == 9 and sum(n.op_type == "DequantizeLinear" for n in model.graph.node) == 9


def _compare_w8(cli, manifest, *args):
    import json

    run = cli("compare", manifest, "--reference", f"{SPEC}:first_layers", "--task", "text-generation", "--tokens", "6",
              "--no-compile", "--no-latency", "--format", "json", *args)
    return run, (json.loads(run.stdout) if run.stdout.strip() else {})


def test_the_weight_only_pair_is_judged_by_budgets_on_real_text(smol_w8, cli):
    run, data = _compare_w8(cli, smol_w8["manifest"], "--text", str(README))
    assert run.exit_code == 0 == data["exit_code"] and data["judged_by"] == "budgets", run.stderr[-2000:]
    forced = data["teacher_forced"]
    assert forced["passed"] and forced["top1_agreement"] >= 0.9 and forced["budgets"]["max_logprob_diff"] is None
    assert forced["max_abs_logprob"] > 0.01  # int8 weights move the log-probs: identity would refuse it
    assert set(data["greedy_agreement"]) == {"torch-eager"}
    run, _ = _compare_w8(cli, smol_w8["manifest"], "--text", str(README), "--min-top1", "0.999")
    assert run.exit_code == 1  # the budget decides
    run, _ = _compare_w8(cli, smol_w8["manifest"])
    assert run.exit_code == 2 and "--text" in run.output


def test_a_weight_only_pair_with_a_wrong_scale_fails_its_budgets(smol_w8, cli, tmp_path):
    import shutil

    import onnx
    from onnx import numpy_helper

    for path in smol_w8["files"]:
        model = onnx.load(path)
        for index, init in enumerate(model.graph.initializer):
            if init.name.endswith("_scale") and init.dims[0] == 3072:  # the MLPs' gate/up projections' scales
                model.graph.initializer[index].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 2, init.name))
        onnx.save(model, tmp_path / path.split("/")[-1])
    shutil.copy(smol_w8["manifest"], tmp_path / "broken.textgen.json")  # its graphs' names: the copies beside it
    run, data = _compare_w8(cli, str(tmp_path / "broken.textgen.json"), "--text", str(README))
    assert run.exit_code == 1 and not data["teacher_forced"]["passed"], run.stderr[-2000:]


def test_another_models_tokenizer_is_a_usage_error_before_any_work(tmp_path, tiny_llm_pair, cli):
    """A SPEC whose tokenizer() is SmolLM2's (49,152 tokens) beside a model of 512: exit 2, nothing run."""
    result, _ = tiny_llm_pair
    spec = tmp_path / "mismatch.py"
    spec.write_text("import importlib.util\n"
                    f"_s = importlib.util.spec_from_file_location('smol_fixture', {SPEC!r})\n"
                    "_m = importlib.util.module_from_spec(_s)\n_s.loader.exec_module(_m)\n"
                    f"_t = importlib.util.spec_from_file_location('tiny_fixture', {str(FIXTURES / 'models' / 'tiny_llm.py')!r})\n"
                    "_n = importlib.util.module_from_spec(_t)\n_t.loader.exec_module(_n)\n"
                    "def model():\n    return _n.build('llama')\n"
                    "def tokenizer():\n    return _m.tokenizer()\n")
    run = cli("compare", str(result.manifest_path), "--reference", f"{spec}:model", "--task", "text-generation",
              "--prompt", PROMPT, "--no-compile", "--no-latency")
    assert run.exit_code == 2 and "49152 tokens and the model 512" in run.output, run.output


def test_an_empty_prompt_a_prompt_over_the_context_and_a_bf16_pair_are_refused_before_the_export(tmp_path, cli):
    out = tmp_path / "x"
    run = cli("export", f"{SPEC}:first_layers", "--task", "text-generation", "-o", str(out), "--prompt", " ")
    assert run.exit_code == 2 and "--prompt: the text is empty" in run.output
    run = cli("export", f"{SPEC}:first_layers", "--task", "text-generation", "-o", str(out), "--context", "16",
              "--prefill", "8", "--tokens", "8", "--prompt", PROMPT + " " + PROMPT)
    assert run.exit_code == 2 and "do not fit a context of 16" in run.output, run.output
    run = cli("export", f"{SPEC}:first_layers", "--task", "text-generation", "-o", str(out), "--precision", "bf16")
    assert run.exit_code == 2 and "use --precision fp16" in run.output
    assert not list(tmp_path.iterdir())


def test_an_fp16_pair_of_the_trained_layers_is_proven_at_half_the_size(smol, tmp_path, cli):
    """``--precision fp16``: the export proves the pair against the model in fp16, at fp16's tolerance."""
    from portable.exporters.textgen import export_text_generation_spec

    result, _ = smol
    half = export_text_generation_spec(f"{SPEC}:first_layers", tmp_path / "smol16", context=96, prefill=32, tokens=16,
                                       precision="fp16", prompt=PROMPT)
    proof = half.proof.to_dict()
    assert proof["passed"] and proof["texts"]["onnxruntime"] == proof["texts"]["torch-eager"], half.proof.message()
    size = lambda r: r.prefill.path.stat().st_size + r.decode.path.stat().st_size  # noqa: E731
    assert size(half) < 0.51 * size(result) and half.manifest["precision"] == "fp16"
    # and weight-only on it (the way out PORT010 names for a model too big in fp32): float32 scales behind opset
    # 18's DequantizeLinear, then a Cast to float16 (a float16 scale needs opset 19: PORT011 refused it)
    import json

    import onnx

    run = cli("quantize", str(half.manifest_path), "-o", str(tmp_path / "smol16-w8"), "--weight-only", "--format", "json")
    assert run.exit_code == 0, run.output[-2000:]
    done = json.loads(run.stdout)["weight_only"]
    count = done["quantized_initializers"]  # 2 layers' 7 projections (fp16 leaves q/k/v apart) and the head
    assert done["bytes_after"] < 0.6 * done["bytes_before"] and count >= 9
    for path in done["files"]:
        graph = onnx.load(path).graph
        scales = [i for i in graph.initializer if i.name.endswith("_scale")]
        assert len(scales) == count and {i.data_type for i in scales} == {onnx.TensorProto.FLOAT}
        assert sum(n.op_type == "Cast" and n.name.endswith("_cast") for n in graph.node) == count
    # compare holds the fp16 pair to the model in fp16, as the export's proof did (against fp32: fp16's rounding)
    run, data = _compare_w8(cli, str(half.manifest_path))
    assert run.exit_code == 0 == data["exit_code"] and data["setup"]["reference_precision"] == "fp16", run.output[-3000:]
