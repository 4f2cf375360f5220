"""The proof of ``portable fix``: ONNX Runtime runs the original and the fixed model on the same inputs.

The original runs as it came (its own opset, its external data, from its own path);
the fixed model from the file about to be renamed onto the target (the artefact step's staged file), or
from bytes (a candidate the isolation of a failed proof tries). Feeds are the runners' seeded
feeds (:func:`portable.runners.inputs.make_feeds`) in every type the graph declares
(strings, float8, int4... too: ONNX Runtime takes those through OrtValues,
:func:`portable.runners.inputs.run_onnxruntime`), compared output by output with the
runners' comparator and the dtype tolerances of ``portable compare``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import PortableError, one_line

if TYPE_CHECKING:
    from portable.repair.float64 import References

__all__ = ["DEFAULT_DIM", "Proof", "prove"]

# A symbolic non-batch input dim that --dim does not size is proved at this size (and said so).
DEFAULT_DIM = 2


@dataclass(frozen=True)
class Proof:
    """Whether the fixed model computes what the original does, and how far apart they were.

    ``unavailable`` is set when the original itself could not be run (not fix's failure). ``skipped``: the
    batch sizes the original itself refuses while another one runs (a convolution over the batch axis that
    needs more steps than 1, say): nothing to reproduce there, so they are said, not proven.
    """

    ok: bool
    batches: tuple[int, ...] = ()
    max_abs_diff: float = 0.0
    message: str = ""
    unavailable: str | None = None
    dims: dict[str, int] = field(default_factory=dict)
    comparisons: tuple[dict[str, Any], ...] = ()
    original_runtime: str = "onnxruntime"  # or onnx.reference, and why, when ONNX Runtime cannot load the original
    fixed_runtime: str = "onnxruntime"  # onnx.reference only when neither model loads in ONNX Runtime
    constraints: dict[str, list[str]] = field(default_factory=dict)  # input -> ranges drawn in, and why
    random: str | None = None  # the original's outputs differ run to run: the ops that make it so
    skipped: dict[int, str] = field(default_factory=dict)  # batch -> why the original itself cannot run there
    # an approximate remedy ran (--approximate-gelu): the float64 references it was judged by, and its effect
    approximation: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        finite = self.max_abs_diff if math.isfinite(self.max_abs_diff) else None  # JSON has no Infinity
        return {"ok": self.ok, "batches": list(self.batches), "max_abs_diff": finite,
                "message": self.message, "unavailable": self.unavailable, "dims": dict(self.dims),
                "comparisons": list(self.comparisons), "original_runtime": self.original_runtime,
                "fixed_runtime": self.fixed_runtime, "constraints": dict(self.constraints), "random": self.random,
                "skipped": {str(b): why for b, why in self.skipped.items()}, "approximation": self.approximation}


class _Unavailable(Exception):
    """The original cannot be run: the proof cannot be made."""


class _Failed(Exception):
    """The fixed model cannot be run: the proof fails."""


class _Random(Exception):
    """The original gives different outputs on the same inputs: a finding of the model, not of fix."""


def prove(source: Path, fixed: Path | bytes, batches: Sequence[int], dims: Mapping[str, int], seed: int = 0,
          feeds: Mapping[str, Any] | None = None, approximate: bool = False) -> Proof:
    """Run both models at each batch size on seeded inputs (or once on ``feeds``, the user's inputs);
    every output must agree. ``approximate``: the approximate-gelu remedy was asked for; where it replaced a
    GELU, outputs are judged by float64 references (:mod:`portable.repair.float64`)."""
    from portable.runners.constraints import describe

    if feeds is not None:
        first = next(iter(feeds.values()), None)
        batches = (int(first.shape[0]) if first is not None and first.ndim else 1,)
    constraints = {} if feeds is not None else _constraints(source)
    said = describe(constraints)
    try:
        return _prove(source, fixed, batches, dims, seed, feeds, constraints, approximate)
    except _Unavailable as exc:
        return Proof(False, tuple(batches), message=str(exc), unavailable=str(exc), dims=dict(dims), constraints=said)
    except _Failed as exc:
        return Proof(False, tuple(batches), float("inf"), str(exc), dims=dict(dims), constraints=said)
    except _Random as exc:
        return Proof(False, tuple(batches), message=str(exc), dims=dict(dims), random=str(exc), constraints=said)


def _prove(source: Path, fixed: Path | bytes, batches: Sequence[int], dims: Mapping[str, int], seed: int,
           feeds: Mapping[str, Any] | None, constraints: Mapping[str, Any], approximate: bool) -> Proof:
    from portable.runners.constraints import describe
    from portable.runners.inputs import as_declared, graph_io, make_feeds

    try:
        specs, outputs = graph_io(source, every_type=True)
    except PortableError as exc:
        raise _Unavailable(f"the original's inputs cannot be fed: {exc.message}") from None
    sizes = {**_default_sizes(specs), **dims}
    original, runtime = _original(source)
    candidate, fixed_runtime = _candidate(fixed, runtime != "onnxruntime")
    references = _references(source) if approximate else None
    rows, skipped = [], {}
    for b in batches:
        feed = as_declared(specs, feeds or make_feeds(specs, b, seed=seed, dims=sizes, constraints=constraints))
        try:
            rows.append(_compare(original, candidate, outputs, b, feed, source, references))
        except _Unavailable as exc:
            skipped[b] = str(exc)
    if not rows:  # the original runs at no batch: no proof
        raise _Unavailable(next(iter(skipped.values())))
    worst = max((o["max_abs"] or 0.0 for r in rows for o in r["outputs"]), default=0.0)
    bad = [r for r in rows if not r["passed"]]
    message = "; ".join(r["message"] for r in bad) or f"max |fixed - original| = {worst:.3g}"
    if skipped:
        message += "; not proven where the original itself cannot run: " + "; ".join(skipped.values())
    if references is not None:
        message += f"; {references.sentence()}"
    return Proof(not bad, tuple(r["batch"] for r in rows), worst, message, None, sizes, tuple(rows), runtime,
                 fixed_runtime, describe(constraints), skipped=skipped,
                 approximation=references.to_dict() if references is not None else None)


def _references(source: Path) -> References | None:
    """The float64 references of an approximated original (None: no GELU replaced, the proof is exact)."""
    from portable.repair.float64 import References

    try:
        return References.of(str(source))
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime's and the reference evaluator's errors alike
        raise _Unavailable("the float64 references of --approximate-gelu's proof cannot be made: "
                           f"{one_line(exc, typed=False)}") from None


def _default_sizes(specs: Sequence[Any]) -> dict[str, int]:
    """DEFAULT_DIM for each symbolic non-batch dim (a symbol also at dim 0 of an input is the batch,
    wherever it appears) and each unnamed one (``INPUT:AXIS``)."""
    batch = {s.shape[0] for s in specs if s.shape and isinstance(s.shape[0], str)}
    sizes = {d: DEFAULT_DIM for s in specs for d in s.shape[1:] if isinstance(d, str) and d not in batch}
    unnamed = {f"{s.name}:{axis}": DEFAULT_DIM for s in specs for axis, d in enumerate(s.shape) if axis and d is None}
    return {**sizes, **unnamed}


def _constraints(source: Path) -> dict[str, Any]:
    """What the original's graph does with its inputs (:mod:`portable.runners.constraints`); none when it
    cannot be read that way (the proof then draws as before)."""
    from portable.runners.constraints import constraints_of

    try:
        return constraints_of(source)
    except Exception:  # noqa: BLE001 - an analysis, not a gate: the sessions report a graph they cannot load
        return {}


def _original(source: Path) -> tuple[Any, str]:
    """ONNX Runtime for the original; when it has no kernel for the original's opset (it starts at
    opset 7), ONNX's reference implementation, which implements every version of every op."""
    try:
        return _session(source, "original", _Unavailable), "onnxruntime"
    except _Unavailable as exc:
        from onnx.reference import ReferenceEvaluator

        try:
            return ReferenceEvaluator(str(source)), f"onnx.reference ({exc})"
        except Exception as ref:  # noqa: BLE001 - an op the reference implementation lacks, say
            raise _Unavailable(f"{exc}; nor can onnx.reference: {one_line(ref, typed=False)}") from None


def _candidate(fixed: Path | bytes, reference: bool) -> tuple[Any, str]:
    """ONNX Runtime for the fixed model; onnx.reference too when ONNX Runtime cannot load it and could
    not load the original either (an op newer than this ONNX Runtime): the same implementation runs both."""
    try:
        return _session(fixed, "fixed", _Failed), "onnxruntime"
    except _Failed as exc:
        if not reference:
            raise
        import onnx
        from onnx.reference import ReferenceEvaluator

        try:
            model = onnx.load(str(fixed)) if isinstance(fixed, Path) else onnx.load_from_string(fixed)
            return ReferenceEvaluator(model), f"onnx.reference ({exc})"
        except Exception as ref:  # noqa: BLE001 - as for the original
            raise _Unavailable(f"{exc}; nor can onnx.reference: {one_line(ref, typed=False)}") from None


def _session(model: Path | bytes, which: str, error: type[Exception]) -> Any:
    from portable.runners.sessions import FATAL, SessionFailed, SessionSpec, session_from_onnx

    try:  # FATAL: ONNX Runtime's own (coloured) error lines stay off stderr; its message is in the exception
        return session_from_onnx(model, SessionSpec(log_severity=FATAL), what=f"the {which} model")
    except SessionFailed as exc:
        raise error(exc.message) from None


def _compare(original: Any, candidate: Any, outputs: Sequence[Any], batch: int,
             feeds: Mapping[str, Any], source: Path, references: References | None = None) -> dict[str, Any]:
    from portable.runners.comparator import compare_outputs
    from portable.runners.tolerances import ToleranceTable

    raw = _run(original, feeds, f"the original at batch {batch}", _Unavailable)
    got = _run(candidate, feeds, f"the fixed model at batch {batch}", _Failed)
    expected = raw
    pairs = [_shared_nonfinite(e, g) for e, g in zip(raw, got)] if len(raw) == len(got) else []
    if pairs:
        expected, got = [e for e, _ in pairs], [g for _, g in pairs]
    names = [o.name for o in outputs]
    exact, shifted = _float64(references, names, feeds, batch)
    pair = compare_outputs(("the fixed model", got), ("the original", expected), names,
                           [o.dtype for o in outputs], batch, ToleranceTable(), exact=exact, exact_actual=shifted)
    if not pair.passed:
        _deterministic(original, feeds, raw, batch, source)
    return {**pair.to_dict(), "message": pair.message}


def _float64(references: References | None, names: Sequence[str], feeds: Mapping[str, Any],
             batch: int) -> tuple[list[Any] | None, list[Any] | None]:
    """Both float64 references' outputs at this batch (None, None without references)."""
    if references is None:
        return None, None
    try:
        return references.run(names, feeds)
    except Exception as exc:  # noqa: BLE001 - as for _references
        raise _Unavailable(f"the float64 references cannot run at batch {batch}: {one_line(exc, typed=False)}") from None


def _deterministic(original: Any, feeds: Mapping[str, Any], first: Sequence[Any], batch: int, source: Path) -> None:
    """After a mismatch: the original run again on the same inputs must give the same outputs (compared as
    they came, NaN equal to NaN: never the copies whose shared NaNs were zeroed), or no proof is possible:
    :class:`_Random`, naming the random ops (PORT012's), a finding of the model."""
    import numpy as np

    again = _run(original, feeds, f"the original at batch {batch}", _Unavailable)
    if not all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f") for a, b in zip(map(np.asarray, first),
                                                                               map(np.asarray, again))):
        ops = _random_ops(source)
        raise _Random(f"the original gives different outputs on the same inputs at batch {batch} "
                      f"({ops or 'an op that is not deterministic'}): the model is random, no proof of "
                      "equivalence is possible")


def _random_ops(source: Path) -> str:
    """The random ops of the original, named (PORT012's list; Dropout in training mode too)."""
    try:
        import onnx

        from portable.validators.rules.port012_randomness import random_nodes

        names = random_nodes(onnx.load(str(source), load_external_data=False))
    except Exception:  # noqa: BLE001 - naming them is a courtesy; the finding stands without it
        return ""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _shared_nonfinite(expected: Any, got: Any) -> tuple[Any, Any]:
    """NaN or Inf where both models give the same one is agreement (random inputs to a log, say):
    those elements are zeroed on both sides; any other non-finite value still fails."""
    import numpy as np

    e, g = np.asarray(expected), np.asarray(got)
    if e.shape != g.shape or e.dtype.kind != "f" or g.dtype.kind != "f":
        return e, g
    same = (np.isnan(e) & np.isnan(g)) | (np.isinf(e) & (e == g))
    if not same.any():
        return e, g
    return np.where(same, 0, e), np.where(same, 0, g)


def _run(session: Any, feeds: Mapping[str, Any], what: str, error: type[Exception]) -> list[Any]:
    """The outputs, ml_dtypes' types widened (exactly) so that NaN and Inf are seen (:func:`_shared_nonfinite`)."""
    from portable.runners.comparator import comparable
    from portable.runners.inputs import run_onnxruntime

    ort = hasattr(session, "run_with_ort_values")  # else onnx.reference, which takes every dtype as it is
    try:
        outputs = run_onnxruntime(session, feeds) if ort else session.run(None, dict(feeds))
    except Exception as exc:  # noqa: BLE001 - ORT's runtime errors
        runtime = "ONNX Runtime" if ort else "onnx.reference"
        raise error(f"{runtime} cannot run {what}: {one_line(exc, typed=False)}") from None
    return [comparable(o) for o in outputs]
