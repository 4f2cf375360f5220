"""Peak memory of one export, bare ``torch.onnx.export`` vs ``portable export`` (prints JSON; not a test).

Each export runs in a fresh process: the model is built, then exported once; the figure is the
process's high-water resident size after the export (``ru_maxrss``) less its resident size before it.
Needs ``make zoo-venv`` for the real models.

    .venv/bin/python bench/export_memory_bench.py [--model bert_base]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("bare", "portable_no_verify", "portable_verify")


def _resident_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


def _one(model: str, mode: str) -> dict[str, object]:
    """In this process: build ``model``, export it as ``mode``, return the extra peak."""
    import gc
    import resource

    sys.path.insert(0, str(ROOT / "bench"))
    from export_bench import _bare, _portable_module, _real

    built = _real(model)
    gc.collect()
    before = _resident_mb()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.onnx"
        if mode == "bare":
            _bare(built.module, built.args, path)
        else:
            _portable_module(built, path, "dynamic", mode == "portable_verify")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"model": model, "mode": mode, "resident_before_mb": round(before), "extra_peak_mb": round(peak - before)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert_base")
    parser.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.model, args.one)))
        return
    rows = []
    for mode in MODES:
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--one", mode], check=True,
                             capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print(json.dumps({"benchmark": "export_memory", "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
