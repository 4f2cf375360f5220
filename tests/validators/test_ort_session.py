"""PORT014: a cheap, quiet onnxruntime session check (no optimisation, no run, nothing kept)."""

from __future__ import annotations

import weakref

import pytest
from support import rule_fixtures, save

from portable.policy import Policy
from portable.validators import validate

ORT_ONLY = Policy(select=("PORT014",))


def _port014(kind: str):
    report = validate(rule_fixtures.load("PORT014", kind), ORT_ONLY)
    assert report.error is None, report.error
    return report.findings


def test_missing_kernel_names_the_node_and_the_fix():
    (finding,) = _port014("no_kernel")
    assert "Could not find an implementation for Add(6)" in finding.message
    assert (finding.location.node, finding.location.op_type) == ("<unnamed Add #0>", "Add")
    assert finding.hint.startswith("onnxruntime has no CPU kernel for Add-6 with these input types: re-export at opset 18")


def test_onnxruntime_logger_prints_nothing(capfd):
    (finding,) = _port014("kernel_init")  # the kernel's constructor throws: ORT logs it at ERROR level
    assert "Failed to construct locale" in finding.message
    assert finding.location.node is None
    assert capfd.readouterr() == ("", "")


@pytest.fixture
def sessions(monkeypatch) -> list[tuple[object, object, weakref.ref]]:
    """Every session PORT014 creates: (what it was given, its options, a weak reference)."""
    import onnxruntime as ort

    made: list[tuple[object, object, weakref.ref]] = []
    real = ort.InferenceSession

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, model, options, providers):
            made.append((model, options, weakref.ref(self)))
            super().__init__(model, options, providers=providers)

        def run(self, *args, **kwargs):
            pytest.fail("PORT014 must not run the model")

    monkeypatch.setattr(ort, "InferenceSession", Recording)
    return made


def test_session_is_cheap_and_released(sessions):
    import onnxruntime as ort

    assert _port014("good") == ()
    (model, options, session), = sessions
    assert isinstance(model, bytes)  # an in-memory model is handed over serialized
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert options.log_severity_level == 4 and not options.enable_cpu_mem_arena
    assert session() is None  # deleted, not left to the garbage collector


def test_a_file_is_read_by_onnxruntime_itself_whatever_its_suffix(tmp_path, sessions):
    """No copy of the weights in this process: onnxruntime gets the path. The suffix does not
    make it try its own ORT format, and the message does not repeat the path."""
    path = save(rule_fixtures.load("PORT014", "no_kernel"), tmp_path / "model.ort")
    report = validate(path, ORT_ONLY)
    (finding,) = report.findings
    assert [model for model, _, _ in sessions] == [str(path)]
    assert "Could not find an implementation for Add(6)" in finding.message
    assert str(path) not in finding.message
