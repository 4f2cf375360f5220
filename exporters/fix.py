"""``portable fix``: an ONNX model from elsewhere in, a portable one out where that is safe, proven equivalent.

Phases: load (the validators' reader: no external path is followed), remedies (one
onnx-ir pass each, see :data:`REMEDIES`; each runs on a clone, so a pass that is
refused or fails leaves the model as it was, and says why), proof (ONNX Runtime runs
the original and the fixed model on the same seeded inputs), validate (what no remedy
addresses is listed with each rule's hint), write (atomic, with the manifest ``export``
writes). A failed proof, or a proof the original cannot run, writes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir
from onnx_ir.passes import common

from portable.errors import ExitCode, FindingsError, InternalError, UsageError, one_line
from portable.exporters.fix_proof import Proof
from portable.exporters.passes import BATCH, CanonicalNamesPass, FoldBatchShapesPass, OptimizePass, StaticShapesPass
from portable.exporters.progress import Phases
from portable.exporters.remedies import (
    ConvertOpsetPass,
    DropDefaultAttributesPass,
    ExpandNewerOpsPass,
    FixBatchPass,
    FixDimsPass,
    InternalizeDataPass,
    PReluSlopesPass,
    RaiseIRVersionPass,
    RemedyRefused,
    batch_symbol,
    external_bytes,
    symbols,
)
from portable.exporters.serialize import Serialized
from portable.exporters.writer import PROTOBUF_LIMIT, check_size, write_atomic, write_json
from portable.findings import Finding
from portable.policy import Policy, load_policy
from portable.report import ValidationReport

__all__ = ["REMEDIES", "FixFailed", "FixResult", "Remedy", "RemedyReport", "fix"]

FIX_SCHEMA = "portable.fix/1"


@dataclass(frozen=True)
class _Plan:
    """What the user asked for, resolved once."""

    source: Path
    output: Path
    batch: str | int
    dims: dict[str, int]
    policy: Policy
    canonical_names: bool
    inputs: Path | None = None  # the user's inputs for the proof (.npz), instead of seeded ones


@dataclass(frozen=True)
class Remedy:
    """One remedy: its name, and the pass it runs on the current model (None: not asked for)."""

    name: str
    build: Callable[[_Plan, ir.Model], ir.passes.PassBase | None]
    fatal: bool = False  # refused: nothing can be done safely (e.g. external data outside the folder)


def _symbol(model: ir.Model) -> str | None:
    return BATCH if batch_symbol(model) == BATCH else None


def _probed(pass_type: type[ir.passes.InPlacePass], model: ir.Model) -> ir.passes.InPlacePass:
    """A probed pass of the exporter for this model's batch symbol. The passes take a ``ShapeProbe``
    once exporters/passes.py's rework (another branch, merged on main) is in, the symbol before it;
    each remedy runs on its own clone, so each gets its own probe."""
    try:
        from portable.exporters.passes import ShapeProbe
    except ImportError:
        return pass_type(_symbol(model))  # type: ignore[call-arg]
    return pass_type(ShapeProbe(_symbol(model)))  # type: ignore[call-arg]


def _unused() -> ir.passes.Sequential:
    return ir.passes.Sequential(common.RemoveUnusedNodesPass(), common.RemoveUnusedFunctionsPass(),
                                common.RemoveUnusedOpsetsPass())


# The remedies in the order they run; each is reported. Tests may add one (a proof failure injected).
REMEDIES: tuple[Remedy, ...] = (
    Remedy("internalize", lambda p, m: InternalizeDataPass(p.source.parent, min(p.policy.max_size_bytes,
                                                                                PROTOBUF_LIMIT)), fatal=True),
    Remedy("inline-functions", lambda p, m: common.InlinePass()),
    Remedy("initializers-not-inputs", lambda p, m: ir.passes.Sequential(common.RemoveInitializersFromInputsPass(),
                                                                         RaiseIRVersionPass(4))),
    Remedy("expand-newer-ops", lambda p, m: ExpandNewerOpsPass(p.policy.opset)),
    Remedy("prelu-slopes", lambda p, m: PReluSlopesPass(p.policy.opset)),
    Remedy("default-attributes", lambda p, m: DropDefaultAttributesPass(p.policy.opset)),
    Remedy("opset", lambda p, m: ConvertOpsetPass(p.policy.opset)),
    Remedy("dims", lambda p, m: FixDimsPass(p.dims) if p.dims else None),
    Remedy("batch", lambda p, m: FixBatchPass(p.batch if isinstance(p.batch, int) else None)),
    Remedy("fold-constants", lambda p, m: ir.passes.Sequential(common.NameFixPass(), OptimizePass())),
    Remedy("fold-batch-shapes", lambda p, m: _probed(FoldBatchShapesPass, m)),
    Remedy("remove-unused", lambda p, m: _unused()),
    Remedy("static-shapes", lambda p, m: _probed(StaticShapesPass, m)),
    Remedy("canonical-names", lambda p, m: CanonicalNamesPass() if p.canonical_names else None),
)


@dataclass(frozen=True)
class RemedyReport:
    """What one remedy did: ``applied``, ``unchanged``, ``skipped`` (not asked for), ``refused`` or ``failed``."""

    name: str
    status: str
    detail: str = ""
    nodes_before: dict[str, int] = field(default_factory=dict)
    nodes_after: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "nodes_before": dict(self.nodes_before), "nodes_after": dict(self.nodes_after)}


@dataclass(frozen=True)
class FixResult:
    """What :func:`fix` did, proved, found and wrote (``written``: False under ``strict`` with findings)."""

    source: Path
    path: Path
    written: bool
    opset_before: int | None
    opset_after: int | None
    remedies: tuple[RemedyReport, ...]
    proof: Proof | None
    report: ValidationReport | None
    bytes_internalized: int = 0
    dims_fixed: dict[str, int | str] = field(default_factory=dict)
    fingerprint: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def remaining(self) -> tuple[Finding, ...]:
        """Findings that fail the contract after every remedy: not fixable automatically."""
        return self.report.failing() if self.report is not None else ()

    @property
    def ok(self) -> bool:
        return self.written and not self.remaining and (self.proof is None or self.proof.ok)

    @property
    def exit_code(self) -> ExitCode:
        if self.proof is not None and self.proof.unavailable:
            return ExitCode.ERROR
        return ExitCode.OK if self.ok else ExitCode.FINDINGS

    @property
    def manifest_path(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": FIX_SCHEMA, "source": str(self.source), "path": str(self.path), "written": self.written,
            "manifest": str(self.manifest_path) if self.written else None, "ok": self.ok,
            "exit_code": int(self.exit_code), "fingerprint": self.fingerprint,
            "opset": {"before": self.opset_before, "after": self.opset_after},
            "bytes_internalized": self.bytes_internalized, "dims_fixed": dict(self.dims_fixed),
            "remedies": [r.to_dict() for r in self.remedies],
            "proof": self.proof.to_dict() if self.proof is not None else None,
            "remaining": [f.to_dict() for f in self.remaining],
            "validation": self.report.to_dict() if self.report is not None else None,
            "timings": dict(self.timings),
        }


class FixFailed(FindingsError):
    """Nothing was written: a refused remedy, a failed proof (exit 1), or a proof the original
    cannot run (exit 3). ``result`` holds what was done and found up to there."""

    def __init__(self, message: str, result: FixResult) -> None:
        super().__init__(message, path=str(result.source))
        self.result = result
        self.exit_code = result.exit_code if result.exit_code != ExitCode.OK else ExitCode.FINDINGS


def fix(model: str | Path, output: str | Path, *, batch: str | int = "dynamic", dims: Mapping[str, int] | None = None,
        opset: int | None = None, policy: Policy | None = None, force: bool = False, verify: bool = True,
        strict: bool = False, canonical_names: bool = False, inputs: str | Path | None = None,
        quiet: bool = True) -> FixResult:
    """Make the model at ``model`` portable where that is safe, prove it, write it to ``output``.

    ``inputs``: an ``.npz`` of the model's inputs (keys: input names, or ``arr_0``... in order) that
    the proof runs on instead of seeded random ones (for indices or shapes fed as data).
    Returns the result when the proof holds (``result.remaining``: findings no remedy
    addresses; then ``result.ok`` is False and, under ``strict``, nothing is written).
    Raises :class:`FixFailed` (nothing written) when a remedy must be refused or the proof
    fails, :class:`portable.errors.UsageError` for bad arguments, and
    :class:`portable.errors.InputError` for an unreadable model.
    """
    plan = replace(_plan(model, output, batch, dims, opset, policy, strict, canonical_names),
                   inputs=Path(inputs) if inputs is not None else None)
    from portable.exporters.fix_run import run

    return run(plan, Phases(quiet), verify=verify, force=force)


def _plan(model: str | Path, output: str | Path, batch: str | int, dims: Mapping[str, int] | None,
          opset: int | None, policy: Policy | None, strict: bool, canonical_names: bool) -> _Plan:
    from portable.exporters.inputs import parse_batch

    batch = parse_batch(batch)
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int) or opset < 1):
        raise UsageError(f"bad opset {opset!r}: expected a positive integer")
    policy = policy or load_policy()
    changes: dict[str, Any] = {"strict": policy.strict or strict}
    if opset is not None:
        changes["opset"] = opset
    if isinstance(batch, int):
        changes["batch"] = "static"
    return _Plan(Path(model), Path(output), batch, dict(dims or {}), policy.with_(**changes), canonical_names)


def op_counts(model: ir.Model) -> dict[str, int]:
    """Nodes by op type (``domain::Op`` outside the default domain), functions included."""
    seen: Counter[str] = Counter()
    graphs = [model.graph, *model.functions.values()]
    for graph in graphs:
        for node in graph.all_nodes() if isinstance(graph, ir.Graph) else graph:
            seen[node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"] += 1
    return dict(sorted(seen.items()))


def apply(remedy: Remedy, plan: _Plan, model: ir.Model) -> tuple[ir.Model, RemedyReport]:
    """Run one remedy on a clone; the clone replaces the model only when the pass succeeded."""
    before = op_counts(model)
    step = remedy.build(plan, model)
    if step is None:
        return model, RemedyReport(remedy.name, "skipped", "not asked for", before, before)
    work = model.clone()
    try:
        result = step(work)
    except RemedyRefused as exc:
        return model, RemedyReport(remedy.name, "refused", str(exc), before, before)
    except Exception as exc:  # noqa: BLE001 - a library pass that crashes leaves the model as it was
        return model, RemedyReport(remedy.name, "failed", one_line(exc), before, before)
    changed = result.modified and _signature(result.model) != _signature(model)
    return result.model, RemedyReport(remedy.name, "applied" if changed else "unchanged", "", before,
                                      op_counts(result.model))


def _signature(model: ir.Model) -> tuple[Any, ...]:
    """What a remedy can change, cheaply: opsets, ops and their attribute names, initializers,
    functions and every value's shape. (Library passes such as onnxscript's optimizer say "modified"
    whether or not they changed anything.)"""
    values = [*model.graph.inputs, *(o for n in model.graph.all_nodes() for o in n.outputs)]
    attributes = tuple(tuple(n.attributes) for n in model.graph.all_nodes())
    return (tuple(sorted(model.opset_imports.items())), tuple(op_counts(model).items()), attributes,
            tuple((k, type(v.const_value).__name__) for k, v in model.graph.initializers.items()),
            tuple(model.functions),
            tuple((str(v.shape), v.const_value is not None) for v in values),
            tuple(str(v.shape) for v in model.graph.outputs))


def describe(plan: _Plan, before: ir.Model, after: ir.Model, reports: list[RemedyReport]) -> list[RemedyReport]:
    """The reports with what each measurable remedy changed written into its detail."""
    details = {
        "opset": f"{before.opset_imports.get('')} -> {after.opset_imports.get('')}",
        "internalize": f"{external_bytes(before):,} bytes read into the model",
        "dims": ", ".join(f"{k}={v}" for k, v in plan.dims.items()),
        "batch": _batch_detail(before, plan),
        "static-shapes": _outputs_detail(before, after),
    }
    return [replace(r, detail=r.detail or (details.get(r.name, "") if r.status == "applied" else ""))
            for r in reports]


def _outputs_detail(before: ir.Model, after: ir.Model) -> str:
    """Graph outputs whose shape the run wrote anew (dims that inference had lost, say)."""
    shapes = {v.name: v.shape for v in before.graph.outputs}
    changed = [f"output '{v.name}' {_dims(shapes[v.name])} -> {_dims(v.shape)}" for v in after.graph.outputs
               if v.name in shapes and _dims(shapes[v.name]) != _dims(v.shape)]
    return ", ".join(changed)


def _dims(shape: ir.Shape | None) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape is not None else "unknown"


def _batch_detail(model: ir.Model, plan: _Plan) -> str:
    symbol = batch_symbol(model)
    return f"'{symbol}' -> {plan.batch if isinstance(plan.batch, int) else repr(BATCH)}" if symbol else ""


def check_dims(plan: _Plan, model: ir.Model) -> None:
    """``--dim`` names a symbol the graph's inputs or outputs have (a usage error otherwise)."""
    unknown = sorted(set(plan.dims) - symbols(model))
    if unknown:
        known = ", ".join(sorted(symbols(model))) or "none"
        raise UsageError(f"--dim {', '.join(unknown)}: no such symbolic dim in the model's inputs or outputs "
                         f"(its symbols: {known})", path=str(plan.source))


def serialize(model: ir.Model, plan: _Plan) -> tuple[Serialized, str]:
    """Refuse oversized weights, then the fixed model's bytes (no weight copied:
    ``exporters.serialize``) with the manifest's stamps and fingerprint."""
    from portable.exporters.fingerprint import fingerprint
    from portable.exporters.manifest import stamp
    from portable.exporters.serialize import hollow, spliced

    check_size(model, plan.policy.max_size_bytes)
    proto, payloads = hollow(model)
    stamp(proto, plan.policy, precision(proto), plan.batch)
    print_ = fingerprint(proto, payloads)
    proto.metadata_props.add(key="portable.fingerprint", value=print_)
    return spliced(proto, payloads), print_


def precision(proto: onnx.ModelProto) -> str:
    """fp16/bf16 when the floating inputs are in that type; fp32 otherwise (the manifest's ``precision``)."""
    types = {i.type.tensor_type.elem_type for i in proto.graph.input}
    if onnx.TensorProto.FLOAT16 in types:
        return "fp16"
    return "bf16" if onnx.TensorProto.BFLOAT16 in types else "fp32"


def validate(held: Serialized, plan: _Plan) -> ValidationReport:
    """The fixed model's rules, read as ``portable validate`` would read the file it makes."""
    from portable.validators import validate_held

    report = validate_held(held.proto, held.payloads, held.pieces, str(plan.output), plan.policy)
    if report.error is not None:  # a rule crashed: portable's failure, not the model's (exit 3)
        raise InternalError(f"validating the fixed model failed: {report.error}", path=str(plan.output))
    return report


def write(plan: _Plan, data: Sequence[bytes | memoryview], manifest: dict[str, Any], force: bool) -> None:
    """The model, then its manifest; a new model is removed again if its manifest cannot be written."""
    existed = plan.output.exists()
    write_atomic(plan.output, data, force)
    try:
        write_json(plan.output.with_name(plan.output.name + ".json"), manifest)
    except BaseException:
        if not existed:
            plan.output.unlink(missing_ok=True)
        raise
