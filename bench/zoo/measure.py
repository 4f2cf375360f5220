"""The zoo's measurements besides portable's own: bare torch.onnx export, onnxsim, op counts, parity with RMS."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DEGENERATE_RMS", "LIVE_RUNTIMES", "REFERENCE_CAP_S", "bare_export", "count_ops", "degenerate", "feeds_like",
           "leaves", "no_runtimes", "parity", "runtimes", "simplified", "targets"]

LIVE_RUNTIMES = ("openvino", "tract", "reference")  # issue 21: each against eager PyTorch, batch 1 and 3
REFERENCE_CAP_S = 60.0  # ONNX's reference evaluator per batch; beyond it the cell says "timed out"

# An output whose RMS is below fp32's absolute tolerance (atol 1e-4, runners/tolerances.py) passes any parity
# check whatever the runtime computes: random-init torchvision ViT's zero head (0), MobileNetV3 (~1e-10).
DEGENERATE_RMS = 1e-4


def degenerate(rms: float) -> bool:
    return rms < DEGENERATE_RMS


def leaves(value: Any) -> list[Any]:
    """The tensors of a (nested) output, in torch.export's flattening order."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [v for v in tree_leaves(value) if isinstance(v, torch.Tensor)]


def _dynamic_shapes(args: Sequence[Any]) -> tuple[Any, ...]:
    import torch

    batch = torch.export.Dim("batch")
    return tuple({0: batch} if isinstance(a, torch.Tensor) else None for a in args)


def bare_export(module: Any, args: tuple[Any, ...], path: Path, dynamic: bool = True) -> dict[str, Any]:
    """``torch.onnx.export(dynamo=True, opset_version=18)``, the baseline: seconds and nodes, or the error."""
    import onnx
    import torch

    start = time.perf_counter()
    try:
        torch.onnx.export(module, args, str(path), dynamo=True, opset_version=18, external_data=False, verbose=False,
                          dynamic_shapes=_dynamic_shapes(args) if dynamic else None)
    except Exception as exc:  # noqa: BLE001 - the baseline's failure is a figure
        return {"ok": False, "seconds": round(time.perf_counter() - start, 3), "error": _line(exc)}
    seconds = time.perf_counter() - start
    return {"ok": True, "seconds": round(seconds, 3), **count_ops(onnx.load(str(path)))}


def count_ops(model: Any) -> dict[str, int]:
    """Top-level nodes, ``Identity`` nodes (functions included), local functions."""
    identities = sum(n.op_type == "Identity" for n in model.graph.node)
    identities += sum(n.op_type == "Identity" for f in model.functions for n in f.node)
    return {"nodes": len(model.graph.node), "identity": identities, "functions": len(model.functions)}


def targets(path: Path) -> dict[str, Any]:
    """``portable.validate(path, targets=all)``: each target's summary (verdict, partition estimate)
    and its PORT201/PORT202 finding counts, plus the seconds the whole validation took."""
    import portable
    from portable.validators.targets import TARGETS

    start = time.perf_counter()
    report = portable.validate(path, portable.Policy(targets=TARGETS))
    seconds = round(time.perf_counter() - start, 3)
    out: dict[str, Any] = {"seconds": seconds, "error": report.error} if report.error else {"seconds": seconds}
    for summary in report.targets:
        found = [f for f in report.findings if f.message.startswith(f"{summary.name}:")]
        out[summary.name] = summary.to_dict() | {
            "ops_missing": sum(f.rule_id == "PORT201" for f in found), "casts": sum(f.rule_id == "PORT202" for f in found)}
    return out


def runtimes(module: Any, args: Sequence[Any], path: Path, batches: Sequence[int] = (1, 3)) -> dict[str, Any]:
    """``compare_runtimes`` (runners/runtimes.py) of the file on OpenVINO CPU, tract and the reference
    evaluator against eager PyTorch: per runtime its verdict over the batches, the worst max abs, the error."""
    from portable.runners.runtimes import compare_runtimes

    start = time.perf_counter()
    report = compare_runtimes(path, LIVE_RUNTIMES, module=module, example_inputs=list(args), batches=list(batches),
                              cap_seconds=REFERENCE_CAP_S)
    # "versus": what the runtimes were compared with; "reference" is the reference evaluator's own cell below
    out: dict[str, Any] = {"seconds": round(time.perf_counter() - start, 1), "versus": report.reference,
                           "error": report.error}
    for name in LIVE_RUNTIMES:
        mine = [r for r in report.records if r.runtime == name]
        worst = [r for r in mine if r.status != "pass"] or mine
        out[name] = {"status": worst[0].status if worst else "not run", "version": mine[0].version if mine else None,
                     "max_abs": max((r.max_abs for r in mine if r.max_abs is not None), default=None),
                     "error": next((r.error for r in mine if r.error), None), "load_s": mine[0].load_seconds if mine else None}
    return out


def no_runtimes(error: str) -> dict[str, Any]:
    """The live cell of a model whose runtimes were not measured (the worker died, the re-export failed)."""
    cell = {"status": "not measured", "version": None, "max_abs": None, "error": error, "load_s": None}
    return {"seconds": 0, "versus": None, "error": error, **{name: dict(cell) for name in LIVE_RUNTIMES}}


def simplified(path: Path) -> dict[str, Any]:
    """onnxsim's ``simplify()`` of the file: its node count, or why it could not."""
    import onnx
    import onnxsim

    start = time.perf_counter()
    try:
        model, ok = onnxsim.simplify(onnx.load(str(path)))
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": _line(exc)}
    if not ok:
        return {"ok": False, "error": "onnxsim's check of its result failed"}
    return {"ok": True, "nodes": len(model.graph.node), "seconds": round(time.perf_counter() - start, 3)}


def feeds_like(args: Sequence[Any], batch: int, seed: int) -> list[Any]:
    """Inputs at ``batch`` drawn per input from that example's own range: ids stay in the vocabulary,
    an all-ones mask stays all ones, floats are normal."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = []
    for arg in args:
        shape = (batch, *arg.shape[1:])
        if arg.is_floating_point():
            out.append(torch.randn(shape, generator=gen, dtype=arg.dtype))
        else:
            low, high = int(arg.min()), int(arg.max())
            out.append(torch.randint(low, high + 1, shape, generator=gen, dtype=arg.dtype))
    return out


def parity(module: Any, args: Sequence[Any], path: Path, batches: Sequence[int] = (1, 3)) -> dict[str, Any]:
    """ONNX Runtime vs eager on :func:`feeds_like` inputs: per output max |diff| and the eager RMS."""
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    rows: list[dict[str, Any]] = []
    for k, batch in enumerate(batches):
        feeds = feeds_like(args, batch, seed=10 + k)
        with torch.no_grad():
            expected = [t.detach().numpy() for t in leaves(module(*feeds))]
        actual = session.run(None, {n: f.numpy() for n, f in zip(names, feeds)})
        rows.extend(_output_row(batch, i, e, a) for i, (e, a) in enumerate(zip(expected, actual)))
    worst = max((r["max_abs"] for r in rows), default=0.0)
    return {"batches": list(batches), "max_abs": worst, "outputs": rows,
            "degenerate": sorted({r["output"] for r in rows if r["degenerate"]})}


def _output_row(batch: int, index: int, expected: np.ndarray, actual: np.ndarray) -> dict[str, Any]:
    e = expected.astype(np.float64)
    rms = float(np.sqrt(np.mean(e**2))) if e.size else 0.0
    same = e.shape == actual.shape
    diff = float(np.max(np.abs(e - actual))) if same and e.size else float("inf")
    return {"batch": batch, "output": index, "shape": list(actual.shape), "shape_ok": same, "max_abs": diff,
            "rms": rms, "degenerate": degenerate(rms)}


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
