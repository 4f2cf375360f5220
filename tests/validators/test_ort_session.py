"""PORT014: a cheap, quiet onnxruntime session check (no optimisation, no run, nothing kept)."""

from __future__ import annotations

import weakref

import pytest
from support import rule_fixtures

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
    assert (finding.location.node, finding.location.op_type) == ("Add_0", "Add")
    assert finding.hint.startswith("onnxruntime has no CPU kernel for Add-6 with these input types: re-export at opset 18")


def test_onnxruntime_logger_prints_nothing(capfd):
    (finding,) = _port014("kernel_init")  # the kernel's constructor throws: ORT logs it at ERROR level
    assert "Failed to construct locale" in finding.message
    assert finding.location.node is None
    assert capfd.readouterr() == ("", "")


def test_session_is_cheap_and_released(monkeypatch):
    import onnxruntime as ort

    made: list[tuple[ort.SessionOptions, weakref.ref]] = []
    real = ort.InferenceSession

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, data, options, providers):
            super().__init__(data, options, providers=providers)
            made.append((options, weakref.ref(self)))

        def run(self, *args, **kwargs):
            pytest.fail("PORT014 must not run the model")

    monkeypatch.setattr(ort, "InferenceSession", Recording)
    assert _port014("good") == ()
    (options, session), = made
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert options.log_severity_level == 4 and not options.enable_cpu_mem_arena
    assert session() is None  # deleted, not left to the garbage collector
