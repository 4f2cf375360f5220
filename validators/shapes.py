"""Static-shape analysis: fix the batch, infer and fold to a fixed point, and see what is left.

One implementation serves the exporter (``portable.exporters.probe``: which shape inputs
to fold, which value shapes to write) and the validators (PORT007, PORT009 through
``ctx.shapes``). ONNX's own inference renames the batch after a ``Reshape`` (``unk__0``)
and cannot size a ``Range`` whose limit is computed, so this module does not trust
symbols. On a copy of the main graph it fixes the batch to a value and repeats
{``onnx.shape_inference.infer_shapes(data_prop=True)``, onnxscript's constant folder}
until nothing changes (at most :data:`MAX_ROUNDS` rounds: a chain such as two
``Resize`` in a row, each sized from the other's shape, needs one round per link).

It does so at each of :data:`BATCH_VALUES` (1, 2 and 3). A dim that is an integer at
every value is static (or a linear expression of the batch when they differ), and a
shape computation that folds to a constant at every value depends on nothing but the
batch. Batch 1 is probed because it is where broadcasting and ``Squeeze`` change
ranks; 2 and 3 tell a batch dim from a literal 1.

Large initializers never enter the copy: they become graph inputs of the same type
and shape, so neither inference nor folding reads their bytes (or any external file).
Library log output (the folder's "Evaluation failed" warnings) is re-logged at DEBUG
on this module's logger, never printed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import onnx

from portable.errors import one_line
from portable.validators.graphs import node_label
from portable.validators.limits import SMALL_TENSOR  # the analysis copy's limit

if TYPE_CHECKING:
    import onnx_ir as ir

    from portable.validators.context import ModelContext

__all__ = [
    "BATCH_VALUES",
    "MAX_ROUNDS",
    "SHAPE_INPUTS",
    "SMALL_TENSOR",
    "FixedBatch",
    "ShapeAnalysis",
    "analyse",
    "library_logs_as_debug",
    "linear_dim",
    "skeleton",
]

_log = logging.getLogger(__name__)

BATCH_VALUES = (1, 2, 3)
MAX_ROUNDS = 4
# Constant node inputs up to this size are kept for the exporter (shapes, axes, sizes).
SMALL_VALUE = 64

_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
# op type -> indices of inputs whose values decide an output shape
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3),
    "Resize": (1, 2, 3), "Upsample": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "OneHot": (1,), "CenterCropPad": (1,),
    "Col2Im": (1, 2), "MaxUnpool": (2,), "STFT": (1, 3), "DFT": (1, 2), "AffineGrid": (1,),
    **{op: (1,) for op in _REDUCE},
}

Dims = tuple[int | str | None, ...] | None  # None: rank unknown; a str or None dim: not static


def linear_dim(values: tuple[int | str | None, ...], symbol: str = "batch",
               batches: tuple[int | None, ...] = BATCH_VALUES) -> int | str | None:
    """A dim seen at ``batches``: an int when equal, ``a*batch+c`` when linear through every
    point with a > 0, else None. Shared by PORT009 and the exporter's value shapes."""
    ints = tuple(v for v in values if isinstance(v, int))
    points = tuple(b for b in batches if isinstance(b, int))
    if len(ints) != len(values) or len(ints) != len(batches):
        return None
    if len(set(ints)) == 1:
        return ints[0]
    if len(points) != len(batches):  # a varying dim needs the batch values it was seen at
        return None
    slope, rest = divmod(ints[1] - ints[0], points[1] - points[0])
    const = ints[0] - slope * points[0]
    if rest or slope <= 0 or any(d != slope * b + const for b, d in zip(points, ints)):
        return None
    term = symbol if slope == 1 else f"{slope}*{symbol}"
    return term if const == 0 else f"{term}{'+' if const > 0 else '-'}{abs(const)}"


@dataclass(frozen=True)
class FixedBatch:
    """What inference and folding resolved with the batch fixed to ``batch`` (None: as declared)."""

    batch: int | None
    dims: Mapping[str, Dims] = field(default_factory=dict)
    remaining: frozenset[str] = frozenset()  # nodes the folder left (by label)
    constant: frozenset[tuple[str, int]] = frozenset()  # (node, input) constant on a node left
    values: Mapping[tuple[str, int], np.ndarray] = field(default_factory=dict)  # small constant inputs
    rounds: int = 0
    error: str | None = None

    def is_constant(self, node: str, index: int) -> bool:
        """Is this input of an original node a constant here (or was the whole node folded)?"""
        return self.error is None and (node not in self.remaining or (node, index) in self.constant)


# -- the copy the analysis works on ------------------------------------------------------


def _tensor_value_info(tensor: onnx.TensorProto) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))


def _is_small(tensor: onnx.TensorProto) -> bool:
    return int(np.prod(tensor.dims, dtype=np.int64)) <= SMALL_TENSOR and tensor.data_location != onnx.TensorProto.EXTERNAL


def _untyped_shape(value: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    """The output with its element type only: its shape is what inference finds, not what is declared."""
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    if copy.type.HasField("tensor_type"):
        copy.type.tensor_type.ClearField("shape")
    return copy


def _external_constant(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor of a ``Constant`` whose value lies in an external file, else None."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or not node.output:
        return None
    return next((a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR
                 and a.t.data_location == onnx.TensorProto.EXTERNAL), None)


def skeleton(proto: onnx.ModelProto, symbols: tuple[str, ...], batch: int | None) -> onnx.ModelProto:
    """A copy of the main graph without large payloads, value_info, declared output shapes,
    node metadata, and (when ``batch`` is given) with the batch symbol fixed to it.
    Initializers the caller may override (listed as inputs, IR >= 4) are inputs only."""
    graph = proto.graph
    out = onnx.ModelProto(ir_version=proto.ir_version)
    out.opset_import.extend(proto.opset_import)
    out.functions.extend(proto.functions)
    g = out.graph
    g.name = graph.name
    for index, node in enumerate(graph.node):
        external = _external_constant(node)
        if external is not None:  # its bytes are never read: its output is an input of the copy
            g.input.append(onnx.helper.make_tensor_value_info(node.output[0], external.data_type, list(external.dims)))
            continue
        copy = g.node.add()
        copy.CopyFrom(node)
        copy.name = node_label(node, index)
        del copy.metadata_props[:]
    g.input.extend(graph.input)
    g.output.extend(_untyped_shape(v) for v in graph.output)
    inputs = {v.name for v in graph.input}
    overridable = proto.ir_version >= 4  # from IR 4 an initializer listed as an input is only a default
    for tensor in graph.initializer:
        if tensor.name in inputs and overridable:
            continue
        if _is_small(tensor):
            g.initializer.append(tensor)
        elif tensor.name not in inputs:
            g.input.append(_tensor_value_info(tensor))
    if batch is not None:
        for value in g.input:
            dims = value.type.tensor_type.shape.dim
            if len(dims) and dims[0].HasField("dim_param") and dims[0].dim_param in symbols:
                dims[0].dim_value = batch
    _with_bodies(out)
    return out


BODY_DOMAIN = "portable.body"  # the copy's local functions: ops onnx defines by a body but does not infer


def _uninferred(model: onnx.ModelProto, node: onnx.NodeProto) -> onnx.defs.OpSchema | None:
    """The schema of a default-domain op that onnx defines by a function body but gives no shape
    inference (``GroupNormalization``-21: its output stayed "unknown rank", a false PORT009)."""
    if node.domain not in ("", "ai.onnx"):
        return None
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    try:
        schema = onnx.defs.get_schema(node.op_type, version or 1, "")
    except onnx.defs.SchemaError:
        return None
    bodied = schema.has_function or schema.has_context_dependent_function  # type: ignore[attr-defined]  # no stubs
    if schema.has_type_and_shape_inference_function or not bodied:
        return None
    return schema


def _with_bodies(model: onnx.ModelProto) -> None:
    """Each op :func:`_uninferred` finds becomes a call of a model-local function holding its schema's
    body (built for the node's attributes and input types): onnx's inference infers through local
    functions, so its outputs get the shapes the body computes. The node keeps its name and outputs."""
    found = [(n, s) for n in model.graph.node if (s := _uninferred(model, n)) is not None]
    if not found:
        return
    types = _value_types(model)
    for index, (node, schema) in enumerate(found):
        body = _body(node, schema, types)
        if body is None:
            continue
        body.name, body.domain = f"{node.op_type}_{index}", BODY_DOMAIN
        model.functions.append(body)
        node.op_type, node.domain = body.name, BODY_DOMAIN
        del node.attribute[:]
    if any(f.domain == BODY_DOMAIN for f in model.functions):
        model.opset_import.append(onnx.helper.make_opsetid(BODY_DOMAIN, 1))


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - then the declared inputs' and initializers' types only
        inferred = model
    g = inferred.graph
    types = {v.name: v.type for v in [*g.input, *g.value_info, *g.output]}
    types.update({t.name: onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    return types


def _body(node: onnx.NodeProto, schema: onnx.defs.OpSchema, types: Mapping[str, onnx.TypeProto]) -> onnx.FunctionProto | None:
    function = onnx.FunctionProto()
    if schema.has_function:  # type: ignore[attr-defined]  # onnx's stubs lack the function attributes
        function.CopyFrom(schema.function_body)
        return function
    if any(i and i not in types for i in node.input):
        return None
    try:
        raw = schema.get_context_dependent_function(node.SerializeToString(),  # type: ignore[attr-defined]
                                                    [types[i].SerializeToString() for i in node.input if i])
    except Exception:  # noqa: BLE001 - a body onnx cannot build for these attributes or types
        return None
    function.ParseFromString(raw)
    return function


# -- infer and fold to a fixed point ------------------------------------------------------


class _ToDebug(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        _log.debug("%s: %s", record.name, record.getMessage())


@contextlib.contextmanager
def library_logs_as_debug(names: tuple[str, ...] = ("onnxscript", "onnx_ir")) -> Iterator[None]:
    """Re-log the libraries' records (e.g. the folder's ``Evaluation failed: ...`` warnings)
    at DEBUG on this module's logger instead of letting Python print them to stderr."""
    loggers = [logging.getLogger(name) for name in names]
    saved = [(lg.handlers[:], lg.propagate) for lg in loggers]
    handler = _ToDebug()
    for lg in loggers:
        lg.handlers, lg.propagate = [handler], False
    try:
        yield
    finally:
        for lg, (handlers, propagate) in zip(loggers, saved):
            lg.handlers, lg.propagate = handlers, propagate


def _known(dims: Dims) -> int:
    """How much of a shape is known: -1 for an unknown rank, else the count of integer dims."""
    return -1 if dims is None else sum(isinstance(d, int) for d in dims)


def _merge(into: dict[str, Dims], found: Mapping[str, Dims]) -> None:
    for name, dims in found.items():
        if name not in into or _known(dims) >= _known(into[name]):
            into[name] = dims


def _proto_dims(value: onnx.ValueInfoProto) -> Dims:
    tt = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not tt.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)


def _inferred_dims(model: onnx.ModelProto) -> dict[str, Dims]:
    g = model.graph
    return {v.name: _proto_dims(v) for v in (*g.input, *g.value_info, *g.output)}


def _ir_dims(model: ir.Model) -> dict[str, Dims]:
    graph = model.graph
    values = [*graph.inputs, *graph.initializers.values(), *(v for n in graph for v in n.outputs)]
    return {v.name: None if v.shape is None else tuple(d if isinstance(d, int) else (d.value or None) for d in v.shape)
            for v in values if v.name}


def _fold(model: ir.Model, dims: dict[str, Dims]) -> bool:
    """onnxscript's constant folder, recording the shape of every value it folds.

    The public ``fold_constants`` drops a folded value once its users are folded too (a
    batch-sized ``Range`` feeding a mask), and with it the value's shape, which PORT009
    and the exporter need: a subclass of its pass records each folded array's shape.
    """
    from onnxscript.optimizer import _constant_folding as folding

    class _Recording(folding.FoldConstantsPass):
        def new_initializer(self, node: ir.Node, array: object) -> ir.Value | None:
            if isinstance(array, np.ndarray) and node.outputs[0].name:
                dims[node.outputs[0].name] = tuple(int(d) for d in array.shape)
            return super().new_initializer(node, array)

    folder = _Recording(shape_inference=False, input_size_limit=SMALL_TENSOR,
                        output_size_limit=folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT)
    with library_logs_as_debug():
        return folder(model).modified


def _round(model: onnx.ModelProto, dims: dict[str, Dims]) -> tuple[ir.Model, bool]:
    """One inference and one folding, their dims merged into ``dims``; True when folding changed the graph."""
    import onnx_ir as ir

    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    _merge(dims, _inferred_dims(inferred))
    folded = ir.serde.deserialize_model(inferred)
    found: dict[str, Dims] = {}
    changed = _fold(folded, found)
    _merge(dims, {**_ir_dims(folded), **found})
    return folded, changed


def _resolve(model: onnx.ModelProto) -> tuple[ir.Model, dict[str, Dims], int]:
    """Infer and fold until the folder changes nothing (or :data:`MAX_ROUNDS`)."""
    import onnx_ir as ir

    dims: dict[str, Dims] = {}
    rounds = 1
    folded, changed = _round(model, dims)
    while changed and rounds < MAX_ROUNDS:
        model = ir.serde.serialize_model(folded)
        del model.graph.value_info[:]  # infer afresh: a stale symbol would win over a now-known dim
        folded, changed = _round(model, dims)
        rounds += 1
    return folded, dims, rounds


def _constants(model: ir.Model) -> tuple[frozenset[tuple[str, int]], dict[tuple[str, int], np.ndarray]]:
    """Which node inputs are constant, and the values of the small ones (the copy holds no
    external tensor: :func:`skeleton` turned them into inputs)."""
    constant: set[tuple[str, int]] = set()
    values: dict[tuple[str, int], np.ndarray] = {}
    for node in model.graph:
        if not node.name:
            continue
        for i, value in enumerate(node.inputs):
            tensor = value.const_value if value is not None else None
            if value is None or tensor is not None:
                constant.add((node.name, i))
            # an UNDEFINED element type has no value to read (PORT011 reports the tensor): constant, no value
            if tensor is not None and tensor.size <= SMALL_VALUE and tensor.dtype != onnx.TensorProto.UNDEFINED:
                values[(node.name, i)] = tensor.numpy()
    return frozenset(constant), values


def _static_by_inference(model: onnx.ModelProto, batch: int | None) -> FixedBatch | None:
    """The analysis without folding, when ONNX inference alone leaves nothing to resolve: every
    node output has static dims and every shape input is an initializer or a ``Constant``'s
    output. Most CNN files are such; they then never load onnx-ir and onnxscript (start-up)."""
    graph = model.graph
    given = {t.name for t in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    for node in graph.node:
        shape_inputs = SHAPE_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ()
        if any(i < len(node.input) and node.input[i] and node.input[i] not in given for i in shape_inputs):
            return None
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    dims: dict[str, Dims] = {**_inferred_dims(inferred), **{t.name: tuple(t.dims) for t in graph.initializer}}
    outputs = [o for n in graph.node for o in n.output if o]
    if not all(dims.get(o) is not None and all(isinstance(d, int) for d in dims[o] or ()) for o in outputs):
        return None
    constant = frozenset((n.name, i) for n in graph.node for i, name in enumerate(n.input) if not name or name in given)
    return FixedBatch(batch, dims, frozenset(n.name for n in graph.node), constant, {}, 1)


def fix_batch(proto: onnx.ModelProto, symbols: tuple[str, ...], batch: int | None) -> FixedBatch:
    """The analysis at one batch value; a model ONNX cannot infer gives ``error``, not an exception."""
    try:
        copy = skeleton(proto, symbols, batch)
        quick = _static_by_inference(copy, batch)
        if quick is not None:
            return quick
        folded, dims, rounds = _resolve(copy)
    except Exception as exc:  # noqa: BLE001 - a model ONNX cannot infer is a finding, not a crash
        return FixedBatch(batch=batch, error=one_line(exc, typed=False, limit=300))
    constant, values = _constants(folded)
    remaining = frozenset(n.name for n in folded.graph if n.name)
    return FixedBatch(batch, dims, remaining, constant, values, rounds)


def analyse(proto: onnx.ModelProto, symbols: tuple[str, ...]) -> tuple[FixedBatch, ...]:
    """One :class:`FixedBatch` per batch value (one run, as declared, when there is no batch symbol)."""
    batches: tuple[int | None, ...] = BATCH_VALUES if symbols else (None,)
    return tuple(fix_batch(proto, symbols, b) for b in batches)


# -- what the rules read ------------------------------------------------------------------


@dataclass(frozen=True)
class ShapeAnalysis:
    """The runs at each fixed batch value, and the shape inputs that are not constants."""

    runs: tuple[FixedBatch, ...]
    candidates: tuple[tuple[int, str, int], ...]  # (node index, node label, input index) non-constant

    @property
    def dynamic(self) -> bool:
        return len(self.runs) > 1

    @property
    def error(self) -> str | None:
        """The first run's failure, saying at which batch value when the batch was fixed."""
        for run in self.runs:
            if run.error:
                return run.error if run.batch is None else f"{run.error} (batch fixed to {run.batch})"
        return None

    @classmethod
    def of(cls, ctx: ModelContext) -> ShapeAnalysis:
        return cls(runs=analyse(ctx.proto, ctx.batch_symbols), candidates=tuple(_candidates(ctx)))

    def batch_only(self, name: str, index: int) -> bool:
        """Does this shape input fold to a constant once the batch is fixed (at every value)?"""
        return all(run.is_constant(name, index) for run in self.runs)

    def dims(self, value: str) -> list[Dims]:
        """The value's dims at each run (None where unknown)."""
        return [run.dims.get(value) for run in self.runs]


def _candidates(ctx: ModelContext) -> Iterator[tuple[int, str, int]]:
    consts = ctx.constants
    for index, node in enumerate(ctx.proto.graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        for i in SHAPE_INPUTS.get(node.op_type, ()):
            if i < len(node.input) and node.input[i] and node.input[i] not in consts:
                yield index, node_label(node, index), i
