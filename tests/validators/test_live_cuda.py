"""The live ort-cuda answer: ONNX Runtime's own "no CUDA kernel" lines set against the offline profile.

The GPU run itself is in docs/gpu (no CUDA provider in CI); here, what can be checked on any machine: the
log lines it reads (as ONNX Runtime 1.31 writes them), the comparison, and the answer where the provider is
absent."""

from __future__ import annotations

from collections import Counter

# ONNX Runtime's INFO lines (cuda_execution_provider.cc, GetCapability), as a session log holds them
_LOG = ("2026-12-03 10:00:00.1 [I:onnxruntime:, cuda_execution_provider.cc:2713 GetCapability] CUDA kernel not found "
        "in registries for Op type: Det node name: node_Det_3\n"
        "2026-12-03 10:00:00.1 [I:onnxruntime:, cuda_execution_provider.cc:2713 GetCapability] CUDA kernel not found "
        "in registries for Op type: Det node name: node_Det_7\n"
        "2026-12-03 10:00:00.2 [I:onnxruntime:, transformer_memcpy.cc:393 AddCopyNode] Add MemcpyFromHost\n")


def test_the_ops_without_a_cuda_kernel_are_read_from_onnx_runtimes_log() -> None:
    from portable.validators.targets.live import _no_kernel

    assert _no_kernel([_LOG, ""]) == Counter({"Det": 2})
    assert _no_kernel([_LOG, _LOG]) == Counter({"Det": 2})  # asked twice, the same two nodes
    assert _no_kernel(["[I:onnxruntime:, session_state.cc] All nodes placed on [CUDAExecutionProvider]"]) == Counter()


def test_offline_and_live_are_compared_op_by_op() -> None:
    from portable.validators.targets.live import _disagreements

    assert _disagreements(Counter({"Det": 2}), Counter({"Det": 2})) == "0"
    assert _disagreements(Counter(), Counter()) == "0"
    differ = _disagreements(Counter({"DequantizeLinear": 50, "Det": 2}), Counter({"Det": 2, "Unique": 1}))
    assert differ == "2: DequantizeLinear (offline 50, ORT 0), Unique (offline 0, ORT 1)"


def test_without_the_cuda_provider_the_answer_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import onnxruntime as ort
    import pytest
    from onnx import helper

    from portable.report import TargetSummary
    from portable.validators.targets.live import ask

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider (the GPU run covers it)")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", 1, [1, 2])],
                              [helper.make_tensor_value_info("y", 1, [1, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    answer = dict(ask("ort-cuda", model.SerializeToString(), Counter()))
    assert answer["runtime"].startswith("onnxruntime ")
    assert answer["verdict"].startswith("not installed (this onnxruntime has no CUDA provider")
    live = (("runtime", "onnxruntime 1.31.1"), ("verdict", "loads"), ("disagreements", "1: Det (offline 0, ORT 2)"))
    line = TargetSummary(name="ort-cuda", nodes=1, supported=1, partitions=1, fallback=(), falls_back=True, live=live)
    assert line.line().endswith("live (onnxruntime 1.31.1): loads; offline and live disagree on 1: Det (offline 0, ORT 2)")


def test_the_seeded_run_feeds_every_input_of_the_session_and_names_a_type_it_cannot(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The live question's one run (where a kernel that refuses its input shows): shaped and typed from the
    session, integers valid as indices; here on the CPU provider, the run itself is what the GPU call makes."""
    import numpy as np
    import onnxruntime as ort
    import pytest
    from onnx import TensorProto, helper

    from portable.validators.targets.live import _run_once, _seeded_feeds

    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"]), helper.make_node("Add", ["rows", "x"], ["y"])], "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 3]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("table", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = _seeded_feeds(session)
    assert feeds["ids"].shape == (1, 3) and feeds["ids"].dtype == np.int64 and set(feeds["ids"].ravel()) <= {0, 1}
    assert feeds["x"].shape == (1, 3, 2) and feeds["x"].dtype == np.float32
    assert _run_once(session) == "a run on seeded inputs succeeds"
    strings = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["s"], ["t"])], "g", [helper.make_tensor_value_info("s", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, [1])]), opset_imports=[helper.make_opsetid("", 18)],
        ir_version=9)
    texts = ort.InferenceSession(strings.SerializeToString(), providers=["CPUExecutionProvider"])
    assert _run_once(texts).startswith("a run fails: ") and "tensor(string)" in _run_once(texts)
    with pytest.raises(ValueError, match="no seeded value"):
        _seeded_feeds(texts)
