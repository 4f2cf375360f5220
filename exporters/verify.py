"""The parity check: ONNX Runtime against eager PyTorch on seeded random inputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from portable.errors import one_line
from portable.exporters.inputs import random_like, with_batch
from portable.runners.comparator import compare_arrays
from portable.runners.tolerances import DEFAULT_TOLERANCES, Tolerance

__all__ = ["TOLERANCES", "Parity", "verify_parity"]

# precision -> the tolerance `portable compare` uses for that dtype (measured: runners/tolerances.py)
TOLERANCES: dict[str, Tolerance] = {"fp32": DEFAULT_TOLERANCES["float32"], "fp16": DEFAULT_TOLERANCES["float16"],
                                    "bf16": DEFAULT_TOLERANCES["bfloat16"]}


@dataclass(frozen=True)
class Parity:
    """What the check compared and how far apart the two runtimes were."""

    ok: bool
    batches: tuple[int, ...] = ()
    max_abs_diff: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    atol_rms: float = 0.0  # a further absolute allowance in units of the torch output's RMS (fp16, bf16)
    message: str = ""
    skipped: str | None = None  # why the check could not run (e.g. no ONNX Runtime kernel for bf16)
    details: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"batches": list(self.batches)}


def verify_parity(module: Any, examples: Sequence[Any], data: bytes, batches: Sequence[int],
                  precision: str = "fp32", seed: int = 0) -> Parity:
    """Run both runtimes at each batch size on seeded inputs shaped like ``examples``."""
    import onnxruntime as ort

    tol = TOLERANCES[precision]
    try:
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/InvalidGraph types
        first = one_line(exc, typed=False)
        if precision == "bf16" and "NOT_IMPLEMENTED" in str(exc):  # the CPU provider lacks bf16 kernels
            return Parity(ok=True, skipped=f"ONNX Runtime's CPU provider has no bf16 kernel here: {first}")
        return Parity(ok=False, message=f"ONNX Runtime cannot load the exported model: {first}")
    names = [i.name for i in session.get_inputs()]
    details = [_compare(module, session, names, examples, b, seed + k, tol) for k, b in enumerate(batches)]
    worst = max((d["max_abs_diff"] for d in details), default=0.0)
    bad = [d for d in details if not d["ok"]]
    message = "; ".join(d["message"] for d in bad) or f"max |onnx - torch| = {worst:.3g}"
    return Parity(not bad, tuple(batches), worst, tol.rtol, tol.atol, tol.atol_rms, message, None, details)


def _compare(module: Any, session: Any, names: list[str], examples: Sequence[Any], batch: int,
             seed: int, tol: Tolerance) -> dict[str, Any]:
    import torch

    args = [random_like(tuple(with_batch(e, batch).shape), e.dtype, seed + i) for i, e in enumerate(examples)]
    with torch.no_grad():
        expected = [t.float().numpy() for t in _flatten(module(*args))]
    feeds = {n: _numpy(a) for n, a in zip(names, args)}
    got = [np.asarray(o).astype(np.float32) for o in session.run(None, feeds)]
    return _judge(batch, expected, got, tol)


def _judge(batch: int, expected: list[np.ndarray], got: list[np.ndarray], tol: Tolerance) -> dict[str, Any]:
    if len(expected) != len(got):
        return {"batch": batch, "ok": False, "max_abs_diff": float("inf"),
                "message": f"batch {batch}: {len(got)} outputs from ONNX Runtime, {len(expected)} from torch"}
    worst, problems = 0.0, []
    for i, (e, g) in enumerate(zip(expected, got)):
        if e.shape != g.shape:
            problems.append(f"output {i} shape {list(g.shape)} != torch {list(e.shape)}")
            continue
        stats = compare_arrays(g, e, tol)  # the same statistics and verdict as `portable compare`
        worst = max(worst, stats.max_abs)
        if stats.nonfinite_actual or stats.nonfinite_expected:
            problems.append(f"output {i} has NaN/Inf ({stats.nonfinite_actual} from ONNX Runtime, "
                            f"{stats.nonfinite_expected} from torch)")
        elif not stats.passed:
            problems.append(f"output {i} differs by up to {stats.max_abs:.3g} (atol/rtol {tol.describe()})")
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
