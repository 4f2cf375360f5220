"""``make zoo`` is a fleet: bench/zoo/zoo.toml names every registry entry once, as its SPEC in bench/zoo/specs.py,
with the zoo's own measuring as the plug-in step ``zoo``, validated on every target."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.zoo.registry import entries
from portable.fleet import STEPS, check_fleet
from portable.validators.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]


def test_the_zoo_fleet_is_the_registry():
    fleet = check_fleet(ROOT / "bench" / "zoo" / "zoo.toml")
    assert [m.name for m in fleet.models] == [e.name for e in entries()]
    assert {m.model for m in fleet.models} == {f"bench.zoo.specs:{e.name}" for e in entries()}
    assert {m.settings.steps for m in fleet.models} == {("export", "validate", "zoo")}
    assert {m.settings.targets for m in fleet.models} == {TARGETS} and not STEPS["zoo"].needs_file


def test_a_zoo_spec_builds_the_entry_with_live_weights_and_its_input_names():
    pytest.importorskip("torchvision", reason="torchvision is not installed (make zoo-venv)")
    import inspect

    import torch

    import bench.zoo.specs as specs

    module, args = specs.tv_squeezenet1_1()
    assert all(p.any() for p in module.parameters()) and tuple(args[0].shape) == (2, 3, 224, 224)
    # portable export names the file's inputs after forward's parameters: the zoo's own names, as it always gave
    assert list(inspect.signature(module.forward).parameters) == ["pixel_values"]
    with torch.no_grad():
        assert torch.equal(module(*args), specs.built("tv_squeezenet1_1").module(*args))  # the same model, wrapped


@pytest.mark.parametrize(("export", "zoo", "said"), [
    (("failed", "refused: PORT004: ...", {"findings": [{"rule": "PORT004"}], "parity_ok": None}), "pass", "refused: PORT004"),
    (("error", "exit 3: internal error: ...", {}), "pass", "internal error"),
    (("timeout", "timed out after 900 s (the step's limit); killed", {}), "pass",
     "crashed: timed out after 900 s (the step's limit); killed"),
    (("pass", "", {"timings": {}}), "killed", "crashed: killed: the step's process was killed by SIGKILL"),
])
def test_the_zoo_page_says_what_the_fleets_records_say(export, zoo, said):
    from bench.zoo.report import outcome, record_of
    from portable.fleet.records import StepRecord

    (entry,) = entries("tv_resnet18")
    status, reason, data = export
    steps = {"export": StepRecord(entry.name, "export", status, reason, "k", 1.0, data),
             "zoo": StepRecord(entry.name, "zoo", zoo, "" if zoo == "pass" else "the step's process was killed by SIGKILL", "k", 1.0,
                               {"record": {}} if zoo == "pass" else {"log": "tail"})}
    assert outcome(record_of(entry, steps)) == said
