"""Post-export passes, in onnx-ir style: one transformation per pass, composed by :func:`portable_passes`.

Library passes do the generic work (onnxscript's optimizer folds constants and removes
dead code; onnx-ir's common passes inline functions, sort, and fix names). The
hand-written passes do what no library does: resolve shape computations that carry
only the batch (``Reshape``'s ``0``/``-1``), write static value shapes as integers or
expressions of ``batch``, and strip the exporting machine's paths from provenance.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir
from onnx_ir.passes import common

from portable.exporters.initializers import add_initializer
from portable.exporters.probe import Probe, ShapeProbe, linear_dim
from portable.exporters.provenance import relativize_trace
from portable.exporters.static_passes import ElementwiseReshapePass, FoldGatherElementsPass
from portable.validators.context import RANDOM_OPS
from portable.validators.shapes import SHAPE_INPUTS, library_logs_as_debug

__all__ = [
    "BATCH",
    "CanonicalNamesPass",
    "FoldBatchShapesPass",
    "FoldPass",
    "IdentityGatherPass",
    "NoOpPadPass",
    "OptimizePass",
    "RelativeSourcesPass",
    "RenameSymbolPass",
    "RuntimeFusionPass",
    "ShapeProbe",
    "StaticRewritePass",
    "StaticShapesPass",
    "StaticSimplifyPass",
    "portable_passes",
]

BATCH = "batch"
TRACE_KEY = "pkg.torch.onnx.stack_trace"


# Ops onnxscript's folder keeps on purpose (quantization info); ConstantOfShape is folded only
# when every consumer computes from constants alone (a mask built by ScatterND on zeros).
_KEEP = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})


class OptimizePass(ir.passes.InPlacePass):
    """onnxscript's optimizer: constant folding, dead-code removal, simple rewrites.

    A node whose inputs are all constants is folded whatever the size of those inputs
    (a gathered embedding row, a mask built from constants: they are weights then);
    the folder's own output-size limit still keeps a fold from growing the file.
    ``optimize_ir``'s passes are composed here (:func:`_optimizer`) to name its rules.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        with library_logs_as_debug():  # the folder's "Evaluation failed" warnings are not the user's
            _optimizer()(model)
        return ir.passes.PassResult(model, modified=True)


def _optimizer() -> ir.passes.Sequential:
    """The passes of ``onnxscript.optimizer.optimize_ir`` (0.7; functions are inlined before), with
    :func:`_optimizer_rules` for its default rule set."""
    from onnxscript.rewriter import RewritePass

    loop = ir.passes.PassManager([FoldPass(shape_inference=True), RewritePass(_optimizer_rules()),
                                  common.RemoveUnusedNodesPass(), common.RemoveUnusedFunctionsPass(),
                                  common.RemoveUnusedOpsetsPass()], steps=2, early_stop=True)
    return ir.passes.Sequential(
        loop, common.RemoveUnusedNodesPass(), common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common.LiftSubgraphInitializersToMainGraphPass(), common.DeduplicateInitializersPass(),
        common.CommonSubexpressionEliminationPass(), common.OutputFixPass(), common.NameFixPass())


def _optimizer_rules() -> list:
    """onnxscript's default rewrite rules, in its order, less ``slice_split_rule``: a two-output
    pattern, which its matcher tries by pairing each node with every node of the graph (quadratic:
    3.5 s of Swin-T's 5 s here), for a Split of two half Slices that no zoo model has. Its four
    no-op rules (``x * 1``, ``x + 0``, ``x - 0``, ``x / 1``) are portable's exact ones
    (:func:`~portable.exporters.rewrites.exact_no_op_rules`): onnxscript's drop ``x + 1e-12``."""
    from onnxscript.rewriter.rules import common as r

    from portable.exporters.rewrites import exact_no_op_rules

    return [
        *exact_no_op_rules(), r.dropout_zero_rule,
        r.dropout_inference_rule, r.two_reshapes_matmul_reshape_rule, r.one_reshape_matmul_reshape_rule,
        r.cast_constant_of_shape_rule, r.cast_constant_of_shape_without_value_rule, r.collapse_slice_rule,
        r.collapse_slice2_rule, r.materialize_reshape_shape_rule, r.min_min_rule, r.max_max_rule, r.min_max_rule,
        r.max_min_rule, r.successive_clip_relu_rule, r.successive_relu_clip_rule, r.successive_relu_rule,
        r.successive_clip_rule, r.cast_cast_rule, r.no_op_cast_rule, r.no_op_expand_rule, r.flatten_to_reshape_rule,
        r.reshape_reshape_rule, r.no_op_transpose_rule, r.transpose_transpose_rule, r.unsqueeze_unsqueeze_rule,
        r.squeeze_reshape_1d_rule, r.no_op_dynamic_scatter_nd_rule, r.no_op_static_scatter_nd_rule,
        r.normalize_pad_format_conv_rule, r.normalize_pad_format_conv_integer_rule, r.fuse_pad_into_conv_rule,
        r.fuse_pad_into_conv_integer_rule, r.fuse_batchnorm_into_conv_rule, r.fuse_batchnorm_into_conv_transpose_rule,
        r.fuse_batchnorm_into_gemm_rule, r.remove_optional_bias_from_conv_rule,
        r.remove_optional_bias_from_conv_transpose_rule, r.remove_optional_bias_from_qlinear_conv_rule,
        r.remove_optional_bias_from_gemm_rule,
    ]


def _fold_whole(node: ir.Node) -> bool | None:
    """The folder asks this only of nodes whose inputs are all constants: True folds it past
    the input-size limit, None leaves the folder's default rules."""
    if node.domain not in ("", "ai.onnx") or node.op_type in _KEEP:
        return None
    if node.op_type == "ConstantOfShape":
        uses = node.outputs[0].uses()
        memo: dict[ir.Value, bool] = {}
        return True if uses and all(_from_constants(u.node, memo) for u in uses) else None
    return True


def _from_constants(node: ir.Node, memo: dict[ir.Value, bool]) -> bool:
    """Does ``node`` compute from constants only (through deterministic default-domain nodes)?"""
    if node.domain not in ("", "ai.onnx") or node.op_type in RANDOM_OPS or node.op_type in _KEEP:
        return False
    return all(_value_from_constants(v, memo) for v in node.inputs)


def _value_from_constants(value: ir.Value | None, memo: dict[ir.Value, bool]) -> bool:
    if value is None or ir.convenience.get_const_tensor(value) is not None:
        return True
    producer = value.producer()
    if producer is None:
        return False
    if value not in memo:
        memo[value] = False  # guards against revisiting while deciding
        memo[value] = _from_constants(producer, memo)
    return memo[value]


class FoldPass(ir.passes.InPlacePass):
    """onnxscript's constant folder, with :func:`_fold_whole`. In :class:`OptimizePass` with ONNX shape
    inference; in :func:`StaticSimplifyPass` without (:class:`StaticShapesPass` wrote every shape), where
    a shape input the probed passes made a constant can make its consumers constant too."""

    def __init__(self, shape_inference: bool = False) -> None:
        super().__init__()
        self.shape_inference = shape_inference

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from onnxscript.optimizer import fold_constants

        with library_logs_as_debug():
            result = fold_constants(model, onnx_shape_inference=self.shape_inference, should_fold=_fold_whole)
        return ir.passes.PassResult(model, result.modified)


def _library_rules() -> list:
    """onnxscript's rules that static shapes let fire again, by name: the default set's others
    already ran in :class:`OptimizePass` (and its Slice-pair rule matches in time quadratic in the
    graph; its Cast-Cast rule rounds twice)."""
    from onnxscript.rewriter.rules import common as rules

    return [rules.reshape_reshape_rule, rules.transpose_transpose_rule, rules.no_op_transpose_rule,
            rules.no_op_expand_rule, rules.no_op_cast_rule, rules.collapse_slice_rule, rules.collapse_slice2_rule,
            rules.squeeze_reshape_1d_rule]


class StaticRewritePass(ir.passes.InPlacePass):
    """Rewrite what is a no-op or a chain once shapes are static: onnxscript's rules
    (:func:`_library_rules`) and portable's (:mod:`portable.exporters.rewrites`)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from onnxscript.rewriter import RewritePass

        from portable.exporters.attention_rewrites import attention_rules
        from portable.exporters.rewrites import portable_rules

        return RewritePass([*_library_rules(), *portable_rules(), *attention_rules()])(model)


class RuntimeFusionPass(ir.passes.InPlacePass):
    """The fusion rules of :mod:`portable.exporters.fusions`: a per-channel ``Mul`` after a ``Conv`` goes
    into its weights, as ONNX Runtime does at load (its outputs stay bit-identical); the exact GELU is
    written in the order ONNX Runtime's GeluFusion recognises (the same numbers, one kernel on ORT)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from onnxscript.rewriter import RewritePass

        from portable.exporters.fusions import runtime_fusion_rules

        return RewritePass(runtime_fusion_rules())(model)


class NoOpPadPass(ir.passes.InPlacePass):
    """Remove ``Pad`` nodes whose pads are all zero (Swin pads its windows by 0 when the image
    divides evenly). onnxscript's no-op rewrite rules (``Add`` 0, ``Mul`` 1, ...) have no ``Pad``."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        for node in list(graph):
            source = node.inputs[0] if node.inputs else None
            if source is not None and _zero_pad(node) and not node.outputs[0].is_graph_output():
                ir.convenience.replace_all_uses_with(node.outputs[0], source)
                graph.remove(node, safe=True)
                modified = True
        return ir.passes.PassResult(model, modified)


def _zero_pad(node: ir.Node) -> bool:
    if node.op_type != "Pad" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
        return False
    pads = ir.convenience.get_const_tensor(node.inputs[1]) if node.inputs[1] is not None else None
    return pads is not None and not pads.numpy().any()


class RenameSymbolPass(ir.passes.InPlacePass):
    """Rename torch's batch symbol (``s77``) to ``batch`` in every value shape, expressions included."""

    def __init__(self, old: str | None, new: str = BATCH) -> None:
        super().__init__()
        self.pattern = re.compile(rf"\b{re.escape(old)}\b") if old else None
        self.new = new

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for value in _all_values(model.graph) if self.pattern else ():
            if value.shape is None or not any(isinstance(d, ir.SymbolicDim) for d in value.shape):
                continue
            value.shape = ir.Shape([self._rename(d) for d in value.shape])
            modified = True
        return ir.passes.PassResult(model, modified)

    def _rename(self, dim: int | ir.SymbolicDim) -> int | str | None:
        if isinstance(dim, int) or dim.value is None:
            return dim if isinstance(dim, int) else None
        return self.pattern.sub(self.new, dim.value)  # type: ignore[union-attr]


class _ProbedPass(ir.passes.InPlacePass):
    """A pass that works from the model's probes, shared through ``probe`` with the other probed passes."""

    def __init__(self, probe: ShapeProbe) -> None:
        super().__init__()
        self.probe = probe

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, self.apply(model, self.probe.of(model)))

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        """Change ``model`` in place from ``found``; True when anything changed."""
        raise NotImplementedError


class FoldBatchShapesPass(_ProbedPass):
    """Replace runtime shape inputs by constants wherever the probes resolve them.

    With a static batch every resolved shape input becomes a constant. With a dynamic
    batch, an input that is the same at every probe batch becomes a constant, and a
    ``Reshape`` shape that differs only where the batch flows becomes a constant with
    ``0`` (copy the input dim) or ``-1`` (infer). What stays is computed from the batch
    and cannot be written statically (e.g. ``Expand`` of a token to the batch).
    """

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        modified = False
        for node in list(model.graph):
            for index in SHAPE_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ():
                value = node.inputs[index] if index < len(node.inputs) else None
                if value is None or value.const_value is not None:
                    continue
                shape = _resolved(node, index, found)
                if shape is not None:
                    _replace_input(model.graph, node, index, shape)
                    modified = True
        return modified


class IdentityGatherPass(_ProbedPass):
    """A ``Gather`` that reads a tensor back in its own order (torchlib's ``as_strided`` of a whole tensor,
    :mod:`portable.exporters.strided_views`) is replaced by that tensor; the index computation goes with it."""

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        from portable.exporters.strided_views import identity_gathers

        pairs = identity_gathers(model, found)
        for gather, x in pairs:
            ir.convenience.replace_all_uses_with(gather.outputs[0], x)
        return bool(pairs)


def _resolved(node: ir.Node, index: int, found: Sequence[Probe]) -> np.ndarray | None:
    if node.name is None:
        return None
    seen = [a for a in (p.values.get((node.name, index)) for p in found) if a is not None]
    if len(seen) != len(found):
        return None
    if all(np.array_equal(seen[0], s) for s in seen[1:]):
        return seen[0]
    source = node.inputs[0]
    if node.op_type != "Reshape" or index != 1 or source is None or source.name is None:
        return None
    data = [_ints(p.dims.get(source.name)) for p in found]
    outs = [_ints(p.dims.get(node.outputs[0].name or "")) for p in found]
    return _batch_reshape(seen, data, outs, _allowzero(node))


def _batch_reshape(seen: list[np.ndarray], data: list, outs: list, allowzero: bool) -> np.ndarray | None:
    """A constant Reshape shape valid at every probe: varying dims become 0 (copy) or one -1."""
    shape = []
    for i, dims in enumerate(zip(*(s.tolist() for s in seen))):
        copies = not allowzero and all(d is not None and i < len(d) and d[i] == v for d, v in zip(data, dims))
        shape.append(dims[0] if len(set(dims)) == 1 else 0 if copies else -1)
    candidate = np.array(shape, dtype=np.int64)
    ok = all(d is not None and o is not None and _reshaped(d, candidate) == tuple(o) for d, o in zip(data, outs))
    return candidate if ok else None


def _ints(dims: tuple | None) -> tuple[int, ...] | None:
    """The dims when every one is an integer, else None."""
    return dims if dims is not None and all(isinstance(d, int) for d in dims) else None


def _reshaped(data: tuple, shape: np.ndarray) -> tuple | None:
    """Reshape's output shape (allowzero=0), or None when it is invalid or unknown."""
    if any(d is None for d in data) or list(shape).count(-1) > 1:
        return None
    dims = [data[i] if s == 0 and i < len(data) else int(s) for i, s in enumerate(shape)]
    total, known = int(np.prod(data, dtype=np.int64)), int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if -1 in dims:
        if known == 0 or total % known:
            return None
        dims[dims.index(-1)] = total // known
    return tuple(dims)


def _allowzero(node: ir.Node) -> bool:
    attr = node.attributes.get("allowzero")
    return bool(attr.as_int()) if attr is not None else False


def _replace_input(graph: ir.Graph, node: ir.Node, index: int, array: np.ndarray) -> None:
    node.replace_input_with(index, add_initializer(graph, f"{node.name}_shape{index}", np.asarray(array, dtype=np.int64)))


class StaticShapesPass(_ProbedPass):
    """Write every intermediate value's shape: integers, or linear expressions of ``batch``."""

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        modified = False
        batches = tuple(p.batch for p in found)
        for node in model.graph:
            for value in node.outputs:
                dims = _static_dims([p.dims.get(value.name or "") for p in found], batches)
                if dims is not None:
                    value.shape = ir.Shape(dims)
                    modified = True
        return modified


def _static_dims(seen: list, batches: tuple[int | None, ...]) -> list[int | str] | None:
    """One shape for every probe (ints, or expressions of the batch), or None."""
    if any(s is None for s in seen) or len({len(s) for s in seen}) != 1:
        return None
    if len(seen) == 1:
        return list(seen[0]) if _ints(seen[0]) is not None else None
    dims = [linear_dim(tuple(s[i] for s in seen), BATCH, batches) for i in range(len(seen[0]))]
    static = [d for d in dims if d is not None]
    return static if len(static) == len(dims) else None


class RelativeSourcesPass(ir.passes.InPlacePass):
    """Make every node's recorded stack trace relative to the project root (no machine paths)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in model.graph.all_nodes():
            trace = node.metadata_props.get(TRACE_KEY)
            if trace:
                node.metadata_props[TRACE_KEY] = relativize_trace(trace, self.root)
                modified = True
        return ir.passes.PassResult(model, modified)


class _ClearNamesPass(ir.passes.InPlacePass):
    """Forget node names and intermediate value names (inputs, outputs, initializers keep theirs)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        keep = {*graph.inputs, *graph.outputs, *graph.initializers.values()}
        for node in graph:
            node.name = None
            for value in node.outputs:
                if value not in keep:
                    value.name = None
        return ir.passes.PassResult(model, modified=True)


class _OpNames(common.naming.SimpleNameGenerator):
    """``Conv``, ``Conv_1``...; values after their producer: ``conv``, ``conv_1``..."""

    def generate_node_name(self, node: ir.Node) -> str:
        return node.op_type

    def generate_value_name(self, value: ir.Value) -> str:
        producer = value.producer()
        return producer.op_type.lower() if producer is not None else "value"


def CanonicalNamesPass() -> ir.passes.Sequential:  # noqa: N802 - a pass factory reads as a pass
    """Sort topologically, then name nodes and values from their op types, in graph order."""
    return ir.passes.Sequential(common.TopologicalSortPass(), _ClearNamesPass(), common.NameFixPass(_OpNames()))


def StaticSimplifyPass() -> ir.passes.Sequential:  # noqa: N802 - a pass factory reads as a pass
    """The second round, once shapes are static: fold, rewrite, collapse, until nothing changes (at
    most three times); then the rules' new constants become initializers, as after :class:`OptimizePass`."""
    round_ = ir.passes.PassManager([FoldPass(), FoldGatherElementsPass(), StaticRewritePass(), ElementwiseReshapePass(),
                                    common.IdentityEliminationPass(), common.RemoveUnusedNodesPass()],
                                   steps=3, early_stop=True)
    return ir.passes.Sequential(round_, common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0))


def _all_values(graph: ir.Graph):
    yield from graph.inputs
    for node in graph.all_nodes():
        yield from node.outputs


def portable_passes(symbol: str | None, root: Path) -> ir.passes.PassManager:
    """Everything between torch's ONNX graph and the file (``symbol``: torch's batch symbol)."""
    from portable.exporters.fusions import MergeSharedMatMulsPass, MergeSplitBiasesPass

    probe = ShapeProbe(BATCH if symbol else None)  # one analysis, read by both probed passes
    return ir.passes.PassManager([
        common.InlinePass(),
        RenameSymbolPass(symbol),
        common.NameFixPass(),
        OptimizePass(),
        NoOpPadPass(),
        FoldBatchShapesPass(probe),
        IdentityGatherPass(probe),  # the same probes: it only reads them and redirects uses
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedFunctionsPass(),
        common.RemoveUnusedOpsetsPass(),
        StaticShapesPass(probe),
        StaticSimplifyPass(),
        RuntimeFusionPass(),
        MergeSharedMatMulsPass(),
        MergeSplitBiasesPass(),
        common.RemoveUnusedNodesPass(),  # the weights the fusions replaced
        RelativeSourcesPass(root),
        CanonicalNamesPass(),
    ])
