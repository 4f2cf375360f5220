"""``make zoo TARGETS_ONLY=1`` (bench/zoo/worker.py ``run_targets``, issue 32): a cached record gets fresh offline
verdicts for every target from a re-export of its model, and keeps everything else; a record without a portable
file is left as it is, its model not even built."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

from bench.zoo import worker
from bench.zoo.registry import Built, Entry
from portable.validators.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]


def _cnn() -> Built:
    spec = importlib.util.spec_from_file_location("portable_zoo_cnn_fixture", ROOT / "fixtures" / "models" / "cnn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, args = module.build()
    return Built(model, args, ("x",))


def _never() -> Built:
    raise AssertionError("a record without a portable file must not rebuild its model")


def _record(ok: bool) -> dict:
    return {"name": "cnn", "verify": "kept", "dynamic": {"ok": ok, "file": {"nodes": 0, "targets": {"stale": True},
                                                                             "runtimes": {"kept": True}}}}


def test_every_target_is_judged_again_and_nothing_else_changes(tmp_path: Path) -> None:
    before = _record(True)
    after = worker.run_targets(Entry("cnn", "fixture", "classification", _cnn), tmp_path, copy.deepcopy(before))
    targets = after["dynamic"]["file"]["targets"]
    assert "stale" not in targets and set(TARGETS) <= set(targets) and "error" not in targets
    for name in TARGETS:
        assert targets[name]["nodes"] > 0 and targets[name]["partitions"] >= 0, name
    assert targets["ort-cpu"]["partitions"] == 1  # a plain CNN: one partition on ONNX Runtime's CPU provider
    assert after["dynamic"]["file"]["runtimes"] == {"kept": True} and after["verify"] == "kept"


def test_a_record_without_a_portable_file_is_left_alone(tmp_path: Path) -> None:
    before = _record(False)
    assert worker.run_targets(Entry("cnn", "fixture", "classification", _never), tmp_path,
                              copy.deepcopy(before)) == before
