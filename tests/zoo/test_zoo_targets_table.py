"""The zoo's offline target table is ``portable fleet report``'s (portable/fleet/render.py): a column per
target of the fleet, a row per model, the whole-model count per target; the zoo's legend names the runtimes
without a fallback from the profiles' own ``fallback``."""

from __future__ import annotations

from bench.zoo import report
from portable.fleet.render import target_table
from portable.fleet.report import FleetReport, ModelRow, TargetRow
from portable.validators.targets import TARGETS, load_profile


def _fleet(cells: dict[str, str], whole: int) -> FleetReport:
    row = ModelRow("m", "m.py:build", "exported", "portable", "–", "–", tuple(cells.items()), ())
    targets = tuple(TargetRow(t, 1, (("whole", whole), ("partly", 0), ("no", 1 - whole), ("no file", 0)), ()) for t in cells)
    return FleetReport("r", {}, targets, (row,), ())


def test_the_table_has_a_column_per_target_and_counts_the_whole_models():
    lines = target_table(_fleet({name: "loads" for name in TARGETS}, 1))
    assert lines[0] == "| model | " + " | ".join(TARGETS) + " |"
    assert lines[-1] == "| **whole model on the target** | " + " | ".join("1/1" for _ in TARGETS) + " |"


def test_the_runtimes_without_a_fallback_are_the_profiles_own():
    about = report._targets_about()
    stops = [name for name in TARGETS if load_profile(name).fallback is None]
    assert {"ort-cpu", "openvino", "tract", "webnn", "litert"} <= set(stops)  # webnn: no CPU fallback; litert: the converter fails
    assert "runtimes without a fallback (" + ", ".join(f"`{n}`" for n in stops) + ": " in about
    assert "`ort-cuda`" not in about  # it falls back to the CPU EP
