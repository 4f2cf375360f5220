"""Export overhead and graph leanness of ``portable export`` (prints JSON; not a test).

overhead = portable export wall / bare ``torch.onnx.export(dynamo=True, opset_version=18,
external_data=False)`` wall, on the fixture transformer and CNN, in one warm process
(one untimed warm-up of each first; the best of ``--repeat`` runs). leanness = node count
of portable's file vs onnxsim's ``simplify()`` of the bare export.

    .venv/bin/python bench/export_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("transformer", "cnn")


def _bare(module: Any, args: tuple[Any, ...], path: Path) -> None:
    import torch

    torch.onnx.export(module, args, str(path), dynamo=True, opset_version=18, external_data=False, verbose=False,
                      dynamic_shapes=({0: torch.export.Dim("batch")},))


def _portable(spec: str, path: Path, verify: bool) -> Any:
    from portable.exporters.spec_export import export_spec

    return export_spec(spec, path, verify=verify, force=True)


def _best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _simplified_nodes(path: Path) -> int | None:
    try:
        import onnx
        import onnxsim
    except ImportError:
        return None
    model, ok = onnxsim.simplify(onnx.load(str(path)))
    return len(model.graph.node) if ok else None


def bench_model(name: str, repeat: int, folder: Path) -> dict[str, Any]:
    import onnx

    from portable.exporters.quiet import quiet_torch
    from portable.spec import load_spec

    spec = f"{ROOT}/fixtures/models/{name}.py:build"
    loaded = load_spec(spec)
    bare, ours = folder / f"{name}_bare.onnx", folder / f"{name}.onnx"
    with quiet_torch():
        _bare(loaded.module, loaded.example_inputs, bare)
        _portable(spec, ours, True)
        t_bare = _best(lambda: _bare(loaded.module, loaded.example_inputs, bare), repeat)
        t_ours = _best(lambda: _portable(spec, ours, True), repeat)
        t_ours_nv = _best(lambda: _portable(spec, ours, False), repeat)
    result = _portable(spec, ours, False)
    return {
        "model": name,
        "bare_s": round(t_bare, 3),
        "portable_s": round(t_ours, 3),
        "portable_no_verify_s": round(t_ours_nv, 3),
        "overhead": round(t_ours / t_bare, 3),
        "overhead_no_verify": round(t_ours_nv / t_bare, 3),
        "phases_s": result.timings,
        "nodes_portable": len(onnx.load(str(ours)).graph.node),
        "nodes_bare": len(onnx.load(str(bare)).graph.node),
        "nodes_onnxsim": _simplified_nodes(bare),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [bench_model(name, options.repeat, Path(tmp)) for name in MODELS]
    print(json.dumps({"benchmark": "export", "goal_overhead": 1.10, "models": rows}, indent=2))


if __name__ == "__main__":
    main()
