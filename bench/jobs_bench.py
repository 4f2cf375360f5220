"""Many small models: `portable validate DIR` serially and with `--jobs 2`.

The models are variants of the rule fixtures (each fixture written several times under a
different graph name), so the folder mixes clean models and every kind of finding.
Goal (issue 7): `--jobs 2` validates at least 1.7 x as many models per second as the
serial run. Reported as not available while `portable validate` does not accept `--jobs`.

Usage: ``python bench/jobs_bench.py [--runs 3] [--models 120] [--jobs 2]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, ROOT, emit, machine, measure, median_of, versions  # noqa: E402

GOAL = 1.7  # x the serial rate


def write_models(folder: Path, count: int) -> int:
    """``count`` small models (at least): copies of every rule fixture, renamed."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support import rule_fixtures

    names = rule_fixtures.fixture_names()
    written = 0
    while written < count:
        for rule, kind in names:
            model = rule_fixtures.load(rule, kind)
            model.graph.name = f"{model.graph.name or 'g'}_{written}"
            (folder / f"{written:04d}_{rule}_{kind}.onnx").write_bytes(model.SerializeToString())
            written += 1
    return written


def jobs_supported() -> bool:
    out = subprocess.run([PORTABLE, "validate", "--help"], capture_output=True, text=True, cwd=ROOT)
    return "--jobs" in out.stdout


def run(runs: int, count: int, jobs: int) -> dict:
    base = {"benchmark": "jobs", "title": f"{count}+ small models, serial vs --jobs {jobs}",
            "goals": {"speedup_min": GOAL}, "machine": machine(), "versions": versions()}
    if not jobs_supported():
        return {**base, "status": "not available: `portable validate` does not accept --jobs yet", "met": None}
    with tempfile.TemporaryDirectory(prefix="portable-bench-") as tmp:
        folder = Path(tmp)
        written = write_models(folder, count)
        commands = {"serial": [PORTABLE, "validate", str(folder)],
                    f"--jobs {jobs}": [PORTABLE, "validate", "--jobs", str(jobs), str(folder)]}
        samples: dict[str, list] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                samples[name].append(measure(argv))
    figures = {name: median_of(r) for name, r in samples.items()}
    rates = {name: round(written / f["wall_s"], 2) for name, f in figures.items()}
    speedup = round(figures["serial"]["wall_s"] / figures[f"--jobs {jobs}"]["wall_s"], 3)
    return {
        **base,
        "status": "measured",
        "models": written,
        "commands": {name: " ".join(argv) for name, argv in commands.items()},
        "figures": figures,
        "models_per_second": rates,
        "speedup": speedup,
        "met": speedup >= GOAL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--models", type=int, default=120)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    emit(run(args.runs, args.models, args.jobs))


if __name__ == "__main__":
    main()
