"""The parity check: ONNX Runtime against eager PyTorch, through the same path as ``portable compare``.

One parity path: the inputs come from the runners' seeded generator
(:func:`portable.runners.inputs.make_feeds`: an integer input as the graph uses it, token ids over
their whole table and a padding mask as real padding (:mod:`portable.runners.constraints`), else in
its example's own range; :attr:`Parity.inputs` says how each was drawn, and the manifest keeps it),
the same arrays for both sides; eager PyTorch runs as :class:`portable.runners.torch_runners.EagerRunner` (same output
flattening), and :func:`portable.runners.comparator.compare_outputs` judges with compare's default
tolerances. So ``portable export``'s verify and ``portable compare`` give the same numbers on the
same model, batch and seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from portable.errors import one_line
from portable.runners.base import RunnerFailed
from portable.runners.comparator import PairComparison, compare_outputs
from portable.runners.inputs import (
    InputSpec,
    OutputSpec,
    as_declared,
    draws,
    int_ranges_from_examples,
    io_of_proto,
    make_feeds,
    run_onnxruntime,
)
from portable.runners.sessions import SessionFailed, session_from_onnx
from portable.runners.tolerances import ToleranceTable
from portable.runners.torch_runners import EagerRunner, Float64Runner, float64_reference

__all__ = ["DTYPES", "ExampleRunner", "Parity", "verify_parity"]

# precision -> the dtype whose default tolerance (runners/tolerances.py, measured) judges it
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


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
    warnings: tuple[str, ...] = ()  # e.g. a degenerate output: parity on it proves nothing
    float64: str = ""  # how the verdict was calibrated: the float64 reference ran, or why not
    seed: int = 0
    inputs: dict[str, str] = field(default_factory=dict)  # input -> how its seeded values were drawn, and why

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"batches": list(self.batches), "warnings": list(self.warnings)}


class ExampleRunner(EagerRunner):
    """Eager PyTorch fed the graph's flat inputs put back into the examples' structure
    (:class:`~portable.runners.torch_runners.ExampleArgs`, which ``portable compare`` uses too)."""

    def __init__(self, module: Any, examples: Sequence[Any]) -> None:
        super().__init__(module, "cpu", "eager", examples=examples)


def verify_parity(module: Any, examples: Sequence[Any], model: bytes | str, batches: Sequence[int],
                  precision: str = "fp32", seed: int = 0, proto: Any = None,
                  tolerances: ToleranceTable | None = None) -> Parity:
    """Run both runtimes at each batch size on compare's seeded inputs for the graph's inputs, judged by
    ``tolerances`` (default: compare's for each output's dtype). ``model``: the serialized model or a
    file's path; ``proto``, when given, its graph's inputs and outputs (no weights needed)."""
    import onnx

    table = tolerances or ToleranceTable()
    tol = table.for_output("", DTYPES[precision])
    session = _session(model, precision)
    if isinstance(session, Parity):
        return session
    if proto is None:
        proto = onnx.load(model) if isinstance(model, str) else onnx.load_from_string(model)
    specs, outputs = io_of_proto(proto)
    runner = ExampleRunner(module, examples)
    runner.load()
    exact, judged = float64_reference(module, [o.dtype for o in outputs], table.given, examples=examples,
                                      precision=precision)
    how = _draws(proto, specs, examples)
    try:
        details = [_compare(runner, session, specs, outputs, b, seed, how, table, exact) for b in batches]
    finally:
        if exact is not None:  # the float64 copy holds twice the weights: let it go before the write
            exact.unload()
            exact.module = None
    judged = next((d["float64"] for d in details if d.get("float64")), judged)
    worst = max((d["max_abs_diff"] for d in details), default=0.0)
    bad = [d for d in details if not d["ok"]]
    warnings = _degenerate_warnings(details)
    message = "; ".join(d["message"] for d in bad) or f"max |onnx - torch| = {worst:.3g}"
    drawn = {s.name: d.describe(s.dtype) for s, d in zip(specs, draws(specs, **how).values())}
    return Parity(not bad, tuple(batches), worst, tol.rtol, tol.atol, tol.atol_rms, message, None, details, warnings,
                  judged, seed, drawn)


def _draws(proto: Any, specs: Sequence[InputSpec], examples: Sequence[Any]) -> dict[str, Any]:
    """What the graph does with each input (compare's analysis), then each example input's own range."""
    from portable.runners.constraints import constraints_of

    return {"constraints": constraints_of(proto), "observed": int_ranges_from_examples(specs, examples)}


def _degenerate_warnings(details: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """One warning per degenerate output, naming the batches where it was (compare's wording)."""
    seen: dict[str, list[dict[str, Any]]] = {}
    for detail in details:
        for row in detail["outputs"]:
            if row["degenerate"]:
                seen.setdefault(row["output"], []).append(row | {"batch": detail["batch"]})
    return tuple(f"output {name!r}: degenerate: parity proves nothing (reference rms "
                 f"{max(r['rms_expected'] for r in rows):.3g} at batch {', '.join(str(r['batch']) for r in rows)}: "
                 f"an all-zero output would pass {rows[0]['tolerance']} too)" for name, rows in seen.items())


def _session(model: bytes | str, precision: str) -> Any:
    """An ONNX Runtime CPU session, or a :class:`Parity` saying why there is none."""
    try:
        return session_from_onnx(model, what="the exported model")
    except SessionFailed as exc:
        if precision == "bf16" and "NOT_IMPLEMENTED" in exc.detail:  # the CPU provider lacks bf16 kernels
            return Parity(ok=True, skipped=f"ONNX Runtime's CPU provider has no bf16 kernel here: {exc.detail}")
        return Parity(ok=False, message=exc.message)


def _compare(runner: ExampleRunner, session: Any, specs: Sequence[InputSpec], outputs: Sequence[OutputSpec],
             batch: int, seed: int, how: dict[str, Any], table: ToleranceTable,
             double: Float64Runner | None = None) -> dict[str, Any]:
    feeds = make_feeds(specs, batch, seed=seed, **how)
    try:
        expected = runner.infer(feeds)
    except RunnerFailed as exc:
        return _detail(batch, False, float("inf"), f"batch {batch}: {exc}")
    exact, note = None, ""
    if double is not None:
        try:
            exact = double.infer(feeds)
        except RunnerFailed as exc:  # an op without a float64 kernel, say
            note = f"default tolerances only: PyTorch in float64 failed at batch {batch} ({exc})"
    try:
        got = run_onnxruntime(session, as_declared(specs, feeds))  # bfloat16 as bfloat16, through OrtValues
    except Exception as exc:  # noqa: BLE001 - ORT's own types: the export does not run at this batch
        return _detail(batch, False, float("inf"), f"batch {batch}: ONNX Runtime failed to run: {one_line(exc, limit=300)}")
    pair = compare_outputs(("ONNX Runtime", got), ("PyTorch", expected), [o.name for o in outputs],
                           [o.dtype for o in outputs], batch, table, exact=exact)
    return _detail(batch, pair.passed, pair.max_abs, pair.message, pair) | ({"float64": note} if note else {})


def _detail(batch: int, ok: bool, worst: float, message: str, pair: PairComparison | None = None) -> dict[str, Any]:
    rows = [{"output": o.output, "max_abs": o.stats.max_abs, "rms_expected": o.stats.rms_expected,
             "rms_actual": o.stats.rms_actual, "degenerate": o.warning is not None,
             "tolerance": o.tolerance.describe(), "judged_by": o.judged_by,
             "noise_floor": o.noise.to_dict() if o.noise is not None else None,
             "verdict": o.verdict(pair.actual, pair.expected) if pair else ""}
            for o in (pair.outputs if pair else ())]
    return {"batch": batch, "ok": ok, "max_abs_diff": worst, "message": message, "outputs": rows}
