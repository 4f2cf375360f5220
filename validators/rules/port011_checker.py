"""PORT011 onnx-checker.

On a lean parse (see :mod:`portable.validators.lean`) the checker must not see a
stripped tensor as it is (no ``raw_data``: "should contain one and only one value
field"), nor get every weight back (that is the memory the lean parse saves). So a
stripped initializer that the checker would provably accept, and whose values ONNX shape
inference never reads, becomes a graph input of the same type and shape in the copy the
checker gets: :func:`_movable` proves both from ``checker.cc``'s ``check_tensor`` and
from the ops that call ``getInputData`` in ONNX's inference functions. Any other stripped
initializer is read back whole from the file. The verdict is the one the full model gets.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.graphs import iter_scopes
from portable.validators.rules.base import Rule
from portable.validators.rules.port010_self_contained import external_tensors

__all__ = ["OnnxChecker"]


class OnnxChecker(Rule):
    """``onnx.checker.check_model(model, full_check=True)`` passes.

    The checker's own message becomes the finding's message. It runs on the model in
    memory, so it never opens external-data files.

    *Why*: a model that breaks the ONNX spec (wrong attribute type, an input used
    before it is produced, duplicate names, a shape inference conflict) loads in no
    runtime, or loads differently in each.

    *Bad*: a node whose input is never produced; an attribute ``axis`` given as a string.

    *Fix*: regenerate the model with a current exporter; the message names what to fix.
    """

    id = "PORT011"
    name = "onnx-checker"
    severity = Severity.ERROR
    message = "onnx.checker: {error}"
    hint = "fix what the checker names; regenerate the model with a current exporter"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        try:
            onnx.checker.check_model(_checker_model(ctx), full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            yield self.finding(error=_first_lines(str(exc)))
        except ValueError as exc:  # e.g. a model over protobuf's 2 GiB limit
            yield self.finding(error=_first_lines(str(exc)))


# Bytes per element of the byte-aligned types (checker.cc's check_tensor table). Sub-byte
# and FLOAT6 types (padding rules), STRING and unknown types are never moved.
_T = onnx.TensorProto
_BYTES_PER_ELEMENT: dict[int, int] = {
    **dict.fromkeys((_T.UINT8, _T.INT8, _T.BOOL, _T.FLOAT8E4M3FN, _T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2,
                     _T.FLOAT8E5M2FNUZ, _T.FLOAT8E8M0), 1),
    **dict.fromkeys((_T.UINT16, _T.INT16, _T.FLOAT16, _T.BFLOAT16), 2),
    **dict.fromkeys((_T.FLOAT, _T.INT32, _T.UINT32), 4),
    **dict.fromkeys((_T.DOUBLE, _T.INT64, _T.UINT64, _T.COMPLEX64), 8),
    _T.COMPLEX128: 16,
}
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")
# Default-domain ops whose type and shape inference never calls getInputData (checked
# against onnx/defs/*.cc, onnx 1.23): values they consume are read for their type only.
_NO_DATA_READ = frozenset({
    "Add", "And", "Attention", "BatchNormalization", "Cast", "Conv", "ConvInteger", "ConvTranspose",
    "DequantizeLinear", "Div", "Einsum", "Equal", "GRU", "Gather", "GatherElements", "GatherND", "Gemm",
    "Greater", "GroupNormalization", "Identity", "InstanceNormalization", "LSTM", "LayerNormalization",
    "Less", "MatMul", "MatMulInteger", "Max", "Mean", "Min", "Mul", "Or", "PRelu", "Pow",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "RMSNormalization", "RNN", "Relu", "Sigmoid",
    "Sub", "Sum", "Tanh", "Transpose", "Where",
})


def _checker_model(ctx: ModelContext) -> onnx.ModelProto:
    """The model the checker gets. The checker stats external-data paths (relative to the
    working directory); we never let it: external initializers become graph inputs of the
    same type and shape in a copy (PORT010 reports them). Stripped initializers of a lean
    parse are moved the same way, or read back from the file (see the module docstring)."""
    external = {name for _, name, _ in external_tensors(ctx)}
    stripped = set(ctx.lean.stripped) if ctx.lean is not None else set()
    if not external and not stripped:
        return ctx.proto
    copy = onnx.ModelProto()
    copy.CopyFrom(ctx.proto)
    graph = copy.graph
    movable = _movable(ctx, external)
    for index in sorted(stripped - movable):
        assert ctx.lean is not None  # stripped tensors come from a lean parse
        graph.initializer[index].CopyFrom(ctx.lean.tensor(index))
    tensors = list(graph.initializer)
    gone = [i in movable or t.name in external for i, t in enumerate(tensors)]
    del graph.initializer[:]
    graph.initializer.extend(t for t, out in zip(tensors, gone) if not out)
    inputs = {v.name for v in graph.input}
    _drop_value_infos(graph, {tensors[i].name for i in movable})
    graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                       for t, out in zip(tensors, gone) if out and t.name not in inputs)
    _inline_other_external(copy)
    return copy


def _drop_value_infos(graph: onnx.GraphProto, names: set[str]) -> None:
    """The ``value_info`` of moved weights: each agreed with its tensor (:func:`_same_type`), and the
    graph input that replaces the tensor states the same type."""
    kept = [v for v in graph.value_info if v.name not in names]
    del graph.value_info[:]
    graph.value_info.extend(kept)


def _inline_other_external(model: onnx.ModelProto) -> None:
    """External tensors that are not main-graph initializers (``Constant`` attributes,
    subgraph or sparse initializers) get zero bytes of their size in place of the path, so
    the checker never stats it. PORT010 reports them; their values never matter here."""
    for scope in iter_scopes(model):
        body = scope.body
        tensors = []
        if isinstance(body, onnx.GraphProto):
            tensors += [*body.initializer, *(s.values for s in body.sparse_initializer)]
        for node in body.node:
            for attr in node.attribute:
                tensors += [attr.t] if attr.type == onnx.AttributeProto.TENSOR else list(attr.tensors)
        for tensor in tensors:
            if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
                del tensor.external_data[:]
                tensor.data_location = onnx.TensorProto.DEFAULT
                count = 1
                for d in tensor.dims:
                    count *= max(d, 0)
                tensor.raw_data = bytes(min(count * _BYTES_PER_ELEMENT.get(tensor.data_type, 1), 1 << 26))


def _movable(ctx: ModelContext, external: set[str]) -> set[int]:
    """Stripped main-graph initializers that check_tensor accepts and inference never reads."""
    if ctx.lean is None or ctx.proto.ir_version < 4:  # IR <= 3: initializers must be inputs
        return set()
    graph = ctx.proto.graph
    names = [t.name for t in graph.initializer] + [s.values.name for s in graph.sparse_initializer]
    taken = {v.name for v in (*graph.input, *graph.output)} | external | _data_read_names(ctx)
    infos = _value_infos(graph)
    lean = ctx.lean
    return {index for index in lean.stripped
            if _passes_check_tensor(graph.initializer[index], lean.payload_size(index))
            and names.count(graph.initializer[index].name) == 1
            and graph.initializer[index].name not in taken
            and _same_type(graph.initializer[index], infos.get(graph.initializer[index].name))}


def _value_infos(graph: onnx.GraphProto) -> dict[str, list[onnx.ValueInfoProto]]:
    infos: dict[str, list[onnx.ValueInfoProto]] = {}
    for value in graph.value_info:
        infos.setdefault(value.name, []).append(value)
    return infos


def _same_type(tensor: onnx.TensorProto, infos: list[onnx.ValueInfoProto] | None) -> bool:
    """No ``value_info`` for the tensor, or only ones that state its own type and dims (exporters
    write them for every initializer). The moved tensor's input then says the same thing; a
    ``value_info`` that disagrees keeps the tensor in place, so the checker still sees the clash."""
    own = onnx.helper.make_tensor_type_proto(tensor.data_type, list(tensor.dims))
    return all(info.type == own for info in infos or ())


def _passes_check_tensor(tensor: onnx.TensorProto, raw_length: int) -> bool:
    """checker.cc's check_tensor, for a tensor whose raw_data (of ``raw_length`` bytes) was
    stripped: True only when the full tensor certainly passes."""
    size = _BYTES_PER_ELEMENT.get(tensor.data_type) if tensor.HasField("data_type") else None
    if size is None or not tensor.HasField("name") or not tensor.name or raw_length == 0:
        return False
    if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
        return False
    if any(len(getattr(tensor, name)) for name in _TYPED_FIELDS) or any(d < 0 for d in tensor.dims):
        return False
    elements = 1
    for d in tensor.dims:
        elements *= d
    return 0 < elements * size < 2**63 and raw_length >= elements * size


def _data_read_names(ctx: ModelContext) -> set[str]:
    """Names consumed, in any graph, by a node whose inference may read input values."""
    names: set[str] = set()
    for _, _, node in ctx.nodes():
        if node.domain not in ("", "ai.onnx") or node.op_type not in _NO_DATA_READ:
            names.update(node.input)
    return names


def _first_lines(text: str, limit: int = 400) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    joined = " ".join(lines[:3])
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."
