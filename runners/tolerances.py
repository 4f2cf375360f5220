"""Default parity tolerances by output dtype, and per-output overrides.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (the expected
side is the reference runner). Defaults and why (see docs/runners.md for the measurements):

* float32: atol 1e-4, rtol 1e-3. ORT CPU against PyTorch on another backend reorders
  reductions (convolution algorithms, GEMM blocking); a random-init ResNet-50 (H200, batch
  32, TF32 off) measured 1.5e-4 max abs error on logits of magnitude ~1, and the tiny test
  models measure ~1e-6. torch.testing's 1.3e-6/1e-5 and Polygraphy's 1e-5/1e-5 are
  same-backend bounds and fail correct cross-backend exports; 1e-3 relative still fails a
  weight scaled by 1.01.
* float16: atol 1e-3, rtol 1e-2 (eps 9.8e-4; accumulation over a deep net is ~10 eps).
* bfloat16: atol 1e-2, rtol 5e-2 (eps 7.8e-3; torch.testing uses 1.6e-2 for one op).
* float32 with TF32 allowed on the PyTorch side (``--tf32``): atol 5e-2, rtol 5e-2; TF32 has
  a 10-bit mantissa (eps 9.8e-4), and ResNet-50 measured 0.033 max abs error with it on.
* integers and bools: exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from portable.errors import UsageError

__all__ = ["DEFAULT_TOLERANCES", "TF32_TOLERANCE", "Tolerance", "ToleranceTable", "parse_overrides"]


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    source: str = "default"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(1e-4, 1e-3, "default float32"),
    "float64": Tolerance(1e-7, 1e-6, "default float64"),
    "float16": Tolerance(1e-3, 1e-2, "default float16"),
    "bfloat16": Tolerance(1e-2, 5e-2, "default bfloat16"),
}
TF32_TOLERANCE = Tolerance(5e-2, 5e-2, "tf32 float32")
EXACT = Tolerance(0.0, 0.0, "exact (integer/bool)")


@dataclass(frozen=True)
class ToleranceTable:
    """Tolerance lookup: per-output override, then global override, then the dtype default."""

    tf32: bool = False
    atol: float | None = None
    rtol: float | None = None
    per_output: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def for_output(self, name: str, dtype: str) -> Tolerance:
        base = self._default(dtype)
        atol, rtol = self.per_output.get(name, (None, None))
        atol = atol if atol is not None else self.atol
        rtol = rtol if rtol is not None else self.rtol
        if atol is None and rtol is None:
            return base
        return Tolerance(base.atol if atol is None else atol, base.rtol if rtol is None else rtol, "user")

    def _default(self, dtype: str) -> Tolerance:
        if dtype == "float32" and self.tf32:
            return TF32_TOLERANCE
        return DEFAULT_TOLERANCES.get(dtype, EXACT)


def _parse_one(text: str, flag: str) -> tuple[str | None, float]:
    name, sep, value = text.rpartition("=")
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected VALUE or OUTPUT=VALUE") from None
    if number < 0:
        raise UsageError(f"{flag} {text!r}: tolerance must be >= 0")
    return (name if sep else None), number


def parse_overrides(atols: Iterable[str], rtols: Iterable[str], *, tf32: bool = False) -> ToleranceTable:
    """Build a table from ``--atol``/``--rtol`` values: ``1e-3`` (all outputs) or ``name=1e-3``."""
    glob: dict[str, float] = {}
    per: dict[str, list[float | None]] = {}
    for index, (flag, values) in enumerate((("--atol", atols), ("--rtol", rtols))):
        for text in values:
            name, number = _parse_one(text, flag)
            if name is None:
                glob[flag] = number
            else:
                per.setdefault(name, [None, None])[index] = number
    return ToleranceTable(tf32=tf32, atol=glob.get("--atol"), rtol=glob.get("--rtol"),
                          per_output={k: (v[0], v[1]) for k, v in per.items()})
