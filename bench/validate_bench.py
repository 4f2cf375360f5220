"""Validating a 1.2 GB inline model: `portable validate` against `onnx.load` and the ONNX checker.

The model (302M float32 parameters, weights inline, ~1.2 GB) is generated here, streamed
to a temporary folder (never held in memory whole), and deleted at the end. Each command
runs in a fresh process, interleaved, several times; medians and ratios are reported.

Goals (issue 7): `portable validate` wall <= 0.5 x `onnx.load` wall, and its peak RSS
<= 0.3 x the file size, with the findings of a full in-memory validation.

Usage: ``python bench/validate_bench.py [--runs 3] [--layers 18] [--width 4096] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper

from portable.validators.wire import len_field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, PYTHON, ROOT, emit, machine, measure, median_of, versions  # noqa: E402

__all__ = ["write_model"]

WALL_GOAL = 0.5  # x onnx.load wall
RSS_GOAL = 0.3   # x file size
_CHUNK = 1 << 22  # float32 values generated and written at a time




def _tensor_head(name: str, shape: tuple[int, int]) -> bytes:
    nbytes = shape[0] * shape[1] * 4
    head = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape).SerializeToString()
    return head + len_field(9, nbytes)  # raw_data (field 9) follows the fields 1, 2 and 8


def _write_payload(out: BinaryIO, count: int, rng: np.random.Generator, nan: bool = False) -> None:
    for start in range(0, count, _CHUNK):
        values = rng.standard_normal(min(_CHUNK, count - start), dtype=np.float32)
        if nan and start == 0:
            values[0] = np.nan  # one PORT015 finding, so the NaN scan is part of the comparison
        out.write(values.tobytes())


def write_model(path: Path, layers: int, width: int) -> int:
    """A MatMul chain with ``layers`` [width, width] float32 weights (the last holds one NaN),
    serialized in protobuf's canonical field order, written in chunks; returns the parameter count."""
    shape = (width, width)
    names = [f"w{i}" for i in range(layers)]
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i}", w], [f"h{i + 1}" if i < layers - 1 else "y"])
             for i, w in enumerate(names)]
    graph_head = onnx.GraphProto(node=nodes, name="matmul_chain").SerializeToString()  # fields 1, 2
    graph_tail = onnx.GraphProto(  # fields 11, 12: after the initializers (field 5)
        input=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        output=[helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])],
    ).SerializeToString()
    inits = [(_tensor_head(n, shape), width * width) for n in names]
    init_sizes = [len(h) + count * 4 for h, count in inits]
    graph_size = len(graph_head) + sum(len(len_field(5, s)) + s for s in init_sizes) + len(graph_tail)
    model_head = onnx.ModelProto(ir_version=10, producer_name="portable-bench").SerializeToString()
    model_tail = onnx.ModelProto(opset_import=[helper.make_opsetid("", 18)]).SerializeToString()
    rng = np.random.default_rng(0)
    with open(path, "wb") as out:
        out.write(model_head + len_field(7, graph_size) + graph_head)
        for i, ((head, count), size) in enumerate(zip(inits, init_sizes)):
            out.write(len_field(5, size) + head)
            _write_payload(out, count, rng, nan=i == layers - 1)
        out.write(graph_tail + model_tail)
    return layers * width * width


_FULL = """
import json, sys
import onnx
from portable.policy import Policy
from portable.validators import validate, validate_proto
path = sys.argv[1]
data = open(path, "rb").read()
proto = onnx.ModelProto()
proto.ParseFromString(data)
full = [f.to_dict() for f in validate_proto(proto, path, Policy(), len(data)).findings]
del proto, data
lean = [f.to_dict() for f in validate(path).findings]
print(json.dumps({"same": full == lean, "findings": len(lean), "rules": sorted({f["rule"] for f in lean})}))
"""


def _same_findings(path: Path) -> dict:
    """Lean vs full in-memory validation of the model, in one child (it needs ~4 GB for the full one)."""
    out = subprocess.run([PYTHON, "-c", _FULL, str(path)], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _commands(path: Path) -> dict[str, list[str]]:
    p = str(path)
    return {
        "portable validate": [PORTABLE, "validate", p],
        "onnx.load": [PYTHON, "-c", f"import onnx; onnx.load({p!r})"],
        "onnx.checker.check_model(path, full_check=True)":
            [PYTHON, "-c", f"import onnx; onnx.checker.check_model({p!r}, full_check=True)"],
    }


def run(runs: int, layers: int, width: int, keep: Path | None) -> dict:
    folder = Path(keep or tempfile.mkdtemp(prefix="portable-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "large_inline.onnx"
    try:
        params = write_model(path, layers, width)
        size = path.stat().st_size
        commands = _commands(path)
        samples: dict[str, list] = {name: [] for name in commands}
        for _ in range(runs):  # interleaved: noise from other users hits every command alike
            for name, argv in commands.items():
                samples[name].append(measure(argv))
        figures = {name: median_of(r) for name, r in samples.items()}
        same = _same_findings(path)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    ours, load = figures["portable validate"], figures["onnx.load"]
    wall_ratio = round(ours["wall_s"] / load["wall_s"], 3)
    rss_ratio = round(ours["peak_rss_mb"] * 2**20 / size, 3)
    return {
        "benchmark": "validate",
        "title": "Validation of a 1.2 GB inline model",
        "model": {"parameters": params, "file_bytes": size, "layers": layers, "width": width},
        "commands": {name: " ".join(argv) for name, argv in commands.items()},
        "figures": figures,
        "ratios": {
            "validate_wall_over_onnx_load_wall": wall_ratio,
            "validate_peak_rss_over_file_size": rss_ratio,
            "validate_wall_over_check_model_wall": round(
                ours["wall_s"] / figures["onnx.checker.check_model(path, full_check=True)"]["wall_s"], 3),
        },
        "same_findings_as_full_validation": same,
        "goals": {"wall_ratio_max": WALL_GOAL, "rss_ratio_max": RSS_GOAL},
        "met": wall_ratio <= WALL_GOAL and rss_ratio <= RSS_GOAL and same["same"],
        "machine": machine(),
        "versions": versions(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--layers", type=int, default=18)  # 18 x 4096 x 4096 = 302M parameters
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--keep", type=Path, default=None, help="write the model here and keep it")
    args = parser.parse_args()
    emit(run(args.runs, args.layers, args.width, args.keep))


if __name__ == "__main__":
    main()
