"""The ONNX Runtime runner's I/O binding (the path GPU providers are timed through), run on the CPU device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from portable.runners.inputs import graph_io, make_feeds
from portable.runners.ort_runner import bind_io


def test_io_binding_gives_the_outputs_of_a_plain_run(encoder_onnx: Path) -> None:
    session = ort.InferenceSession(str(encoder_onnx), providers=["CPUExecutionProvider"])
    specs, outputs = graph_io(encoder_onnx)
    feeds = make_feeds(specs, 3, dims={specs[0].shape[1]: 8}, int_range=(0, 50))
    binding = bind_io(session, feeds, "cpu")
    session.run_with_iobinding(binding)
    binding.synchronize_outputs()
    bound = binding.copy_outputs_to_cpu()
    plain = session.run(None, feeds)
    assert len(bound) == len(plain) == len(outputs) == 2
    for got, expected in zip(bound, plain):
        assert got.shape == expected.shape and np.array_equal(got, expected)
    session.run_with_iobinding(binding)  # a second timed step reuses the bound inputs
    assert np.array_equal(binding.copy_outputs_to_cpu()[0], plain[0])


def _runner_feeds(path: Path, batch: int, seed: int) -> dict[str, np.ndarray]:
    specs, _ = graph_io(path)
    dims = {d: 8 for s in specs for d in (s.shape or ())[1:] if isinstance(d, str)}
    return make_feeds(specs, batch, seed=seed, dims=dims, int_range=(0, 50))


def test_static_binding_matches_a_plain_run_and_keeps_its_buffers(encoder_onnx: Path) -> None:
    from portable.runners.ort_runner import StaticBinding

    session = ort.InferenceSession(str(encoder_onnx), providers=["CPUExecutionProvider"])
    first, second = _runner_feeds(encoder_onnx, 3, 0), _runner_feeds(encoder_onnx, 3, 1)
    bound = StaticBinding(session, first, "cpu", graph_id=1)
    bound.run(session)
    for got, expected in zip(bound.fetch(), session.run(None, first)):
        assert np.array_equal(got, expected)
    addresses = [v.data_ptr() for v in (*bound.inputs.values(), *bound.outputs)]
    bound.update(second)  # new values into the same buffers, as a replayed CUDA graph needs
    bound.run(session)
    assert [v.data_ptr() for v in (*bound.inputs.values(), *bound.outputs)] == addresses
    got, expected = bound.fetch()[0], session.run(None, second)[0]
    assert np.array_equal(got, expected) and not np.array_equal(got, session.run(None, first)[0])


def test_static_binding_refuses_an_output_shape_the_inputs_do_not_fix(tmp_path: Path) -> None:
    import onnx
    import pytest
    from onnx import TensorProto, helper

    from portable.runners.base import RunnerFailed
    from portable.runners.ort_runner import StaticBinding

    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2, "nonzero"])])
    path = tmp_path / "nonzero.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8  # what any onnxruntime reads, whatever onnx wrote by default
    onnx.save(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(RunnerFailed, match=r"output 'y' has shape \[2, 'nonzero'\]"):
        StaticBinding(session, {"x": np.ones((2, 3), np.float32)}, "cpu", graph_id=1)


def test_graph_runner_path_keeps_one_binding_per_batch_size(cnn_onnx: Path) -> None:
    """The cuda-graph runner's infer/prepare path, run on the CPU device (no graph is captured there)."""
    from portable.runners.ort_runner import OnnxRuntimeRunner

    plain = ort.InferenceSession(str(cnn_onnx), providers=["CPUExecutionProvider"])
    runner = OnnxRuntimeRunner(cnn_onnx)
    runner.load()
    runner.cuda_graph = True  # the CUDA provider's path, on the CPU device
    for batch, seed in ((2, 0), (4, 0), (2, 1)):
        feeds = _runner_feeds(cnn_onnx, batch, seed)
        assert np.array_equal(runner.infer(feeds)[0], plain.run(None, feeds)[0])
    step = runner.prepare(_runner_feeds(cnn_onnx, 4, 2))
    step()
    assert len(runner._static) == 2
    assert [b.run_options.get_run_config_entry("gpu_graph_id") for b in runner._static.values()] == ["1", "2"]


def test_provider_options_follow_the_numerics_mode() -> None:
    from portable.runners.ort_runner import CUDA, provider_options

    strict, tf32 = provider_options(CUDA, tf32=False), provider_options(CUDA, tf32=True, cuda_graph=True)
    assert strict["use_tf32"] == "0" and strict["enable_cuda_graph"] == "0"
    assert tf32["use_tf32"] == "1" and tf32["enable_cuda_graph"] == "1"
    assert strict["cudnn_conv_algo_search"] == "EXHAUSTIVE" and "arena_extend_strategy" in strict
    assert provider_options("TensorrtExecutionProvider", tf32=False)["trt_fp16_enable"] == "False"
    assert provider_options("CPUExecutionProvider", tf32=True) == {}


def test_resolve_eps_knows_cuda_graph_and_refuses_it_elsewhere(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from portable.errors import UsageError
    from portable.runners import ort_runner
    from portable.runners.ort_runner import CUDA, EpChoice, resolve_eps

    monkeypatch.setattr(ort_runner, "available_providers", lambda: [CUDA, "CPUExecutionProvider"])
    assert resolve_eps("cuda,cuda-graph,cpu,cuda") == [EpChoice(CUDA), EpChoice(CUDA, True),
                                                       EpChoice("CPUExecutionProvider")]
    with pytest.raises(UsageError, match="CUDA provider only"):
        resolve_eps("cpu-graph")
    with pytest.raises(UsageError, match="CUDA graphs"):
        ort_runner.OnnxRuntimeRunner("m.onnx", "CPUExecutionProvider", cuda_graph=True)


def test_resolve_eps_knows_nhwc_in_either_order_and_refuses_it_elsewhere(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from portable.errors import UsageError
    from portable.runners import ort_runner
    from portable.runners.ort_runner import CUDA, EpChoice, provider_options, resolve_eps

    monkeypatch.setattr(ort_runner, "available_providers", lambda: [CUDA, "CPUExecutionProvider"])
    got = resolve_eps("cuda-nhwc,cuda-graph-nhwc,cuda-nhwc-graph")
    assert got == [EpChoice(CUDA, False, True), EpChoice(CUDA, True, True)]
    assert [c.name for c in got] == ["ort-cuda-nhwc", "ort-cuda-graph-nhwc"]
    assert provider_options(CUDA, tf32=False, nhwc=True)["prefer_nhwc"] == "1"
    assert provider_options(CUDA, tf32=False)["prefer_nhwc"] == "0"
    with pytest.raises(UsageError, match="CUDA provider only"):
        resolve_eps("cpu-nhwc")
    with pytest.raises(UsageError, match="NHWC"):
        ort_runner.OnnxRuntimeRunner("m.onnx", "CPUExecutionProvider", nhwc=True)


def test_runner_reports_the_options_ort_gives_back(cnn_onnx: Path) -> None:
    from portable.runners.ort_runner import OnnxRuntimeRunner

    runner = OnnxRuntimeRunner(cnn_onnx, tf32=True)
    runner.load()
    assert runner.options == {} and runner.describe()["provider_options"] == runner.effective_options
