"""Many small models: `portable validate DIR` serially and with `--jobs 2`.

Two folders are measured. ``fixtures``: variants of the rule fixtures (1-6 nodes each), so
the folder mixes clean models and every kind of finding; validating one takes a few
milliseconds, so the command's start-up dominates and no parallelism can show. ``blocks``:
small transformer-like graphs (12 blocks, about 100 nodes, 64x64 weights, a batch-only
Shape->Concat->Reshape per block so PORT007's folding runs), the size of a real CI folder's
models. Goal (issue 5/7): `--jobs 2` validates at least 1.7 x as many models per second as
the serial run; it is judged on ``blocks``.

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


def _block_model(index: int, blocks: int = 12, width: int = 64):
    import numpy as np
    from onnx import helper as h
    from onnx import numpy_helper

    rng = np.random.default_rng(index)
    nodes, inits, x = [], [], "x"
    for b in range(blocks):
        w = numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), f"w{b}")
        bias = numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), f"b{b}")
        tail = numpy_helper.from_array(np.array([4, width // 4], dtype=np.int64), f"tail{b}")
        inits += [w, bias, tail]
        nodes += [
            h.make_node("MatMul", [x, f"w{b}"], [f"m{b}"]), h.make_node("Add", [f"m{b}", f"b{b}"], [f"a{b}"]),
            h.make_node("Relu", [f"a{b}"], [f"r{b}"]), h.make_node("Shape", [f"r{b}"], [f"s{b}"], end=1),
            h.make_node("Concat", [f"s{b}", f"tail{b}"], [f"t{b}"], axis=0),
            h.make_node("Reshape", [f"r{b}", f"t{b}"], [f"h{b}"]), h.make_node("Softmax", [f"h{b}"], [f"p{b}"], axis=-1),
            h.make_node("Flatten", [f"p{b}"], [f"y{b}" if b < blocks - 1 else "y"], axis=1),
        ]
        x = f"y{b}"
    graph = h.make_graph(nodes, f"blocks_{index}", [h.make_tensor_value_info("x", 1, ["batch", width])],
                         [h.make_tensor_value_info("y", 1, ["batch", width])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=8)


def write_blocks(folder: Path, count: int) -> int:
    for i in range(count):
        (folder / f"{i:04d}_blocks.onnx").write_bytes(_block_model(i).SerializeToString())
    return count


def jobs_supported() -> bool:
    out = subprocess.run([PORTABLE, "validate", "--help"], capture_output=True, text=True, cwd=ROOT)
    return "--jobs" in out.stdout


def run(runs: int, count: int, jobs: int) -> dict:
    base = {"benchmark": "jobs", "title": f"{count}+ small models, serial vs --jobs {jobs}",
            "goals": {"speedup_min": GOAL, "judged_on": "blocks"}, "machine": machine(), "versions": versions()}
    if not jobs_supported():
        return {**base, "status": "not available: `portable validate` does not accept --jobs yet", "met": None}
    sets = {name: _measure_set(writer, runs, count, jobs) for name, writer in
            (("blocks", write_blocks), ("fixtures", write_models))}
    return {**base, "status": "measured", "sets": sets, "speedup": sets["blocks"]["speedup"],
            "met": sets["blocks"]["speedup"] >= GOAL}


def _measure_set(writer, runs: int, count: int, jobs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="portable-bench-") as tmp:
        folder = Path(tmp)
        written = writer(folder, count)
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
        "models": written,
        "commands": {name: " ".join(argv) for name, argv in commands.items()},
        "figures": figures,
        "models_per_second": rates,
        "speedup": speedup,
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
