"""A fleet's rerun against its first run: ``portable fleet run`` twice on the same fleet (the fixtures' models
and two ONNX files from elsewhere, ``fixtures/fleet/build.py``), wall and CPU time of each, side by side.

    .venv/bin/python bench/fleet_rerun_bench.py > bench/results/fleet_rerun.json

The issue's bar: the rerun takes at most 0.2x the first run's time (it runs nothing: every record is kept).
CPU time counts every process a run started: this benchmark adopts the orphans (the fork server and its step
processes outlive the command) as Linux's child subreaper, so their time reaches its RUSAGE_CHILDREN.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fleets():
    spec = importlib.util.spec_from_file_location("portable_fleet_fixtures", ROOT / "fixtures" / "fleet" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _adopt_orphans() -> None:
    """Be the reaper of this process's orphaned descendants (PR_SET_CHILD_SUBREAPER)."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


def _wait_all(process: subprocess.Popen) -> int:
    """The command's exit code, once it and every orphan it left (adopted here) have ended."""
    code = process.wait()
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return code


def _timed(args: list[str]) -> dict[str, float]:
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    code = _wait_all(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(time.perf_counter() - start, 3), "cpu_s": round(cpu, 3), "exit_code": code}


def main() -> int:
    _adopt_orphans()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        path = _fleets().write(Path(tmp) / "fleet")
        command = [sys.executable, "-m", "portable", "fleet", "run", str(path), "-o", str(Path(tmp) / "results"), "--jobs", "2",
                   "--quiet"]
        first, rerun = _timed(command), _timed(command)
    result = {"fleet": "fixtures/fleet/build.py (cnn, cond, opset13, squeezenet)", "command": " ".join(command[1:]),
              "first": first, "rerun": rerun, "wall_ratio": round(rerun["wall_s"] / first["wall_s"], 4),
              "cpu_ratio": round(rerun["cpu_s"] / first["cpu_s"], 4) if first["cpu_s"] else None,
              "bar": 0.2, "met": rerun["wall_s"] <= 0.2 * first["wall_s"]}
    print(json.dumps(result, indent=1))
    return 0 if result["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
