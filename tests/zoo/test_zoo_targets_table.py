"""The zoo's offline target table (bench/zoo/report.py): a column per target of the one registry
(``portable.validators.targets.TARGETS``), in its order, and the runtimes without a fallback named from
the profiles' own ``fallback``."""

from __future__ import annotations

from typing import Any

from bench.zoo import report
from portable.validators.targets import TARGETS, load_profile


def _record(targets: dict[str, Any]) -> dict[str, Any]:
    return {"name": "m", "dynamic": {"file": {"targets": targets}}}


def _loads(name: str) -> dict[str, Any]:
    falls_back = load_profile(name).fallback is not None
    return {"name": name, "nodes": 2, "supported": 2, "partitions": 1, "fallback": {}, "falls_back": falls_back,
            "loads": True}


def test_the_table_has_a_column_per_registered_target_in_its_order():
    lines = report.target_table([_record({name: _loads(name) for name in TARGETS})])
    head = next(line for line in lines if line.startswith("| model |"))
    assert head.splitlines()[0] == "| model | " + " | ".join(TARGETS) + " | s |"
    assert {"directml", "webnn"} <= set(TARGETS)  # the profiles added after the table was first written
    total = lines[-1]
    assert total == "| **whole model on the target** | " + " | ".join("1/1" for _ in TARGETS) + " | |"


def test_a_target_that_did_not_run_is_a_dash_not_a_missing_column():
    lines = report.target_table([_record({"ort-cpu": _loads("ort-cpu")})])
    row = next(line for line in lines if line.startswith("| m |"))
    assert row.count(" | ") == len(TARGETS) + 1 and row.count("–") == len(TARGETS) - 1


def test_the_runtimes_without_a_fallback_are_the_profiles_own():
    about = report.target_table([_record({"webnn": _loads("webnn")})])[0]
    stops = [name for name in TARGETS if load_profile(name).fallback is None]
    assert {"ort-cpu", "openvino", "tract", "webnn", "litert"} <= set(stops)  # webnn: no CPU fallback; litert: the converter fails
    assert "runtimes without a fallback (" + ", ".join(f"`{n}`" for n in stops) + ": " in about
    assert "`ort-cuda`" not in about  # it falls back to the CPU EP
