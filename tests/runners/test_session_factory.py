"""The one ONNX Runtime session factory, ``portable.runners.sessions.session_from_onnx`` (issue 31): ONNX
Runtime's own reason when it falls back to another provider. That every session the product builds comes from
it (and every OpenVINO and tract model from their one loader) is tests/runners/test_one_loader.py's scan."""

from __future__ import annotations

from pathlib import Path

# What ONNX Runtime 1.31.1 wrote on the H200 when its TensorRT provider could not load (docs/gpu/ortgpu/*.err)
_TENSORRT_LOG = ("\x1b[1;31m2026-12-01 09:43:36.705411168 [E:onnxruntime:Default, provider_bridge_ort.cc:2430 "
                 "operator()] /onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:2043 "
                 "onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : "
                 "Failed to load library /tmp/ortsite/onnxruntime/capi/libonnxruntime_providers_tensorrt.so with "
                 "error: libnvinfer.so.10: cannot open shared object file: No such file or directory\x1b[m\n")


def test_fallback_reason_names_the_library_that_cannot_load() -> None:
    from portable.runners.sessions import fallback_reason

    reason = fallback_reason("some other line\n" + _TENSORRT_LOG)
    assert reason.startswith("Failed to load library") and "libnvinfer.so.10: cannot open shared object" in reason
    assert "\x1b" not in reason
    assert fallback_reason("2026 [W:onnxruntime] nothing telling here") == ""


def test_a_provider_not_used_is_refused_with_onnx_runtimes_reason(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    """On a machine whose onnxruntime lacks the provider, ORT falls back to the CPU and says why only in a
    warning: the refusal carries those words, and nothing reaches the user's stderr."""
    import onnxruntime as ort
    import pytest
    from onnx import helper

    from portable.runners.sessions import SessionFailed, SessionSpec, session_from_onnx

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", 1, [1, 2])],
                              [helper.make_tensor_value_info("y", 1, [1, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    with pytest.raises(SessionFailed) as failed:
        session_from_onnx(model.SerializeToString(), SessionSpec("CUDAExecutionProvider"))
    assert "instead of CUDAExecutionProvider" in failed.value.message
    assert "is not in available provider names" in failed.value.message
    assert capfd.readouterr().err == ""
