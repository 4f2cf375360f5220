"""Export overhead and graph leanness of ``portable export`` (prints JSON; not a test).

overhead = portable export wall / bare ``torch.onnx.export(dynamo=True, opset_version=18,
external_data=False)`` wall, on the fixture transformer and CNN, in one warm process
(one untimed warm-up of each first; the best of ``--repeat`` runs). leanness = node count
of portable's file vs onnxsim's ``simplify()`` of the bare export.

Issue 11's target on real models (``--models resnet50,bert_base,swin_t``, needs ``make zoo-venv``):
``portable.export(..., verify=False)`` within 1.10x of the bare export, both called on the same
module in the same process, interleaved, the best of ``--repeat``; verify's cost is measured
apart (one export with verify; its ``verify`` phase). A model portable refuses with a dynamic
batch is measured at a static batch 2 on both sides, and says so.

    .venv/bin/python bench/export_bench.py [--repeat 3] [--models transformer,cnn,resnet50,bert_base,swin_t]
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
REAL = ("resnet50", "bert_base", "swin_t")


def _bare(module: Any, args: tuple[Any, ...], path: Path, dynamic: bool = True) -> None:
    import torch

    batch = torch.export.Dim("batch")
    torch.onnx.export(module, args, str(path), dynamo=True, opset_version=18, external_data=False, verbose=False,
                      dynamic_shapes=tuple({0: batch} for _ in args) if dynamic else None)


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

    from portable.quiet import quiet_libraries
    from portable.spec import load_spec

    spec = f"{ROOT}/fixtures/models/{name}.py:build"
    loaded = load_spec(spec)
    bare, ours = folder / f"{name}_bare.onnx", folder / f"{name}.onnx"
    with quiet_libraries():
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


def _real(name: str) -> Any:
    """ResNet-50 and Swin-T from torchvision, BERT-base (``BertConfig()``, seq 128) from transformers."""
    import sys

    sys.path.insert(0, str(ROOT))
    from bench.zoo.models_hf import TensorOutputs, text_inputs
    from bench.zoo.models_vision import _torchvision
    from bench.zoo.registry import Built
    from bench.zoo.tvops import import_torchvision

    if name != "bert_base":
        return _torchvision(name)
    import_torchvision()  # transformers imports torchvision, whose compiled nms does not load beside the CPU torch
    import torch
    import transformers

    torch.manual_seed(0)
    # no token_type_ids: verify draws every integer input from one range today (issue 11), past its 2 types
    names = ("input_ids", "attention_mask")
    model = transformers.BertModel(transformers.BertConfig()).eval()
    return Built(TensorOutputs(model, names).eval(), text_inputs(30522, names, seq=128), names)


def _portable_module(built: Any, path: Path, batch: str | int, verify: bool) -> Any:
    import portable

    return portable.export(built.module, built.args, path, batch=batch, input_names=built.names, verify=verify,
                           force=True)


def _mode(built: Any, path: Path) -> tuple[str | int, str]:
    """``dynamic`` when portable exports it so, else a static batch 2 (and why)."""
    import portable

    try:
        _portable_module(built, path, "dynamic", False)
        return "dynamic", "dynamic"
    except portable.ExportFailed as exc:
        rules = ",".join(sorted({f.rule_id for f in exc.report.failing()}))
        return 2, f"static batch 2 (--batch dynamic refused: {rules})"


def _interleaved(fns: dict[str, Any], repeat: int) -> dict[str, float]:
    """Each function once per round, round after round; the best time of each."""
    best = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[key] = min(best[key], time.perf_counter() - start)
    return best


def _verified(built: Any, path: Path, batch: str | int) -> Any:
    """One export with verify, for its ``verify`` phase; a failed parity still has its timings."""
    import portable

    try:
        return _portable_module(built, path, batch, True)
    except portable.ExportFailed as exc:
        return type("Failed", (), {"timings": {"verify_failed": str(exc)[:200]}})()


def bench_real(name: str, repeat: int, folder: Path) -> dict[str, Any]:
    import onnx

    from portable.quiet import quiet_libraries

    built = _real(name)
    bare, ours = folder / f"{name}_bare.onnx", folder / f"{name}.onnx"
    with quiet_libraries():
        batch, mode = _mode(built, ours)  # also the warm-up of portable's path
        _bare(built.module, built.args, bare, batch == "dynamic")  # warm-up
        best = _interleaved({"bare": lambda: _bare(built.module, built.args, bare, batch == "dynamic"),
                             "no_verify": lambda: _portable_module(built, ours, batch, False)}, repeat)
        verified = _verified(built, ours, batch)
    return {"model": name, "mode": mode, "bare_s": round(best["bare"], 3), "portable_no_verify_s": round(best["no_verify"], 3),
            "overhead_no_verify": round(best["no_verify"] / best["bare"], 3), "goal_met": best["no_verify"] / best["bare"] <= 1.10,
            "verify_s": verified.timings.get("verify"), "phases_s": verified.timings,
            "nodes_portable": len(onnx.load(str(ours)).graph.node), "nodes_bare": len(onnx.load(str(bare)).graph.node)}


def _guarded(fn: Any, name: str, repeat: int, folder: Path) -> dict[str, Any]:
    """One model's figures, or its error: one model's failure does not lose the others'."""
    try:
        return fn(name, repeat, folder)
    except Exception as exc:  # noqa: BLE001 - a benchmark records what failed
        return {"model": name, "error": f"{type(exc).__name__}: {exc}"[:500]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS), help=f"from {', '.join(MODELS + REAL)}")
    options = parser.parse_args()
    names = [n for n in options.models.split(",") if n]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [_guarded(bench_real if name in REAL else bench_model, name, options.repeat, Path(tmp)) for name in names]
    print(json.dumps({"benchmark": "export", "goal_overhead": 1.10, "models": rows}, indent=2))


if __name__ == "__main__":
    main()
