"""CUDA runs (marked ``gpu``; skipped where PyTorch sees no CUDA device; the ONNX Runtime CUDA
provider's tests also where onnxruntime has no CUDA provider)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support import runner_spec

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _ort_has_cuda() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


needs_ort_cuda = pytest.mark.skipif(not _ort_has_cuda(), reason="needs onnxruntime's CUDA provider")
QUICK = ["--warmup-ms", "20", "--warmup-max-ms", "500", "--iterations", "5", "--duration-ms", "50"]


def run_json(cli, *args: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    result = cli("compare", *args, "--format", "json", "-q")
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def test_compare_on_cuda_passes_with_cuda_events_and_cuda_memory(cli, cnn_onnx: Path) -> None:
    result = cli("compare", str(cnn_onnx), "--reference", runner_spec("cnn"), "--device", "cuda", "--batch", "1,8",
                 "--format", "json", "-q", "--ep", "cpu", *QUICK)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["setup"]["device"] == "cuda" and data["setup"]["tf32"] is False
    torch_rows = [r for r in data["latency"] if r["runner"] in ("eager", "compiled")]
    assert torch_rows and all(r["timer"] == "cuda_events" and r["memory_kind"] == "cuda_max_memory_allocated"
                              and r["peak_memory_bytes"] > 0 for r in torch_rows)
    assert any("TF32 off" in n for n in data["notes"])


def test_perturbed_model_fails_on_cuda(cli, cnn_scaled_onnx: Path) -> None:
    result = cli("compare", str(cnn_scaled_onnx), "--reference", runner_spec("cnn"), "--device", "cuda", "--no-compile",
                 "--no-latency", "-q")
    assert result.exit_code == 1 and "parity: FAIL" in result.stdout


@needs_ort_cuda
def test_ort_cuda_in_strict_fp32_passes_and_reports_options_memory_and_warm_up(cli, cnn_onnx: Path) -> None:
    code, data, err = run_json(cli, str(cnn_onnx), "--reference", runner_spec("cnn"), "--device", "cuda", "--batch", "1,8",
                               "--ep", "cuda,cuda-graph,cpu", "--compile-mode", "default", *QUICK)
    assert code == 0, err
    options = data["setup"]["provider_options"]
    assert options["ort-cuda"]["use_tf32"] == "0" and options["ort-cuda"]["enable_cuda_graph"] == "0"
    assert options["ort-cuda-graph"]["enable_cuda_graph"] == "1" and options["ort-cuda-graph"]["use_tf32"] == "0"
    ort_rows = [r for r in data["latency"] if r["runner"] in ("ort-cuda", "ort-cuda-graph")]
    assert len(ort_rows) == 4
    assert all(r["memory_kind"].endswith("_used_growth") and r["peak_memory_bytes"] > 0 for r in ort_rows)
    assert all(r["warmup"]["iterations"] > 0 and r["rounds"] >= 5 for r in data["latency"])
    pairs = {(p["actual"], p["expected"]) for p in data["parity"]}
    assert ("ort-cuda", "eager") in pairs and ("ort-cuda-graph", "eager") in pairs


@needs_ort_cuda
def test_tf32_mode_reaches_the_cuda_provider(cli, cnn_onnx: Path) -> None:
    code, data, err = run_json(cli, str(cnn_onnx), "--reference", runner_spec("cnn"), "--device", "cuda", "--ep", "cuda",
                               "--no-compile", "--no-latency", "--tf32")
    assert code == 0, err
    assert data["setup"]["numerics"] == "tf32" and data["setup"]["provider_options"]["ort-cuda"]["use_tf32"] == "1"


@needs_ort_cuda
def test_scaled_weight_fails_ort_cuda_against_eager_in_strict_mode(cli, cnn_scaled_onnx: Path) -> None:
    code, data, _ = run_json(cli, str(cnn_scaled_onnx), "--reference", runner_spec("cnn"), "--device", "cuda", "--ep", "cuda",
                             "--no-compile", "--no-latency")
    assert code == 1 and any(f.startswith("ort-cuda vs eager") for f in data["failures"])


@needs_ort_cuda
def test_cuda_graph_runner_gives_the_plain_cuda_outputs_for_each_batch(models, cnn_onnx: Path) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from portable.runners.inputs import graph_io, make_feeds
    from portable.runners.ort_runner import CUDA, OnnxRuntimeRunner

    specs, _ = graph_io(cnn_onnx)
    plain, graph = OnnxRuntimeRunner(cnn_onnx, CUDA), OnnxRuntimeRunner(cnn_onnx, CUDA, cuda_graph=True)
    plain.load()
    graph.load()
    for batch, seed in ((1, 0), (8, 0), (1, 1), (8, 2)):  # replays after capture read the new inputs
        feeds = make_feeds(specs, batch, seed=seed)
        expected = plain.infer(feeds)[0]
        assert np.abs(expected).max() > 0
        np.testing.assert_allclose(graph.infer(feeds)[0], expected, rtol=1e-5, atol=1e-5)


@needs_ort_cuda
def test_bf16_feeds_reach_ort_cuda_bound_and_in_cuda_graphs(models, onnx_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """A bfloat16 input is drawn in float32 (the feeds are shared with PyTorch) and must reach the CUDA
    provider as bfloat16 on the device: ``session.run`` and ``ortvalue_from_numpy`` refuse ml_dtypes arrays."""
    import ml_dtypes
    import numpy as np

    from portable.runners.inputs import graph_io, host_array, make_feeds
    from portable.runners.ort_runner import CUDA, OnnxRuntimeRunner

    module, example = models.widened_bf16()
    path = Path(models.export(module, example, str(onnx_dir / "widened_bf16_cuda.onnx"), [{0: "batch"}]))
    specs, _ = graph_io(path)
    runners = [OnnxRuntimeRunner(path), OnnxRuntimeRunner(path, CUDA), OnnxRuntimeRunner(path, CUDA, cuda_graph=True)]
    for runner in runners:
        runner.load()
    cpu, plain, graph = runners
    for batch, seed in ((4, 0), (4, 1), (1, 2)):
        feeds = make_feeds(specs, batch, seed=seed)
        expected = cpu.infer(feeds)[0]
        assert expected.dtype == ml_dtypes.bfloat16 and np.abs(expected.astype(np.float32)).max() > 0.5
        step = plain.prepare(feeds)  # I/O binding: inputs copied to the device once
        step()
        plain.synchronize()
        got = {"infer": plain.infer(feeds)[0], "bound": host_array(plain._binding.get_outputs()[0]),
               "graph": graph.infer(feeds)[0]}
        for name, out in got.items():
            assert out.dtype == ml_dtypes.bfloat16, name
            np.testing.assert_allclose(out.astype(np.float32), expected.astype(np.float32), atol=0.02, err_msg=name)


@needs_ort_cuda
def test_compare_runs_a_bf16_input_graph_on_ort_cuda(cli, models, onnx_dir: Path) -> None:  # type: ignore[no-untyped-def]
    module, example = models.widened_bf16()
    path = Path(models.export(module, example, str(onnx_dir / "widened_bf16_cmp.onnx"), [{0: "batch"}]))
    code, data, err = run_json(cli, str(path), "--reference", runner_spec("widened_bf16"), "--device", "cuda",
                               "--ep", "cuda,cuda-graph,cpu", "--no-compile", "--batch", "1,4", *QUICK)
    assert code == 0, (err, data.get("failures"))
    pairs = [p for p in data["parity"] if p["actual"].startswith("ort-cuda")]
    assert {p["actual"] for p in pairs} == {"ort-cuda", "ort-cuda-graph"}
    assert all(p["passed"] and {o["dtype"] for o in p["outputs"]} == {"bfloat16"} for p in pairs)
    assert all(o["rms_expected"] > 0.5 for p in pairs for o in p["outputs"])
    assert {r["runner"] for r in data["latency"]} >= {"ort-cuda", "ort-cuda-graph"}


@needs_ort_cuda
def test_text_generation_on_the_gpu_from_the_cli_times_all_three_on_one_gpu(cli, tiny_llm_pair) -> None:  # type: ignore[no-untyped-def]
    """`compare --task text-generation --device cuda` (issue 34): the pair on ONNX Runtime's CUDA provider
    against eager and compiled generate on the same GPU, TTFT, decode p50/p90 and tokens/s for each."""
    from support import FIXTURES

    result, _ = tiny_llm_pair
    code, data, err = run_json(cli, str(result.manifest_path), "--reference", f"{FIXTURES / 'models' / 'tiny_llm.py'}:llama",
                               "--task", "text-generation", "--device", "cuda", "--tokens", "16", *QUICK)
    assert code == 0 == data["exit_code"] and data["setup"]["device"] == "cuda", err
    assert data["setup"]["cuda_graph"] is True  # the default on a cuda device
    assert {c["reference"] for c in data["comparisons"]} == {"torch-eager", "torch-compiled"}
    assert set(data["latency"]) == {"onnxruntime-cuda", "torch-eager-cuda", "torch-compiled-cuda"}
    for figures in data["latency"].values():
        assert figures["ttft"]["p50_s"] > 0 and figures["decode"]["p90_s"] >= figures["decode"]["p50_s"] > 0
        assert figures["tokens_per_s"] > 0 and figures["new_tokens"] == 16


@needs_ort_cuda
def test_the_cuda_graph_decode_gives_the_plain_cuda_steps_and_the_cli_can_turn_it_off(cli, tiny_llm_pair) -> None:  # type: ignore[no-untyped-def]
    import numpy as np
    from support import FIXTURES

    from portable.runners.generation import PairFiles, PairSession, prompt_ids

    result, _ = tiny_llm_pair
    files = PairFiles.find(result.manifest_path)
    cuda = [("CUDAExecutionProvider", {"use_tf32": "0"})]
    plain = PairSession(files, cuda, device="cuda").generate(prompt_ids(1, 11, 512, 3), 20)
    graphs = PairSession(files, cuda, device="cuda", cuda_graph=True)
    for _ in range(2):  # captured on the first generation, replayed on the second, from zeros each time
        replayed = graphs.generate(prompt_ids(1, 11, 512, 3), 20)
        assert np.array_equal(replayed.tokens, plain.tokens)
        assert max(float(np.abs(a - b).max()) for a, b in zip(replayed.logits, plain.logits)) <= 1e-5
    code, data, err = run_json(cli, str(result.manifest_path), "--reference", f"{FIXTURES / 'models' / 'tiny_llm.py'}:llama",
                               "--task", "text-generation", "--device", "cuda", "--ep", "cuda", "--tokens", "8",
                               "--no-latency", "--no-compile")
    assert code == 0 and data["setup"]["cuda_graph"] is False, err
