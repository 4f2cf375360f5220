"""Latency of the runners on the tiny test models (CPU, or CUDA where present); prints JSON.

    .venv/bin/python bench/compare_bench.py [--compile] [--batch 1,8] > bench/results/compare.json

Speed lives here, not in tests: nothing is asserted, the figures are printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _models() -> Any:
    spec = importlib.util.spec_from_file_location("bench_runner_models", ROOT / "tests" / "runners" / "runner_models.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true", help="include torch.compile (slow to compile on CPU)")
    parser.add_argument("--batch", default="1,8")
    args = parser.parse_args(argv)
    from portable.runners import TimingConfig, compare

    models = _models()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, dynamic in (("cnn", [{0: "batch"}]), ("encoder", [{0: "batch", 1: "seq"}])):
            module, example = getattr(models, name)()
            path = models.export(module, example, f"{tmp}/{name}.onnx", dynamic)
            report = compare(path, module, example_inputs=example, compile_mode="default" if args.compile else None,
                             batches=[int(b) for b in args.batch.split(",")], timing=TimingConfig())
            data = report.to_dict()
            results.append({"model": name, "passed": data["passed"], "environment": data["environment"],
                            "latency": data["latency"], "speedup": data["speedup"]})
    json.dump({"benchmark": "compare", "title": "latency of the runners on the tiny test models",
               "goals": None, "results": results}, sys.stdout, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
