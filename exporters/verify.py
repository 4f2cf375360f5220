"""The parity check: ONNX Runtime against eager PyTorch on seeded random inputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from portable.exporters.inputs import random_like, with_batch

__all__ = ["TOLERANCES", "Parity", "verify_parity"]

# precision -> (rtol, atol)
TOLERANCES = {"fp32": (1e-3, 1e-4), "fp16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2)}


@dataclass(frozen=True)
class Parity:
    """What the check compared and how far apart the two runtimes were."""

    ok: bool
    batches: tuple[int, ...] = ()
    max_abs_diff: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    message: str = ""
    skipped: str | None = None  # why the check could not run (e.g. no ONNX Runtime kernel for bf16)
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"batches": list(self.batches)}


def verify_parity(module: Any, examples: Sequence[Any], data: bytes, batches: Sequence[int],
                  precision: str = "fp32", seed: int = 0) -> Parity:
    """Run both runtimes at each batch size on seeded inputs shaped like ``examples``."""
    import onnxruntime as ort

    rtol, atol = TOLERANCES[precision]
    try:
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/InvalidGraph types
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        if precision == "bf16" and "NOT_IMPLEMENTED" in str(exc):  # the CPU provider lacks bf16 kernels
            return Parity(ok=True, skipped=f"ONNX Runtime's CPU provider has no bf16 kernel here: {first}")
        return Parity(ok=False, message=f"ONNX Runtime cannot load the exported model: {first}")
    names = [i.name for i in session.get_inputs()]
    details = [_compare(module, session, names, examples, b, seed + k, rtol, atol) for k, b in enumerate(batches)]
    worst = max((d["max_abs_diff"] for d in details), default=0.0)
    bad = [d for d in details if not d["ok"]]
    message = "; ".join(d["message"] for d in bad) or f"max |onnx - torch| = {worst:.3g}"
    return Parity(not bad, tuple(batches), worst, rtol, atol, message, None, details)


def _compare(module: Any, session: Any, names: list[str], examples: Sequence[Any], batch: int,
             seed: int, rtol: float, atol: float) -> dict[str, Any]:
    import torch

    args = [random_like(tuple(with_batch(e, batch).shape), e.dtype, seed + i) for i, e in enumerate(examples)]
    with torch.no_grad():
        expected = [t.float().numpy() for t in _flatten(module(*args))]
    feeds = {n: _numpy(a) for n, a in zip(names, args)}
    got = [np.asarray(o).astype(np.float32) for o in session.run(None, feeds)]
    return _judge(batch, expected, got, rtol, atol)


def _judge(batch: int, expected: list[np.ndarray], got: list[np.ndarray], rtol: float, atol: float) -> dict[str, Any]:
    if len(expected) != len(got):
        return {"batch": batch, "ok": False, "max_abs_diff": float("inf"),
                "message": f"batch {batch}: {len(got)} outputs from ONNX Runtime, {len(expected)} from torch"}
    worst, problems = 0.0, []
    for i, (e, g) in enumerate(zip(expected, got)):
        if e.shape != g.shape:
            problems.append(f"output {i} shape {list(g.shape)} != torch {list(e.shape)}")
            continue
        diff = float(np.max(np.abs(e.astype(np.float64) - g), initial=0.0))
        worst = max(worst, diff)
        if not np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            problems.append(f"output {i} differs by up to {diff:.3g} (rtol {rtol}, atol {atol})")
    message = f"batch {batch}: " + "; ".join(problems) if problems else ""
    return {"batch": batch, "ok": not problems, "max_abs_diff": worst, "message": message}


def _numpy(tensor: Any) -> np.ndarray:
    import torch

    if tensor.dtype == torch.bfloat16:
        import ml_dtypes  # onnxruntime feeds bfloat16 through ml_dtypes

        return tensor.float().numpy().astype(ml_dtypes.bfloat16)
    return tensor.numpy()


def _flatten(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flatten(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _flatten(v)]
    return []
