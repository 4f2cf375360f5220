"""The remedies table: which passes ``portable fix`` runs, in which order, and how each is applied.

The passes themselves are graph transformations and live with the exporter's (``portable.exporters.remedies``
for those of fix alone, ``portable.exporters.passes`` for those both use; onnx-ir's common passes); each
builder here imports its pass when it runs, so that this ground-floor package imports no upper folder at
module level. Each remedy runs on a clone (:func:`apply`): a pass that is refused or fails leaves the
model as it was, and says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, NamedTuple

import onnx_ir as ir
from onnx_ir.passes import common

from portable.errors import UsageError, one_line
from portable.repair.records import Plan, Remedy, RemedyReport

__all__ = ["INT32_TARGETS", "PAD_MODE_ROWS", "REMEDIES", "TableLine", "apply", "check_dims", "describe", "int32_targets",
           "op_counts", "pad_modes", "partitions", "says", "sort_nodes"]


def _internalize(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import InternalizeDataPass
    from portable.exporters.writer import PROTOBUF_LIMIT

    return InternalizeDataPass(plan.source.parent, min(plan.policy.max_size_bytes, PROTOBUF_LIMIT))


def _inline(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    return common.InlinePass()


def _initializers_not_inputs(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import RaiseIRVersionPass

    return ir.passes.Sequential(common.RemoveInitializersFromInputsPass(), RaiseIRVersionPass(4))


def _expand_newer(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import ExpandNewerOpsPass

    return ExpandNewerOpsPass(plan.policy.opset)


def _prelu(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import PReluSlopesPass

    return PReluSlopesPass(plan.policy.opset)


def _default_attributes(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import DropDefaultAttributesPass

    return DropDefaultAttributesPass(plan.policy.opset)


def _opset(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import ConvertOpsetPass

    return ConvertOpsetPass(plan.policy.opset)


def _negative_dims(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import NegativeDimsPass

    return NegativeDimsPass()


def _dims(plan: Plan, model: ir.Model) -> ir.passes.PassBase | None:
    from portable.exporters.remedies import FixDimsPass

    return FixDimsPass(plan.dims) if plan.dims else None


def _batch(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import FixBatchPass

    return FixBatchPass(plan.batch if isinstance(plan.batch, int) else None)


def _fold_constants(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.passes import OptimizePass

    return ir.passes.Sequential(common.NameFixPass(), OptimizePass())


def _static_dims(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import StaticDimsPass

    return StaticDimsPass()


def _constant_of_shape(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters.remedies import ConstantOfShapePass

    return ConstantOfShapePass()


def _static_dims_detail(plan: Plan, before: ir.Model, after: ir.Model) -> str:
    """Each size read from a static dim: ``input_ids dim 1 -> 128``."""
    from portable.exporters.remedies import static_dim_reads

    return ", ".join(f"{name} dim {axis} -> {size}" for name, axis, size in static_dim_reads(before))


def _expand_batch(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    from portable.exporters import passes
    from portable.exporters.remedies import ExpandBatchShapesPass, batch_symbol

    return ExpandBatchShapesPass(passes.ShapeProbe(passes.BATCH if batch_symbol(model) == passes.BATCH else None))


def _expand_detail(plan: Plan, before: ir.Model, after: ir.Model) -> str:
    """Each ``Expand`` whose size became a constant: ``Expand '/Expand' -> [1, 1, 128, 128]``."""
    was = {n.name for n in before.graph if n.op_type == "Expand" and len(n.inputs) > 1 and n.inputs[1] is not None
           and n.inputs[1].const_value is None}
    now = [n for n in after.graph if n.op_type == "Expand" and n.name in was and n.inputs[1] is not None
           and n.inputs[1].const_value is not None]
    return ", ".join(f"Expand '{n.name}' -> {n.inputs[1].const_value.numpy().tolist()} (its input has the batch)"  # type: ignore[union-attr]
                     for n in now)


def _probed(name: str) -> Any:
    """A builder of the exporter's probed pass ``name`` for this model's batch symbol: each remedy runs on its
    own clone, so each gets its own probe."""
    def build(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
        from portable.exporters import passes
        from portable.exporters.remedies import batch_symbol

        symbol = passes.BATCH if batch_symbol(model) == passes.BATCH else None
        pass_type: Any = getattr(passes, name)
        built: ir.passes.PassBase = pass_type(passes.ShapeProbe(symbol))
        return built

    return build


class TableLine(NamedTuple):
    """Where a target's profile says what a remedy answers: ``where`` is an op row (``ai.onnx:Gather``: its notes)
    or a field of the profile (``lacks``, ``notes``), ``words`` the profile's words there, ``source`` where they
    come from upstream."""

    where: str
    words: str
    source: str


# targets whose sources want int64 as int32, each with its profile's words that say so (``fix --target NAME`` opts
# in while the profile still says them: :func:`int32_targets`; tests/repair/test_int32_indices.py holds each to its
# profile). WebNN's table states no types; its profile says so, and the WebNN EP at the profile's commit narrows
# int64 itself where the device lacks it (a constant beyond int32 fails the session: no fallback); WebGPU has no
# entry: its Gather and ScatterElements kernels take int64 indices (Tind int32, int64), and the one int64 gap its
# profile records, Range's T (float32, int32), is no index (a Range of constants is folded before).
INT32_TARGETS: dict[str, TableLine] = {
    "nnapi": TableLine("ai.onnx:Gather", "Input indices should be constant if not int32 type.",
                       "tools/ci_build/github/android/nnapi_supported_ops.md, ai.onnx:Gather"),
    "webnn": TableLine("lacks", "types: the table states none (the browser's WebNN backend decides, per device)",
                       "js/web/docs/webnn-operators.md has no type column; the WebNN EP at the profile's commit "
                       "(onnxruntime/core/providers/webnn/builders/helper.cc, IsDataTypeSupportedByWebNNOp): "
                       "\"Current context doesn't support int64, but int32 is supported.\"; microsoft/onnxruntime#29756: "
                       "int64 Cast and Reshape unsupported behind WebNN with the CPU fallback disabled"),
}


def int32_targets(targets: Iterable[str]) -> list[str]:
    """The targets of :data:`INT32_TARGETS` among ``targets`` whose profile still says what their entry quotes."""
    return [name for name in targets if name in INT32_TARGETS and says(name, INT32_TARGETS[name])]


def says(target: str, line: TableLine) -> bool:
    """Whether ``target``'s profile has ``line.words`` where ``line`` says (an op row's notes, or a profile field)."""
    from portable.validators.targets.profile import load_profile

    profile = load_profile(target)
    if ":" in line.where:
        domain, _, op = line.where.partition(":")
        entry = profile.entry("" if domain == "ai.onnx" else domain, op)
        return entry is not None and line.words in entry.notes
    field: tuple[str, ...] = getattr(profile, line.where)
    return line.words in field


def _int32_indices(plan: Plan, model: ir.Model) -> ir.passes.PassBase | None:
    from portable.exporters.remedies import Int32IndicesPass

    return Int32IndicesPass() if int32_targets(plan.policy.targets) else None


def _int32_detail(plan: Plan, before: ir.Model, after: ir.Model) -> str:
    """What int32-indices converted (for which targets) and each constant it left int64, why."""
    from portable.exporters.remedies import Int32IndicesPass

    done = Int32IndicesPass.narrowed(before)
    words = [f"int64 -> int32 for {', '.join(int32_targets(plan.policy.targets))}: {', '.join(done)}"] if done else []
    words += [f"left {name}: a value does not fit int32" for name in Int32IndicesPass.unfit(before)]
    return "; ".join(words)


# targets whose Pad row takes only some modes, with the row's words: ``fix --target NAME`` rewrites the others
# (pad-as-slices). A target whose table has no Pad row, or lists it as not supported, needs no entry: its
# profile says so (coreml: ONNX Runtime's ML Program table has no Pad). tests/repair/test_pad_reflect.py holds
# each quote to its profile.
PAD_MODE_ROWS: dict[str, tuple[frozenset[str], str]] = {
    "nnapi": (frozenset({"reflect", "edge"}), "nnapi_supported_ops.md, ai.onnx:Pad: \"Only constant mode Pad is supported.\""),
    "migraphx": (frozenset({"edge"}), "onnx_operators.rst, Pad: \"``edge``, ``warp`` padding not supported\""),
    "litert": (frozenset({"edge"}), "onnx2tf's README, Pad: \"`mode` in `{constant,reflect}`\""),
}


def pad_modes(targets: Iterable[str]) -> frozenset[str]:
    """The Pad modes (``reflect``, ``edge``) that one of the targets' tables does not take: both where the table
    has no Pad row or lists it as not supported, those of :data:`PAD_MODE_ROWS` where the row says so."""
    from portable.exporters.target_rewrites import PAD_MODES
    from portable.validators.targets.profile import load_profile

    modes: set[str] = set()
    for name in targets:
        entry = load_profile(name).entry("", "Pad")
        row = PAD_MODE_ROWS.get(name)
        if entry is None or not entry.supported:
            modes.update(PAD_MODES)
        elif row is not None and _quoted(row[1]) in entry.notes:
            modes.update(row[0])
    return frozenset(modes)


def _quoted(source: str) -> str:
    """The table's words of a ``PAD_MODE_ROWS`` source line (between its first and last double quote)."""
    return source[source.index('"') + 1:source.rindex('"')]


def _pads_as_slices(plan: Plan, model: ir.Model) -> ir.passes.PassBase | None:
    from portable.exporters.target_rewrites import PadAsSlicesPass

    modes = pad_modes(plan.policy.targets)
    return PadAsSlicesPass(modes) if modes else None


def _pads_detail(plan: Plan, before: ir.Model, after: ir.Model) -> str:
    """What pad-as-slices rewrote, the partitions on the targets that asked for it, and each Pad it left, why."""
    from portable.exporters.target_rewrites import pad_mode, pad_refusal

    modes = pad_modes(plan.policy.targets)
    wanted = [n for n in before.graph if pad_mode(n) in modes]
    left = [n for n in after.graph if pad_mode(n) in modes]
    done = Counter(pad_mode(n) for n in wanted) - Counter(pad_mode(n) for n in left)
    words = []
    if done:
        kinds = ", ".join(f"{mode} {count}" for mode, count in sorted(done.items()))
        asked = [t for t in plan.policy.targets if pad_modes([t])]
        words.append(f"{sum(done.values())} Pad ({kinds}) -> Slice + Concat; partitions "
                     + ", ".join(_partition_change(t, a, b) for t, a, b in _before_after(asked, before, after)))
    opset = after.opset_imports.get("")
    words += [f"left Pad '{n.name}' ({pad_mode(n)}): {pad_refusal(n, opset)}" for n in left]
    return "; ".join(words)


def _before_after(targets: list[str], before: ir.Model,
                  after: ir.Model) -> list[tuple[str, tuple[int, int | None], tuple[int, int | None]]]:
    first, second = partitions(before, targets), partitions(after, targets)
    return [(t, first[t], second[t]) for t in targets]


def _partition_change(target: str, before: tuple[int, int | None], after: tuple[int, int | None]) -> str:
    """``coreml 2 -> 1``; where the target needs fixed sizes and the batch is a symbol, also with it fixed."""
    fixed = f" ({before[1]} -> {after[1]} with the batch fixed)" if before[1] is not None and after[1] is not None else ""
    return f"{target} {before[0]} -> {after[0]}{fixed}"


def partitions(model: ir.Model, targets: Iterable[str]) -> dict[str, tuple[int, int | None]]:
    """Per target, the partition estimate of ``model`` (``portable validate --target``'s): as it is, and with its
    batch fixed where the target needs fixed sizes and the batch is a symbol (None otherwise)."""
    from portable.exporters.serialize import hollow
    from portable.validators.targets.check import analyse
    from portable.validators.targets.facts import ModelFacts
    from portable.validators.targets.profile import load_profile

    proto = hollow(model)[0]  # the weights' payloads left out: the estimate reads the graph and its shapes
    graph = proto.graph
    facts = ModelFacts.of(proto, _batch_symbols(model))
    io = ({v.name for v in graph.input}, {v.name for v in graph.output})
    found = {}
    for name in targets:
        analysis = analyse(load_profile(name), facts, io)
        found[name] = (analysis.estimate.partitions, analysis.fixed.partitions if analysis.fixed is not None else None)
    return found


def _batch_symbols(model: ir.Model) -> list[str]:
    """The symbols at dim 0 of the graph's inputs and outputs (``ModelContext.batch_symbols``, as validate reads them)."""
    ends = (*model.graph.inputs, *model.graph.outputs)
    return sorted({str(v.shape[0]) for v in ends if v.shape is not None and v.shape.rank()
                   and isinstance(v.shape[0], ir.SymbolicDim) and v.shape[0].value is not None})


def _unused(plan: Plan, model: ir.Model) -> ir.passes.PassBase:
    unused_functions = common.RemoveUnusedFunctionsPass()  # type: ignore[no-untyped-call]  # onnx-ir: no annotations
    return ir.passes.Sequential(common.RemoveUnusedNodesPass(), unused_functions, common.RemoveUnusedOpsetsPass())


def rank_limit(targets: Iterable[str]) -> int | None:
    """The lowest rank limit the targets' profiles state (the usability checker's, for CoreML), or None."""
    from portable.validators.targets.profile import load_profile

    limits = [r for r in (load_profile(t).max_rank for t in targets) if r is not None]
    return min(limits) if limits else None


def _rank_limit(plan: Plan, model: ir.Model) -> ir.passes.PassBase | None:
    from portable.exporters.rank_rewrites import TransposeRankPass

    limit = rank_limit(plan.policy.targets)
    return TransposeRankPass(limit) if limit is not None else None


def _rank_detail(plan: Plan, before: ir.Model, after: ir.Model) -> str:
    """How many Transposes came down to the limit, the partitions on the targets with one, and each left, why."""
    from portable.exporters.rank_rewrites import rank_refusal

    limit = rank_limit(plan.policy.targets)
    if limit is None:
        return ""
    def over(m: ir.Model) -> list[ir.Node]:
        return [n for n in m.graph if n.op_type == "Transpose" and len(n.attributes.get_ints("perm", ()) or ()) > limit]

    done, left = len(over(before)) - len(over(after)), over(after)
    asked = [t for t in plan.policy.targets if rank_limit([t]) is not None]
    words = [f"{done} Transpose(s) above rank {limit} at the rank of their blocks; partitions "
             + ", ".join(_partition_change(t, a, b) for t, a, b in _before_after(asked, before, after))] if done else []
    return "; ".join(words + [f"left Transpose '{n.name}': {rank_refusal(n, limit)}" for n in left])


def _approximate_gelu(plan: Plan, model: ir.Model) -> ir.passes.PassBase | None:
    from portable.exporters.approximations import ApproximateGeluPass

    return ApproximateGeluPass() if plan.approximate_gelu else None


def _gelu_detail(plan: Plan, before: ir.Model, after: ir.Model) -> str:
    """How many exact GELUs became the tanh form, the partitions on the targets, and each Erf left."""
    from portable.exporters.approximations import MAX_GELU_GAP, erf_nodes

    done = len(erf_nodes(before)) - len(erf_nodes(after))
    words = []
    if done:
        words.append(f"{done} exact GELU(s) -> tanh form (not exact: up to {MAX_GELU_GAP:.2g} apart per element; the "
                     "proof says how far the outputs moved)")
        if plan.policy.targets:
            words[-1] += "; partitions " + ", ".join(_partition_change(t, a, b) for t, a, b in
                                                    _before_after(list(plan.policy.targets), before, after))
    words += [f"left Erf '{n.name}': not part of an exact GELU" for n in erf_nodes(after)]
    return "; ".join(words)


def _canonical_names(plan: Plan, model: ir.Model) -> ir.passes.PassBase | None:
    from portable.exporters.passes import CanonicalNamesPass

    return CanonicalNamesPass() if plan.canonical_names else None


# The remedies in the order they run; each is reported. Tests may add one (a proof failure injected).
REMEDIES: tuple[Remedy, ...] = (
    Remedy("internalize", _internalize, fatal=True),
    Remedy("inline-functions", _inline),
    Remedy("initializers-not-inputs", _initializers_not_inputs),
    Remedy("expand-newer-ops", _expand_newer),
    Remedy("prelu-slopes", _prelu),
    Remedy("default-attributes", _default_attributes),
    Remedy("opset", _opset),
    Remedy("negative-dims", _negative_dims),
    Remedy("dims", _dims),
    Remedy("batch", _batch),
    # after dims and batch, before fold-constants: what reads the dims folds on
    Remedy("static-dims", _static_dims, detail=_static_dims_detail),
    Remedy("fold-constants", _fold_constants),
    Remedy("constant-of-shape", _constant_of_shape),  # after fold-constants (which folds its Shape), before the probes
    Remedy("fold-batch-shapes", _probed("FoldBatchShapesPass")),
    Remedy("expand-batch-shapes", _expand_batch, detail=_expand_detail),  # after fold-batch-shapes: the sizes it could not write
    Remedy("approximate-gelu", _approximate_gelu, detail=_gelu_detail),  # opt-in (--approximate-gelu); not exact
    Remedy("pad-as-slices", _pads_as_slices, detail=_pads_detail),  # opt-in (pad_modes); before int32-indices
    Remedy("int32-indices", _int32_indices, detail=_int32_detail),  # opt-in (INT32_TARGETS); before remove-unused and canonical names
    Remedy("remove-unused", _unused),
    Remedy("static-shapes", _probed("StaticShapesPass")),
    Remedy("rank-limit", _rank_limit, detail=_rank_detail),  # opt-in (a target's max_rank); needs static-shapes' sizes
    Remedy("canonical-names", _canonical_names),
)


def op_counts(model: ir.Model) -> dict[str, int]:
    """Nodes by op type (``domain::Op`` outside the default domain), functions included."""
    seen: Counter[str] = Counter()
    graphs = [model.graph, *model.functions.values()]
    for graph in graphs:
        for node in graph.all_nodes() if isinstance(graph, ir.Graph) else graph:
            seen[node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"] += 1
    return dict(sorted(seen.items()))


def sort_nodes(model: ir.Model) -> RemedyReport:
    """The remedy ``topological-order``, in place, before any other (onnx-ir clones only a sorted graph): a
    graph whose nodes are not in topological order (legal input for a repair tool; onnx's checker refuses
    it) is sorted by onnx-ir's ``Graph.sort``, subgraphs too, and the report says so."""
    before = op_counts(model)
    order = [id(n) for n in model.graph.all_nodes()]
    model.graph.sort()
    if [id(n) for n in model.graph.all_nodes()] == order:
        return RemedyReport("topological-order", "unchanged", "", before, before)
    return RemedyReport("topological-order", "applied", "the nodes were not in topological order: sorted",
                        before, before)


def apply(remedy: Remedy, plan: Plan, model: ir.Model) -> tuple[ir.Model, RemedyReport]:
    """Run one remedy on a clone; the clone replaces the model only when the pass succeeded."""
    from portable.exporters.remedies import RemedyRefused

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
    detail = remedy.detail(plan, model, result.model) if remedy.detail is not None else ""
    return result.model, RemedyReport(remedy.name, "applied" if changed else "unchanged", detail, before,
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


def describe(plan: Plan, before: ir.Model, after: ir.Model, reports: list[RemedyReport]) -> list[RemedyReport]:
    """The reports with what each measurable remedy changed written into its detail."""
    from portable.exporters.remedies import external_bytes

    details = {
        "opset": f"{before.opset_imports.get('')} -> {after.opset_imports.get('')}",
        "internalize": f"{external_bytes(before):,} bytes read into the model",
        "dims": ", ".join(f"{k}={v}" for k, v in plan.dims.items()),
        "negative-dims": _negative_detail(before),
        "batch": _batch_detail(before, plan),
        "static-shapes": _outputs_detail(before, after),
    }
    return [replace(r, detail=r.detail or (details.get(r.name, "") if r.status == "applied" else ""))
            for r in reports]


def _outputs_detail(before: ir.Model, after: ir.Model) -> str:
    """Graph outputs whose shape the run wrote anew (dims that inference had lost, say)."""
    shapes = {v.name: v.shape for v in before.graph.outputs}
    changed = [f"output '{v.name}' {_shape(shapes[v.name])} -> {_shape(v.shape)}" for v in after.graph.outputs
               if v.name in shapes and _shape(shapes[v.name]) != _shape(v.shape)]
    return ", ".join(changed)


def _shape(shape: ir.Shape | None) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape is not None else "unknown"


def _batch_detail(model: ir.Model, plan: Plan) -> str:
    from portable.exporters.passes import BATCH
    from portable.exporters.remedies import batch_symbol, lone_unknown_batch

    symbol = batch_symbol(model)
    to = plan.batch if isinstance(plan.batch, int) else repr(BATCH)
    if symbol:
        return f"'{symbol}' -> {to}"
    lone = lone_unknown_batch(model)
    return f"input '{lone.name}' dim 0 (unnamed, the only input without a fixed one) -> {to}" if lone else ""


def _negative_detail(model: ir.Model) -> str:
    """The graph's inputs and outputs whose negative dims became unknown (intermediate values are not listed)."""
    io = [("input", v) for v in model.graph.inputs] + [("output", v) for v in model.graph.outputs]
    named = [f"{role} '{v.name}' {_shape(v.shape)}" for role, v in io
             if v.shape is not None and any(isinstance(d, int) and d < 0 for d in v.shape)]
    return "negative dims -> unknown in " + ", ".join(named) if named else "negative dims of intermediate values -> unknown"


def check_dims(plan: Plan, model: ir.Model) -> None:
    """``--dim`` names a symbol the graph's inputs or outputs have (a usage error otherwise)."""
    from portable.exporters.remedies import symbols

    unknown = sorted(set(plan.dims) - symbols(model))
    if unknown:
        known = ", ".join(sorted(symbols(model))) or "none"
        raise UsageError(f"--dim {', '.join(unknown)}: no such symbolic dim in the model's inputs or outputs "
                         f"(its symbols: {known})", path=str(plan.source))
