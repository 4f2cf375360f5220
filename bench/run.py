"""`make bench`: run every ``bench/*_bench.py``, collect their JSON on stdout and in bench/results/.

Each benchmark is a script that prints one JSON object (its figures, ratios, goals and
whether they are met). This runner starts each in its own process, one after the other
(they measure time and memory: running them side by side would skew both), and writes
the collection to ``bench/results/<UTC time>.json`` and ``bench/results/latest.json``.
A benchmark that crashes is recorded as such; the runner exits 1 when one did. Missing
a goal is a figure to read, not a failure: it exits 0.

Usage: ``python bench/run.py [NAME ...]`` (names such as ``validate``; default: all).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, machine, versions  # noqa: E402

__all__ = ["discover", "main", "run_one"]

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
TIMEOUT_S = 1800


def discover(names: list[str]) -> list[Path]:
    """Every ``*_bench.py`` here, sorted; only those named when names are given."""
    found = sorted(BENCH.glob("*_bench.py"))
    if names:
        found = [p for p in found if p.stem.removesuffix("_bench") in names or p.stem in names]
    return found


def run_one(script: Path) -> dict[str, Any]:
    """Run one benchmark script; its stdout must be one JSON object."""
    start = time.perf_counter()
    try:
        done = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"status": "crashed", "error": f"timed out after {TIMEOUT_S} s"}
    took = round(time.perf_counter() - start, 1)
    sys.stderr.write(f"bench: {script.name} finished in {took} s (exit {done.returncode})\n")
    if done.returncode != 0:
        return {"status": "crashed", "exit_code": done.returncode, "error": done.stderr[-3000:]}
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        return {"status": "crashed", "error": f"output is not JSON ({exc})", "stdout": done.stdout[-3000:]}
    return {**result, "bench_seconds": took}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: every bench/*_bench.py)")
    scripts = discover(parser.parse_args().names)
    results = {p.stem.removesuffix("_bench"): run_one(p) for p in scripts}
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    collected = {"time_utc": stamp, "machine": machine(), "versions": versions(), "benchmarks": results,
                 "summary": {name: r.get("met", r.get("status")) for name, r in results.items()}}
    text = json.dumps(collected, indent=2) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stamp}.json").write_text(text)
    (RESULTS / "latest.json").write_text(text)
    sys.stdout.write(text)
    return 1 if any(r.get("status") == "crashed" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
