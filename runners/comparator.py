"""Per-output comparison of two runners' results: error statistics and a pass flag.

Every statistic is computed in float64 over the elements that are finite on both sides;
a non-finite value (NaN or Inf) on either side is a failure by itself, as is a shape
mismatch. ``max_rel`` is ``|a - e| / |e|`` over elements with ``e != 0``.

An output is *degenerate* when an all-zero output would pass the same tolerance: every
``|expected| <= atol + atol_rms * rms(expected) + rtol * |expected|`` (all zeros, or values
like 1e-16 from a random-init network's zero-initialised head). Such a comparison cannot tell
a correct export from one that outputs zeros, so parity on it proves nothing: it is flagged
(``degenerate``, a warning), not failed. ``rms_expected``/``rms_actual`` give each side's scale.

A float output may be judged by a figure instead (a quantized file, ``--min-cosine``/``--min-sqnr``:
:class:`portable.runners.budgets.Judge`): the mean cosine of its last-axis vectors, or its SQNR, at least a
limit; the statistics are the same, and the verdict names the figure, its limit and why.

Strings compare exactly: ``beyond`` counts the elements that differ, the zero-error bin those
that agree, and the numeric statistics are NaN (null in JSON). ml_dtypes' types (bfloat16,
float8, int4...) are compared as float64 like every number; :func:`comparable` widens them to
float32 or int8/uint8 (exactly) for NumPy's own tests (``isnan``) before that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from portable.runners.tolerances import Tolerance, ToleranceTable

if TYPE_CHECKING:
    from portable.runners.budgets import Judge

__all__ = [
    "HISTOGRAM_EDGES",
    "NOISE_FACTOR",
    "ErrorStats",
    "NoiseFloor",
    "OutputComparison",
    "PairComparison",
    "comparable",
    "compare_arrays",
    "compare_outputs",
]

# log10 bin edges for the absolute-error histogram: [0 exactly] then decades 1e-12 .. 1e+3.
HISTOGRAM_EDGES: tuple[int, ...] = tuple(range(-12, 4))


def _clean(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


@dataclass(frozen=True)
class ErrorStats:
    """Error statistics of ``actual`` against ``expected`` for one output."""

    elements: int
    max_abs: float
    max_rel: float
    mean_abs: float
    p99_abs: float
    cosine: float
    beyond: int  # elements outside atol + atol_rms * rms(expected) + rtol * |expected|
    nonfinite_actual: int
    nonfinite_expected: int
    histogram: tuple[int, ...]  # zero-error count, then one count per HISTOGRAM_EDGES decade
    shape_mismatch: str | None = None
    rms_expected: float = 0.0  # root mean square of the finite expected values
    rms_actual: float = 0.0
    degenerate: bool = False  # an all-zero output would pass too: parity proves nothing here
    bound_use: float = 0.0  # max |a - e| / (atol + atol_rms * rms + rtol * |e|): under 1 passes; 1 / it is the margin

    @property
    def share_beyond(self) -> float:
        return self.beyond / self.elements if self.elements else 0.0

    @property
    def passed(self) -> bool:
        return (self.shape_mismatch is None and self.beyond == 0
                and self.nonfinite_actual == 0 and self.nonfinite_expected == 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "elements": self.elements,
            "max_abs": _clean(self.max_abs),
            "max_rel": _clean(self.max_rel),
            "mean_abs": _clean(self.mean_abs),
            "p99_abs": _clean(self.p99_abs),
            "cosine": _clean(self.cosine),
            "beyond": self.beyond,
            "share_beyond": self.share_beyond,
            "nonfinite_actual": self.nonfinite_actual,
            "nonfinite_expected": self.nonfinite_expected,
            "shape_mismatch": self.shape_mismatch,
            "histogram": list(self.histogram),
            "rms_expected": _clean(self.rms_expected),
            "rms_actual": _clean(self.rms_actual),
            "degenerate": self.degenerate,
            "bound_use": _clean(self.bound_use),
        }


def _histogram(abs_err: np.ndarray) -> tuple[int, ...]:
    zero = int(np.count_nonzero(abs_err == 0))
    logs = np.log10(abs_err[abs_err > 0])
    logs = np.clip(logs, HISTOGRAM_EDGES[0], HISTOGRAM_EDGES[-1] + 0.5)
    counts, _ = np.histogram(logs, bins=[*HISTOGRAM_EDGES, HISTOGRAM_EDGES[-1] + 1])
    return (zero, *(int(c) for c in counts))


def _cosine(a: np.ndarray, e: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(e))
    if norm == 0.0:
        return 1.0 if not a.any() and not e.any() else 0.0
    return float(np.dot(a, e) / norm)


def _rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(values ** 2))) if values.size else 0.0


def _mismatch(actual: np.ndarray, expected: np.ndarray, reason: str) -> ErrorStats:
    nan = float("nan")
    return ErrorStats(int(expected.size), nan, nan, nan, nan, nan, int(expected.size),
                      0, 0, (0,) * (len(HISTOGRAM_EDGES) + 1), reason)


def comparable(array: Any) -> np.ndarray:
    """An array in a type NumPy's functions take: ml_dtypes' floats (bfloat16, float8, float4) as
    float32, its integers (int4, int2...) as int8 or uint8; every value is exact in the wider type."""
    array = np.asarray(array)
    if array.dtype.isbuiltin != 2:  # NumPy's own types (ml_dtypes' are user-defined: 2)
        return array
    import onnx_ir as ir

    kind = ir.DataType.from_numpy(array.dtype)
    wide = np.float32 if kind.is_floating_point() else np.int8 if kind.is_signed() else np.uint8
    return array.astype(wide)


def _text(actual: np.ndarray, expected: np.ndarray) -> ErrorStats:
    """Strings: equal or not, element by element."""
    differ = int(np.count_nonzero(actual.astype(object) != expected.astype(object)))
    nan = float("nan")
    bins = (int(expected.size) - differ, *(0,) * len(HISTOGRAM_EDGES))
    return ErrorStats(int(expected.size), nan, nan, nan, nan, nan, differ, 0, 0, bins)


def compare_arrays(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> ErrorStats:
    """Statistics of ``actual`` against ``expected`` (the reference)."""
    if actual.shape != expected.shape:
        return _mismatch(actual, expected, f"shape {list(actual.shape)} vs {list(expected.shape)}")
    if actual.dtype.kind in "OUS" or expected.dtype.kind in "OUS":
        return _text(actual, expected)
    a = np.asarray(actual, dtype=np.float64).ravel()
    e = np.asarray(expected, dtype=np.float64).ravel()
    finite = np.isfinite(a) & np.isfinite(e)
    af, ef = a[finite], e[finite]
    abs_err = np.abs(af - ef)
    nonzero = ef != 0
    rel = abs_err[nonzero] / np.abs(ef[nonzero])
    rms_e, rms_a = _rms(ef), _rms(af)
    atol = tolerance.atol + tolerance.atol_rms * rms_e
    bound = atol + tolerance.rtol * np.abs(ef)
    beyond = int(np.count_nonzero(abs_err > bound))
    empty = abs_err.size == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        use = np.where(abs_err == 0, 0.0, abs_err / bound)
    return ErrorStats(
        elements=int(a.size),
        max_abs=0.0 if empty else float(abs_err.max()),
        max_rel=float(rel.max()) if rel.size else 0.0,
        mean_abs=0.0 if empty else float(abs_err.mean()),
        p99_abs=0.0 if empty else float(np.percentile(abs_err, 99)),
        cosine=_cosine(af, ef),
        beyond=beyond,
        nonfinite_actual=int(np.count_nonzero(~np.isfinite(a))),
        nonfinite_expected=int(np.count_nonzero(~np.isfinite(e))),
        histogram=_histogram(abs_err),
        rms_expected=rms_e,
        rms_actual=rms_a,
        degenerate=bool(np.all(np.abs(ef) <= bound)),  # zeros in place of actual would pass (also when empty)
        bound_use=0.0 if empty else float(use.max()),
    )


# How far ONNX Runtime's error against the float64 reference may exceed the fp32 PyTorch model's own (its
# arithmetic noise floor on these inputs). Two correct fp32 computations of one model err by about as much:
# the same ops, rounded at the same widths, only summed in another order or kernel. Measured (docs/runners.md):
# ONNX Runtime's max error over PyTorch fp32's was 0.71-1.5 on the test models deep_mlp, cnn and transformer at
# batches 1 and 3; 4 leaves 2.6x over the worst seen. A weight scaled by 1.01 put deep_mlp's ONNX Runtime
# output 1.6e4 noise floors away, far beyond it.
NOISE_FACTOR = 4.0


@dataclass(frozen=True)
class NoiseFloor:
    """One output judged against a float64 run of the reference model: ``expected_error`` is the fp32
    reference's own max error against it (the noise floor), ``actual_error`` the compared runtime's."""

    expected_error: float
    actual_error: float
    factor: float = NOISE_FACTOR

    @property
    def bound(self) -> float:
        return self.factor * self.expected_error

    @property
    def passed(self) -> bool:
        return math.isfinite(self.actual_error) and self.actual_error <= self.bound

    @property
    def ratio(self) -> float:
        """``actual_error / expected_error``: how many noise floors the runtime's error is."""
        if self.expected_error == 0:
            return 0.0 if self.actual_error == 0 else float("inf")
        return self.actual_error / self.expected_error

    def to_dict(self) -> dict[str, Any]:
        return {"expected_error": _clean(self.expected_error), "actual_error": _clean(self.actual_error),
                "factor": self.factor, "bound": _clean(self.bound), "ratio": _clean(self.ratio),
                "passed": self.passed}


def noise_floor(actual: np.ndarray, expected: np.ndarray, exact: np.ndarray,
                exact_actual: np.ndarray | None = None) -> NoiseFloor:
    """Both sides' max error against ``exact`` (the float64 reference), over the elements finite everywhere;
    ``actual``'s against ``exact_actual`` where it is meant to compute something else (fix's approximate
    remedies: the reference approximated the same way, in float64)."""
    a, e, x = (np.asarray(v, dtype=np.float64).ravel() for v in (actual, expected, exact))
    xa = x if exact_actual is None else np.asarray(exact_actual, dtype=np.float64).ravel()
    if not a.shape == e.shape == x.shape == xa.shape:
        return NoiseFloor(0.0, float("inf"))
    finite = np.isfinite(a) & np.isfinite(e) & np.isfinite(x) & np.isfinite(xa)
    if not finite.any() or (np.isfinite(a) & np.isfinite(e) & ~(np.isfinite(x) & np.isfinite(xa))).any():
        return NoiseFloor(0.0, float("inf"))  # float64 has nothing to say here: no calibration, the tolerance judges
    return NoiseFloor(float(np.abs(e - x)[finite].max()), float(np.abs(a - xa)[finite].max()))


def _margin(use: float) -> str:
    return "exactly" if use == 0 else f"by {1 / use:.3g}x"


@dataclass(frozen=True)
class OutputComparison:
    """One output of one pair of runners."""

    output: str
    dtype: str
    tolerance: Tolerance
    stats: ErrorStats
    noise: NoiseFloor | None = None  # the float64 calibration, when the reference could run in float64
    judge: Judge | None = None  # a figure judges instead of atol/rtol (a quantized file, --min-cosine/--min-sqnr)
    measured: float | None = None  # the judge's figure, measured

    @property
    def passed(self) -> bool:
        if self.judge is not None:
            return self._sound and self.measured is not None and self.measured >= self.judge.limit
        return self.stats.passed or self._within_noise

    @property
    def _sound(self) -> bool:
        s = self.stats
        return s.shape_mismatch is None and not s.nonfinite_actual and not s.nonfinite_expected

    @property
    def _within_noise(self) -> bool:
        return self._sound and self.noise is not None and self.noise.passed

    @property
    def judged_by(self) -> str:
        """``tolerance`` (atol/rtol against the reference), ``noise floor`` (float64 calibration), or the judge's
        figure (``cosine``, ``sqnr``)."""
        if self.judge is not None:
            return self.judge.figure
        return "noise floor" if not self.stats.passed and self._within_noise else "tolerance"

    def judgement(self) -> str:
        """Which figure judges this output, and why (one line of the report)."""
        if self.judge is not None:
            return f"output {self.output!r}: {self.judge.describe()}: {self.judge.why}"
        if self.dtype == "string":
            return f"output {self.output!r}: every string equal (strings compare exactly)"
        floor = (f", or its error against float64 within {self.noise.factor:g}x the reference's own (the noise floor)"
                 if self.noise is not None else "")
        return (f"output {self.output!r}: max |diff| within atol/rtol {self.tolerance.describe()} "
                f"({_source(self.tolerance)}){floor}")

    def verdict(self, actual: str, expected: str) -> str:
        """What was judged, which way, and by how much it cleared (or :meth:`problem` when it failed)."""
        problem = self.problem(actual, expected)
        if problem is not None:
            return problem
        s, name = self.stats, f"output {self.output!r}"
        if self.dtype == "string":
            return f"{name} passes: every string equal"
        if self.judge is not None:
            return f"{name} passes {self.judge.describe()}: {_figure(self.judge, self.measured)} ({self.judge.why})"
        if self.judged_by == "noise floor" and self.noise is not None:
            n = self.noise
            return (f"{name} passes by the float64 noise floor: {actual}'s error {n.actual_error:.3g} is "
                    f"{n.ratio:.2g}x {expected} fp32's own {n.expected_error:.3g} (allowed {n.factor:g}x: cleared "
                    f"{_margin(n.actual_error / n.bound if n.bound else 0.0)}); {s.max_abs:.3g} apart, over "
                    f"atol/rtol {self.tolerance.describe()}")
        return (f"{name} passes atol/rtol {self.tolerance.describe()} ({_source(self.tolerance)}): "
                f"max |diff| {s.max_abs:.3g}, cleared "
                f"{_margin(s.bound_use)}")

    def problem(self, actual: str, expected: str) -> str | None:
        """Why this output fails, in one clause naming both sides (None when it passes): the one wording
        of a parity failure, for ``compare``, export's verify and ``fix``'s proof alike."""
        s, name = self.stats, f"output {self.output!r}"
        if self.passed:
            return None
        if s.shape_mismatch is not None:
            return f"{name} has {s.shape_mismatch} ({actual} vs {expected})"
        if s.nonfinite_actual or s.nonfinite_expected:
            return f"{name} has NaN/Inf ({s.nonfinite_actual} in {actual}, {s.nonfinite_expected} in {expected})"
        if self.dtype == "string":
            return f"{name} has {s.beyond} of {s.elements} strings unlike {expected}'s"
        if self.judge is not None:
            return (f"{name} has {_figure(self.judge, self.measured)}, under {self.judge.describe()} "
                    f"({self.judge.why}; max |diff| {s.max_abs:.3g})")
        text = (f"{name} differs by up to {s.max_abs:.3g} ({s.beyond} of {s.elements} element(s) beyond "
                f"atol/rtol {self.tolerance.describe()})")
        if self.noise is not None:
            n = self.noise
            text += (f", and its error against float64 {expected}, {n.actual_error:.3g}, is {n.ratio:.3g}x "
                     f"{expected} fp32's own {n.expected_error:.3g} (the noise floor; allowed {n.factor:g}x)")
        return text

    @property
    def warning(self) -> str | None:
        """Why this output's parity proves nothing, if it does not."""
        if not self.stats.degenerate or self.stats.shape_mismatch is not None:
            return None
        return (f"output {self.output!r}: degenerate: parity proves nothing (reference rms "
                f"{self.stats.rms_expected:.3g}: an all-zero output would pass {self.tolerance.describe()} too)")

    def to_dict(self) -> dict[str, Any]:
        judge = None if self.judge is None else {"figure": self.judge.figure, "limit": self.judge.limit,
                                                    "measured": _clean(self.measured), "why": self.judge.why}
        return {"output": self.output, "dtype": self.dtype, "passed": self.passed, "judged_by": self.judged_by,
                "judgement": self.judgement(), "tolerance": self.tolerance.to_dict(), **self.stats.to_dict(),
                "warning": self.warning, "noise_floor": self.noise.to_dict() if self.noise is not None else None,
                "judge": judge}


def _figure(judge: Judge, measured: float | None) -> str:
    """``cosine 0.9951`` / ``SQNR 23.4 dB`` (``n/a`` when the shapes disagree)."""
    if measured is None:
        return f"{judge.figure} n/a"
    return f"cosine {measured:.6g}" if judge.figure == "cosine" else f"SQNR {measured:.3g} dB"


def _source(tolerance: Tolerance) -> str:
    """Why these atol/rtol: the dtype's default (measured, runners/tolerances.py), a runtime's row, or the user's."""
    return "given (--atol/--rtol)" if tolerance.source == "user" else tolerance.source


@dataclass(frozen=True)
class PairComparison:
    """All outputs of ``actual`` against the reference runner ``expected`` at one batch size."""

    actual: str
    expected: str
    batch: int
    outputs: tuple[OutputComparison, ...]
    error: str | None = None  # an output count mismatch, say

    @property
    def passed(self) -> bool:
        return self.error is None and all(o.passed for o in self.outputs)

    @property
    def failing_outputs(self) -> tuple[str, ...]:
        return tuple(o.output for o in self.outputs if not o.passed)

    def problems(self) -> tuple[str, ...]:
        """Each failing output's :meth:`OutputComparison.problem`, or the pair's own error."""
        if self.error is not None:
            return (self.error,)
        found = (o.problem(self.actual, self.expected) for o in self.outputs)
        return tuple(p for p in found if p is not None)

    @property
    def message(self) -> str:
        """``batch 3: output 'y' differs by up to ...; output 'z' ...``, empty when the pair passes."""
        problems = self.problems()
        return f"batch {self.batch}: " + "; ".join(problems) if problems else ""

    @property
    def max_abs(self) -> float:
        """The largest absolute difference over the outputs whose shapes agree (inf on an error)."""
        if self.error is not None:
            return float("inf")
        return max((o.stats.max_abs for o in self.outputs if o.stats.shape_mismatch is None), default=0.0)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(o.warning for o in self.outputs if o.warning is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"actual": self.actual, "expected": self.expected, "batch": self.batch,
                "passed": self.passed, "error": self.error, "warnings": list(self.warnings),
                "outputs": [o.to_dict() for o in self.outputs]}


def compare_outputs(actual: tuple[str, Sequence[np.ndarray]], expected: tuple[str, Sequence[np.ndarray]],
                    names: Sequence[str], dtypes: Sequence[str], batch: int,
                    tolerances: ToleranceTable, exact: Sequence[np.ndarray] | None = None,
                    exact_actual: Sequence[np.ndarray] | None = None) -> PairComparison:
    """Compare two runners' outputs (given as ``(runner name, arrays)``), output by output.

    ``exact``: the reference model's outputs computed in float64. A float32 output judged by the default
    tolerance then also passes when ``actual``'s error against them is within :data:`NOISE_FACTOR` times
    ``expected``'s own (:class:`NoiseFloor`); ``--atol``/``--rtol`` overrides are judged by themselves alone.
    ``exact_actual``: what ``actual`` is judged against instead, where it is meant to differ (:func:`noise_floor`)."""
    (a_name, a_out), (e_name, e_out) = actual, expected
    if len(a_out) != len(e_out) or len(e_out) != len(names):
        error = f"{a_name} gave {len(a_out)} outputs, {e_name} gave {len(e_out)}, the model declares {len(names)}"
        return PairComparison(a_name, e_name, batch, (), error)
    rows: list[OutputComparison] = []
    exact = exact if exact is not None and len(exact) == len(names) else None
    exacts: Sequence[np.ndarray | None] = exact if exact is not None else [None] * len(names)
    shifted = exact_actual if exact_actual is not None and len(exact_actual) == len(names) else exacts
    for name, dtype, a, e, x, xa in zip(names, dtypes, a_out, e_out, exacts, shifted):
        rows.append(_output(name, dtype, np.asarray(a), np.asarray(e), tolerances, x, xa))
    return PairComparison(a_name, e_name, batch, tuple(rows))


def _output(name: str, dtype: str, a: np.ndarray, e: np.ndarray, tolerances: ToleranceTable, x: Any,
            xa: Any) -> OutputComparison:
    """One output: its statistics, judged by its figure when one applies, else by atol/rtol (calibrated)."""
    judge = tolerances.judge(name, dtype, e)
    tol = tolerances.for_output(name, dtype)
    tol = replace(tol, figure=judge.describe()) if judge is not None else tol
    stats = compare_arrays(a, e, tol)
    if judge is not None:
        return OutputComparison(name, dtype, tol, stats, None, judge,
                                judge.measure(a, e) if stats.shape_mismatch is None else None)
    # the dtype's default, or a runtime's own default row (runners/runtimes.py): never a user's or tf32's bound
    calibrate = x is not None and dtype == "float32" and tol.source.startswith("default float32")
    return OutputComparison(name, dtype, tol, stats, noise_floor(a, e, np.asarray(x), xa) if calibrate else None)
