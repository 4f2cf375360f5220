"""The zoo's live table (bench/zoo/report.py, issue 21): a live failure is predicted only when the offline
profile of the same runtime said the file does not load; a parity miss is never predicted."""

from __future__ import annotations

from typing import Any

from bench.zoo import report


def _record(live: dict[str, Any], offline: dict[str, Any]) -> dict[str, Any]:
    return {"name": "m", "dynamic": {"file": {"runtimes": {"reference": {"status": "pass", "max_abs": 1e-7}, **live},
                                              "targets": offline}}}


def _unloadable(loads: bool) -> dict[str, Any]:
    return {"nodes": 3, "supported": 3 if loads else 2, "fallback": {} if loads else {"Erf": 1}, "falls_back": False,
            "loads": loads, "partitions": 1}


def test_a_load_failure_the_profile_predicted_is_marked_predicted() -> None:
    rec = _record({"tract": {"status": "does not load", "max_abs": None, "error": "no builder for Erf"}},
                  {"tract": _unloadable(False)})
    assert report.live_failure(rec, "tract") == {"model": "m", "runtime": "tract", "status": "does not load",
                                                 "predicted": True, "error": "no builder for Erf"}
    assert "not predicted offline: 0" in "\n".join(report.live_table([rec]))


def test_a_load_failure_the_profile_called_loadable_is_not_predicted() -> None:
    rec = _record({"tract": {"status": "does not load", "max_abs": None, "error": "x"}}, {"tract": _unloadable(True)})
    assert report.live_failure(rec, "tract")["predicted"] is False
    text = "\n".join(report.live_table([rec]))
    assert "not predicted offline: 1" in text and "m on tract: does not load, NOT predicted" in text


def test_a_parity_miss_is_never_predicted_and_a_pass_is_no_failure() -> None:
    rec = _record({"openvino": {"status": "fail", "max_abs": 0.5, "error": "beyond"}}, {"openvino": _unloadable(False)})
    assert report.live_failure(rec, "openvino")["predicted"] is False
    assert report.live_failure(rec, "reference") is None
    assert "| m | **fail** (**not predicted**) | – | ok (1.0e-07) |" in "\n".join(report.live_table([rec]))


def test_a_model_whose_runtimes_were_not_measured_keeps_its_row_and_says_why() -> None:
    """A ``--live-only`` worker that died (or a re-export that failed): the row stays, each cell says ``not
    measured``, the totals leave it out like a time-out, and the reason is listed."""
    from bench.zoo.measure import no_runtimes

    died = {"name": "m", "dynamic": {"file": {"runtimes": no_runtimes("timed out after 900 s"), "targets": {}}}}
    fine = _record({"openvino": {"status": "pass", "max_abs": 1e-6}}, {})
    fine["name"] = "n"
    text = "\n".join(report.live_table([died, fine]))
    assert "| m | not measured | not measured | not measured |" in text
    assert "- m: not measured: timed out after 900 s" in text
    assert "| **loads and matches** (of those that finished) | 1/1 | 0/0 | 1/1 | |" in text
