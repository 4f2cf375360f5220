"""Static-shape analysis: fix the batch, infer, fold, and see what is left.

PORT007 and PORT009 need to know which shapes resolve statically. ONNX's own
inference renames the batch after a ``Reshape`` (``unk__0``) and gives up on some
attention values, so this module does not trust symbols. It fixes the batch to a
value, runs ``onnx.shape_inference.infer_shapes(data_prop=True)`` and onnxscript's
constant folder on a copy of the main graph, and reads what is left. It does so for
two batch values (2 and 3): a dim that is an integer in both is static (or a known
expression of the batch when the two differ), and a shape computation that folds to
a constant in both depends on nothing but the batch.

Large initializers never enter the copy: they become graph inputs of the same type
and shape, so neither inference nor folding reads their bytes (or any external file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import onnx

from portable.errors import one_line
from portable.validators.graphs import node_label

if TYPE_CHECKING:
    from portable.validators.context import ModelContext

__all__ = ["BATCH_VALUES", "SHAPE_INPUTS", "SMALL_TENSOR", "FixedBatch", "ShapeAnalysis", "linear_dim", "skeleton"]

BATCH_VALUES = (2, 3)
# Initializers above this many elements stay out of the analysis copy (same limit as
# onnxscript's folder input_size_limit, so nothing it could fold is lost).
SMALL_TENSOR = 8192

_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
# op type -> indices of inputs that decide an output shape
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3),
    "Resize": (1, 2, 3), "Upsample": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "OneHot": (1,), "CenterCropPad": (1,),
    "Col2Im": (1, 2), "MaxUnpool": (2,), **{op: (1,) for op in _REDUCE},
}

Dims = tuple[int | str | None, ...] | None  # None: rank unknown; a None dim: unknown dim


def linear_dim(values: tuple[int | None, ...], symbol: str = "batch") -> int | str | None:
    """A dim seen at :data:`BATCH_VALUES`: an int when equal, ``a*batch+c`` when it grows
    linearly with the batch, else None. Shared by PORT009 and the exporter's value shapes."""
    if any(not isinstance(v, int) for v in values):
        return None
    if len(set(values)) == 1:
        return values[0]
    (b0, b1), (d0, d1) = BATCH_VALUES, cast("tuple[int, int]", values)
    slope, rest = divmod(d1 - d0, b1 - b0)
    if rest or slope <= 0:
        return None
    const = d0 - slope * b0
    term = symbol if slope == 1 else f"{slope}*{symbol}"
    return term if const == 0 else f"{term}{'+' if const > 0 else '-'}{abs(const)}"


@dataclass(frozen=True)
class FixedBatch:
    """What inference and folding resolved with the batch fixed to ``batch``."""

    batch: int | None
    dims: dict[str, Dims] = field(default_factory=dict)
    folded: frozenset[tuple[str, int]] = frozenset()  # (node name, input index) now constant
    error: str | None = None


def _tensor_value_info(tensor: onnx.TensorProto) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))


def _is_small(tensor: onnx.TensorProto) -> bool:
    count = 1
    for d in tensor.dims:
        count *= d
    return count <= SMALL_TENSOR and tensor.data_location != onnx.TensorProto.EXTERNAL


def skeleton(proto: onnx.ModelProto, symbols: tuple[str, ...], batch: int | None) -> onnx.ModelProto:
    """A copy of the main graph without large payloads, value_info, or (optionally) the batch symbol."""
    graph = proto.graph
    out = onnx.ModelProto(ir_version=proto.ir_version)
    out.opset_import.extend(proto.opset_import)
    out.functions.extend(proto.functions)
    g = out.graph
    g.name = graph.name
    for index, node in enumerate(graph.node):
        copy = g.node.add()
        copy.CopyFrom(node)
        copy.name = node_label(node, index)
        del copy.metadata_props[:]
    g.input.extend(graph.input)
    g.output.extend(graph.output)
    inputs = {v.name for v in graph.input}
    for tensor in graph.initializer:
        if _is_small(tensor):
            g.initializer.append(tensor)
        elif tensor.name not in inputs:
            g.input.append(_tensor_value_info(tensor))
    if batch is not None:
        for value in (*g.input, *g.output):
            dims = value.type.tensor_type.shape.dim
            if len(dims) and dims[0].HasField("dim_param") and dims[0].dim_param in symbols:
                dims[0].dim_value = batch
    return out


def _dims_of(value: onnx.ValueInfoProto) -> Dims:
    if not value.type.HasField("tensor_type"):
        return None
    tt = value.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)


def _infer(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, Dims]]:
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    g = inferred.graph
    dims = {v.name: _dims_of(v) for v in (*g.input, *g.value_info, *g.output)}
    for tensor in g.initializer:
        dims[tensor.name] = tuple(tensor.dims)
    return inferred, dims


def _folded_inputs(model: onnx.ModelProto, wanted: set[tuple[str, int]]) -> frozenset[tuple[str, int]]:
    import onnx_ir as ir
    from onnxscript.optimizer import fold_constants

    ir_model = ir.serde.deserialize_model(model)
    fold_constants(ir_model, input_size_limit=SMALL_TENSOR)
    remaining = {node.name: node for node in ir_model.graph}
    found = set()
    for name, index in wanted:
        node = remaining.get(name)
        if node is None:  # the folder replaced the whole node by a constant
            found.add((name, index))
        elif index < len(node.inputs) and ((value := node.inputs[index]) is None or value.const_value is not None):
            found.add((name, index))
    return frozenset(found)


def run_fixed(ctx: ModelContext, batch: int | None, wanted: set[tuple[str, int]]) -> FixedBatch:
    try:
        inferred, dims = _infer(skeleton(ctx.proto, ctx.batch_symbols, batch))
        folded = _folded_inputs(inferred, wanted) if wanted else frozenset()
    except Exception as exc:  # noqa: BLE001 - a model ONNX cannot infer is a finding, not a crash
        return FixedBatch(batch=batch, error=one_line(exc, typed=False, limit=300))
    return FixedBatch(batch=batch, dims=dims, folded=folded)


@dataclass(frozen=True)
class ShapeAnalysis:
    """Runs at each fixed batch value (one run when the model's batch is already fixed)."""

    runs: tuple[FixedBatch, ...]
    candidates: tuple[tuple[int, str, int], ...]  # (node index, node name, input index) non-constant

    @property
    def dynamic(self) -> bool:
        return len(self.runs) > 1

    @property
    def error(self) -> str | None:
        return next((r.error for r in self.runs if r.error), None)

    @classmethod
    def of(cls, ctx: ModelContext) -> ShapeAnalysis:
        candidates = tuple(_candidates(ctx))
        wanted = {(name, i) for _, name, i in candidates}
        values: tuple[int | None, ...] = BATCH_VALUES if ctx.batch_symbols else (None,)
        return cls(runs=tuple(run_fixed(ctx, b, wanted) for b in values), candidates=candidates)

    def batch_only(self, name: str, index: int) -> bool:
        """Does this shape input fold to a constant once the batch is fixed (at every value)?"""
        return all((name, index) in run.folded for run in self.runs)


def _candidates(ctx: ModelContext):
    consts = ctx.constants
    for index, node in enumerate(ctx.proto.graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        for i in SHAPE_INPUTS.get(node.op_type, ()):
            if i < len(node.input) and node.input[i] and node.input[i] not in consts:
                yield index, node_label(node, index), i
