"""Start-up: `portable validate small.onnx` and `portable --help` against `python -c "import onnx"`.

Goal (issue 14, was 2 x in issue 7): the whole `portable validate` command on a small model
takes at most 1.5 x the wall time of `python -c "import onnx"`, and neither command imports
torch or onnxruntime (``heavy_modules_imported`` also lists the other slow modules loaded).
Each command runs in a fresh process, interleaved; medians are reported.

Usage: ``python bench/startup_bench.py [--runs 7]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, PYTHON, ROOT, emit, machine, measure, median_of, versions

GOAL = 1.5  # x `import onnx` wall
HEAVY = ("torch", "onnxruntime", "onnxscript", "onnx_ir", "matplotlib", "rich")

# Runs the CLI in-process, then lists which heavy modules it imported.
_IMPORTS = """
import json, sys
from portable.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy})
sys.stderr.write("\\n" + json.dumps(heavy) + "\\n")
"""


def _small_model(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from support import rule_fixtures, save

    return save(rule_fixtures.load("PORT004", "good"), folder / "small.onnx")


def _heavy_imports(args: list[str]) -> list[str]:
    code = _IMPORTS.replace("{heavy}", repr(set(HEAVY)))
    out = subprocess.run([PYTHON, "-c", code, "-", *args], capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stderr.strip().splitlines()[-1])


def run(runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="portable-bench-") as tmp:
        small = _small_model(Path(tmp))
        commands = {
            'python -c "import onnx"': [PYTHON, "-c", "import onnx"],
            "portable validate small.onnx": [PORTABLE, "validate", str(small)],
            "portable --help": [PORTABLE, "--help"],
        }
        measure(commands["portable validate small.onnx"])  # warm the file cache once, not counted
        samples: dict[str, list] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                samples[name].append(measure(argv))
        heavy = {"portable validate small.onnx": _heavy_imports(["validate", str(small)]),
                 "portable --help": _heavy_imports(["--help"])}
    figures = {name: median_of(r) for name, r in samples.items()}
    base = figures['python -c "import onnx"']["wall_s"]
    ratios = {name: round(f["wall_s"] / base, 3) for name, f in figures.items() if name.startswith("portable")}
    no_heavy = not any(m.split(".")[0] in ("torch", "onnxruntime") for mods in heavy.values() for m in mods)
    return {
        "benchmark": "startup",
        "title": "Start-up of the CLI on a small model",
        "commands": {name: " ".join(argv) for name, argv in commands.items()},
        "figures": figures,
        "ratios_over_import_onnx": ratios,
        "heavy_modules_imported": heavy,
        "goals": {"validate_ratio_max": GOAL, "imports_torch_or_onnxruntime": False},
        "met": ratios["portable validate small.onnx"] <= GOAL and no_heavy,
        "machine": machine(),
        "versions": versions(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    emit(run(parser.parse_args().runs))


if __name__ == "__main__":
    main()
