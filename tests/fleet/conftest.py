"""The fleet tests' expensive runs, made once per test session whichever xdist worker asks first.

pytest-xdist may hand the tests of one module to different workers, each with its own module and session
fixtures; :func:`once` makes a result in a folder every worker of the session shares, under a file lock:
the first worker that asks makes it, the others wait for it and read it. The fleet file
(``fixtures/fleet/build.py``, with its troubled models) is written once, the local engine runs it once
(tests/fleet/test_fleet_local.py reads that run; test_fleet_ray.py compares the cluster's run with it).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import load_builder

fleets = load_builder("fleet")


@pytest.fixture(scope="session")
def once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Callable[[Path], Any]], tuple[Path, Any]]:
    """``once(name, make) -> (folder, what make returned)``: ``make(folder)`` run by one worker of the session."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist: the session's folder

    def run(name: str, make: Callable[[Path], Any]) -> tuple[Path, Any]:
        folder, done = shared / f"fleet-{name}", shared / f"fleet-{name}.json"
        with open(shared / f"fleet-{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                done.write_text(json.dumps(make(folder)))
        return folder, json.loads(done.read_text())

    return run


@pytest.fixture(scope="session")
def fleet_file(once) -> Path:
    """The fixtures' fleet with its troubled models (a hang, a killer, a gate), its ONNX files beside it."""
    folder, _ = once("file", lambda folder: str(fleets.write(folder, troubled=True)))
    return folder / "fleet.toml"


@pytest.fixture(scope="session")
def local_run(once, fleet_file) -> tuple[Path, dict[str, Any]]:
    """The fleet on the local engine (``--jobs 2``): its results folder and its summary."""
    from portable.fleet import run_fleet_file

    def make(folder: Path) -> dict[str, Any]:
        summary = run_fleet_file(fleet_file, folder / "results", jobs=2)
        return {"exit_code": summary.exit_code, "ran": summary.ran, "kept": summary.kept, "records": len(summary.records)}

    folder, summary = once("local", make)
    return folder / "results", summary
