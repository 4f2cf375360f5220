"""``make zoo``: every zoo model in its own subprocess, cached per model, then the table.

    python -m bench.zoo.run [--only bert,gpt2] [--timeout S] [--report-only] [--live-only | --targets-only]

A model that hangs or crashes is recorded as such (its log is in ``out/zoo/logs/``) and the
zoo goes on. Results are cached in ``out/zoo/cache/NAME.json``; ``--only`` re-runs a subset,
and ``docs/zoo.md`` / ``docs/zoo.json`` are always rebuilt from the whole cache. ``--live-only``
re-measures only the live runtimes (OpenVINO, tract, the reference evaluator) of cached models;
``--targets-only`` recomputes only the offline target verdicts of the dynamic file (``portable validate
--target all``), from the cached record or, where the cache lacks it, the one in ``docs/zoo.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

from bench.zoo import report
from bench.zoo.registry import Entry, entries

__all__ = ["CACHE", "main", "run_live", "run_one", "run_targets"]

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "out" / "zoo" / "cache"
LOGS = ROOT / "out" / "zoo" / "logs"
PUBLISHED = ROOT / "docs" / "zoo.json"


def run_one(entry: Entry, timeout: int | None = None) -> dict[str, Any]:
    """Run the worker for ``entry``; its record, or one saying how it died."""
    out = CACHE / f"{entry.name}.json"
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    died = _work(entry, out, timeout, [])
    if died is not None:
        record = {"name": entry.name, "family": entry.family, "task": entry.task, "expected": entry.expected,
                  "note": entry.note, "crashed": died, "log_tail": _tail(LOGS / f"{entry.name}.log"),
                  "total_s": round(time.perf_counter() - start, 1)}
        out.write_text(json.dumps(record, indent=1) + "\n")
    return json.loads(out.read_text())


def run_live(entry: Entry, timeout: int | None = None) -> dict[str, Any]:
    """The worker's ``--live-only`` on ``entry``'s cached record (none cached: the whole worker)."""
    out = CACHE / f"{entry.name}.json"
    if not out.exists():
        return run_one(entry, timeout)
    before = json.loads(out.read_text())
    died = _work(entry, out, timeout, ["--live-only"])
    if died is not None:  # the cached record stays; its live cell says how the worker died
        from bench.zoo.measure import no_runtimes

        before.setdefault("dynamic", {}).setdefault("file", {})["runtimes"] = no_runtimes(died)
        out.write_text(json.dumps(before, indent=1) + "\n")
    return json.loads(out.read_text())


def run_targets(entry: Entry, timeout: int | None = None) -> dict[str, Any]:
    """The worker's ``--targets-only`` on ``entry``'s record, cached or seeded from ``docs/zoo.json`` (in
    neither: the whole worker); a record whose dynamic export was not ok is left as it is."""
    out = CACHE / f"{entry.name}.json"
    if not out.exists() and not _seed(entry, out):
        return run_one(entry, timeout)
    before = json.loads(out.read_text())
    if not before.get("dynamic", {}).get("ok"):
        return before
    died = _work(entry, out, timeout, ["--targets-only"])
    if died is not None:  # the cached record stays; its targets say how the worker died
        before["dynamic"].setdefault("file", {})["targets"] = {"error": died}
        out.write_text(json.dumps(before, indent=1) + "\n")
    return json.loads(out.read_text())


@cache
def _published() -> dict[str, dict[str, Any]]:
    """The records in ``docs/zoo.json``'s ``models``, by name (none without the file)."""
    models = json.loads(PUBLISHED.read_text()).get("models", []) if PUBLISHED.exists() else []
    return {record["name"]: record for record in models}


def _seed(entry: Entry, out: Path) -> bool:
    """Copy ``entry``'s published record into the cache; False where ``docs/zoo.json`` has none."""
    record = _published().get(entry.name)
    if record is None:
        return False
    CACHE.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return True


def seed_cache() -> None:
    """Every registry model the cache lacks, from ``docs/zoo.json`` (``--targets-only``: a subset's
    refresh on a fresh checkout rebuilds the tables with every model, not the subset alone)."""
    for entry in entries():
        out = CACHE / f"{entry.name}.json"
        if not out.exists():
            _seed(entry, out)


def _work(entry: Entry, out: Path, timeout: int | None, extra: list[str]) -> str | None:
    """The worker's run in a subprocess, its log in LOGS; None, or how it died."""
    CACHE.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    log, limit = LOGS / f"{entry.name}.log", timeout or entry.timeout_s
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    with log.open("w") as sink:
        try:
            code = subprocess.run([sys.executable, "-m", "bench.zoo.worker", entry.name, str(out), *extra], cwd=ROOT,
                                  env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=limit, check=False).returncode
        except subprocess.TimeoutExpired:
            return f"timed out after {limit} s"
    return None if code == 0 and out.exists() else f"worker exited {code} (see {log.relative_to(ROOT)})"


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


def cached() -> list[dict[str, Any]]:
    """The cached records of the registry's models, in registry order."""
    records = []
    for entry in entries():
        path = CACHE / f"{entry.name}.json"
        if path.exists():  # the expectation is the registry's now, not the one of the run
            records.append(json.loads(path.read_text()) | {"expected": entry.expected, "note": entry.note})
    return records


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="comma-separated model names (default: all)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds per model (default: the entry's)")
    parser.add_argument("--report-only", action="store_true", help="rebuild docs/zoo.md from the cache")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--live-only", action="store_true", help="re-measure only the live runtimes of cached models")
    modes.add_argument("--targets-only", action="store_true",
                       help="recompute only the offline targets of cached models (seeded from docs/zoo.json)")
    return parser


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    run = run_targets if options.targets_only else run_live if options.live_only else run_one
    if options.targets_only:
        seed_cache()
    if not options.report_only:
        start = time.perf_counter()
        for entry in entries(options.only):
            begun = time.perf_counter()  # this call's wall time: a record's total_s is its full run's
            record = run(entry, options.timeout)
            print(f"{entry.name:24s} {report.outcome(record):40s} {time.perf_counter() - begun:7.1f} s", flush=True)
        print(f"zoo: {time.perf_counter() - start:.0f} s", flush=True)
    summary = report.write(cached(), ROOT / "docs")
    print(summary)
    return 0

if __name__ == "__main__":
    sys.exit(main())
