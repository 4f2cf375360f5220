"""Every ONNX Runtime ``InferenceSession`` the product builds comes from the one factory,
``portable.runners.sessions.session_from_onnx`` (issue 31): the product's source is parsed and a
construction anywhere else fails here, unless it is listed below with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("portable", "exporters", "validators", "runners")  # the packages installed as portable.*
FACTORY = "runners/sessions.py"
EXCEPTIONS = {  # file (relative to the repository) -> why it may still build its own session
    # none today: portable/quantization/ and portable/cli/quantize.py use the factory (speed.cpu_session); a
    # construction there would be listed as "quantize's sessions: next change"
}


def constructions(source: str) -> list[int]:
    """Lines that call ``InferenceSession(...)``, however it is reached (``ort.InferenceSession``, a bare
    imported name, ``onnxruntime.capi...InferenceSession``) or named by ``getattr(ort, "InferenceSession")``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name == "InferenceSession":
            lines.append(node.lineno)
        elif (name == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and node.args[1].value == "InferenceSession"):
            lines.append(node.lineno)
    return sorted(lines)


def product_constructions() -> dict[str, list[int]]:
    found = {}
    for package in PRODUCT:
        for file in sorted((ROOT / package).rglob("*.py")):
            lines = constructions(file.read_text(encoding="utf-8"))
            if lines:
                found[file.relative_to(ROOT).as_posix()] = lines
    return found


def test_sessions_are_built_only_by_the_factory():
    found = product_constructions()
    assert FACTORY in found, "the factory itself no longer builds the session: update this test"
    stray = {file: lines for file, lines in found.items() if file != FACTORY and file not in EXCEPTIONS}
    assert not stray, f"InferenceSession built outside {FACTORY} (use session_from_onnx): {stray}"


def test_every_listed_exception_still_holds_a_construction():
    found = product_constructions()
    stale = [file for file in EXCEPTIONS if file not in found]
    assert not stale, f"no InferenceSession construction left in {stale}: drop them from EXCEPTIONS"


def test_the_scan_sees_every_spelling():
    source = ("import onnxruntime as ort\nfrom onnxruntime import InferenceSession\n"
              "a = ort.InferenceSession('m.onnx')\nb = InferenceSession('m.onnx')\n"
              "c = getattr(ort, 'InferenceSession')('m.onnx')\nd = 'InferenceSession(' \n")
    assert constructions(source) == [3, 4, 5]  # a string holding the name is no construction


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
