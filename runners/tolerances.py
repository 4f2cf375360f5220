"""Default parity tolerances by output dtype, and per-output overrides.

An element passes when ``|actual - expected| <= atol + atol_rms * rms(expected) + rtol * |expected|``
(the expected side is the reference runner; ``rms`` is the root mean square of the whole expected
output). ``atol_rms`` is zero except in the fp16 and bf16 defaults: rounding noise in low precision
grows with the magnitude of the tensors a value was computed from, not with the element itself, so
a near-zero element of a large-valued output carries an error of the order of eps times the
output's scale. Defaults and why (see docs/runners.md for the measurements):

* float32: atol 1e-4, rtol 1e-3. ORT CPU against PyTorch on another backend reorders
  reductions (convolution algorithms, GEMM blocking); a random-init ResNet-50 (H200, TF32
  off) measured 2.0e-4 (batch 1) and 2.4e-4 (batch 32) max abs error on logits of rms 25,
  BERT-base 7.8e-6, the tiny test models ~1e-6. torch.testing's 1.3e-6/1e-5 and Polygraphy's
  1e-5/1e-5 are same-backend bounds and fail correct cross-backend exports; 1e-3 relative
  still fails a weight scaled by 1.01.
* float16: atol 1e-3, rtol 1e-2, atol_rms 2e-2. Measured on the H200 (docs/gpu/precision.json):
  correct fp16 pairs (ORT CPU or torch.compile against eager CUDA) need an atol of 0.028 at
  rtol 1e-2 on ResNet-50's logits (rms 25: 0.11 % of it) and 0.0075 on BERT-base's hidden
  states (rms 1: 0.75 %); 2 % of rms passes both with at least a 2.8x margin. The former
  plain 1e-3 failed both. What it cannot catch: one weight scaled by 1.01 moves these outputs
  by 0.2-1.3 % of their rms, under the allowance, and on BERT-base by about what correct pairs
  differ (0.56-0.75 %), so no fp16 bound separates them: check parity in fp32 before converting.
* bfloat16: atol 1e-2, rtol 5e-2, atol_rms 0.15. torch.compile against eager in bf16 needs
  1.1 % of rms on ResNet-50 and 7 % on BERT-base (eps 7.8e-3): 15 % leaves at least a 2.3x
  margin. A weight scaled by 1.01 is inside the noise on both: at this precision parity is a
  gross-error check (a wrong op, layout or attribute, NaN/Inf).
* float32 with TF32 allowed on the PyTorch side (``--tf32``): atol 5e-2, rtol 5e-2; TF32 has
  a 10-bit mantissa (eps 9.8e-4), and ResNet-50 measured 0.060 max abs error with it on.
* float8 and float4 (``portable fix``'s proof, original against fixed model): one unit in the last
  place, ``rtol`` the type's eps and ``atol`` its smallest subnormal (ml_dtypes' ``finfo``; the
  tests check the figures against it). Both models compute in wider types and round to 8 or 4
  bits at the end; float32 results one float32 ulp apart (a reordered sum) can round to
  neighbouring float8 values, never further. Every neighbouring value passes; values two steps
  apart fail from 8 times the smallest normal value up (e4m3fn: from 0.125; nearer zero the
  allowance of one subnormal step can cover two). float8_e8m0fnu holds powers of two only: its neighbour is half or twice
  the value (rtol 1, atol its smallest value).
* integers (int4, uint4, int2, uint2 too), bools and strings: exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from portable.runners.budgets import Figures, Judge

__all__ = ["DEFAULT_TOLERANCES", "FLOAT_DTYPES", "TF32_TOLERANCE", "Tolerance", "ToleranceTable", "parse_overrides"]


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    source: str = "default"
    atol_rms: float = 0.0  # a further absolute allowance, in units of the expected output's RMS
    figure: str = ""  # set when a figure judges the output instead (``cosine >= 0.99``: runners/budgets.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """``atol/rtol``, with ``+K*rms`` after atol when the RMS term is on; the figure when one judges."""
        if self.figure:
            return self.figure
        rms = f"+{self.atol_rms:g}*rms" if self.atol_rms else ""
        return f"{self.atol:g}{rms}/{self.rtol:g}"


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(1e-4, 1e-3, "default float32"),
    "float64": Tolerance(1e-7, 1e-6, "default float64"),
    "float16": Tolerance(1e-3, 1e-2, "default float16", atol_rms=2e-2),
    "bfloat16": Tolerance(1e-2, 5e-2, "default bfloat16", atol_rms=0.15),
    "float8_e4m3fn": Tolerance(2.0 ** -9, 2.0 ** -3, "default float8_e4m3fn (1 ulp)"),
    "float8_e4m3fnuz": Tolerance(2.0 ** -10, 2.0 ** -3, "default float8_e4m3fnuz (1 ulp)"),
    "float8_e5m2": Tolerance(2.0 ** -16, 2.0 ** -2, "default float8_e5m2 (1 ulp)"),
    "float8_e5m2fnuz": Tolerance(2.0 ** -17, 2.0 ** -2, "default float8_e5m2fnuz (1 ulp)"),
    "float8_e8m0fnu": Tolerance(2.0 ** -127, 1.0, "default float8_e8m0fnu (1 ulp)"),
    "float4_e2m1fn": Tolerance(0.5, 0.5, "default float4_e2m1fn (1 ulp)"),
}
TF32_TOLERANCE = Tolerance(5e-2, 5e-2, "tf32 float32")
FLOAT_DTYPES = frozenset({"float32", "float64", "float16", "bfloat16"})  # what a figure (cosine, SQNR) can judge
EXACT = Tolerance(0.0, 0.0, "exact (integer/bool/string)")


@dataclass(frozen=True)
class ToleranceTable:
    """Tolerance lookup: per-output override, then global override, then the dtype default.

    An override replaces the default's bound: with ``--atol``/``--rtol`` given, the bound is
    exactly ``atol + rtol * |expected|`` (no RMS term), the part not given taken from the default.
    """

    tf32: bool = False
    atol: float | None = None
    rtol: float | None = None
    per_output: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    figures: Figures | None = None  # float outputs judged by cosine or SQNR instead (an int8 file; --min-cosine)

    @property
    def given(self) -> bool:
        """Whether the user gave ``--atol``/``--rtol`` (for all outputs or one): judged alone, as asked."""
        return self.atol is not None or self.rtol is not None or bool(self.per_output)

    def judge(self, name: str, dtype: str, expected: np.ndarray) -> Judge | None:
        """The figure that judges this output instead of atol/rtol (None: atol/rtol). The user's ``--min-cosine``/
        ``--min-sqnr`` come first, then the user's ``--atol``/``--rtol``, then a quantized file's manifest."""
        if self.figures is None or dtype not in FLOAT_DTYPES:
            return None
        user = self.atol is not None or self.rtol is not None or name in self.per_output
        return None if user and not self.figures.given else self.figures.judge(name, expected)

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
