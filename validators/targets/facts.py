"""What the target check needs to know about a model, computed once for every target: each main-graph
node's op version at the model's opset, the element type and dims of every value, and who feeds whom.

Types and dims come from the file's own ``value_info`` (portable's exports carry it for every value);
when a node output has none, ONNX shape inference runs once on the analysis skeleton
(:func:`portable.validators.shapes.skeleton`: no weight payloads).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import onnx

from portable.policy import dtype_name
from portable.validators.graphs import node_label

__all__ = ["ModelFacts", "formal_types", "function_body", "since_version"]

Dims = tuple[int | str | None, ...] | None


@functools.cache
def _schema(domain: str, op_type: str, opset: int) -> tuple[int, tuple[str, ...], tuple[str, ...]] | None:
    """The op's schema at ``opset``: its since_version and the type string (constraint name such as
    ``T``, or ``tensor(int64)``) of each formal input and output; None without a schema."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    return int(schema.since_version), tuple(p.type_str for p in schema.inputs), tuple(p.type_str for p in schema.outputs)


@functools.cache
def function_body(domain: str, op_type: str, opset: int) -> tuple[str, ...] | None:
    """The op types of the op's ONNX function body at ``opset`` (``("*",)`` for a context-dependent
    one, whose body depends on the node), or None when the op has no function body."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    # getattr: onnx's type stubs lack these two properties of OpSchema (present at run time)
    if getattr(schema, "has_function", False):
        return tuple(dict.fromkeys(n.op_type for n in schema.function_body.node if n.op_type != "Constant"))
    return ("*",) if getattr(schema, "has_context_dependent_function", False) else None


def since_version(domain: str, op_type: str, opset: int) -> int | None:
    """The version of ``op_type`` a model at ``opset`` uses, or None when ONNX has no schema for it."""
    found = _schema(domain, op_type, opset)
    return None if found is None else found[0]


def formal_types(domain: str, op_type: str, opset: int) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The type strings of the op's formal inputs and outputs; None without a schema."""
    found = _schema(domain, op_type, opset)
    return None if found is None else found[1:]


def _value_types(value: onnx.ValueInfoProto) -> tuple[int, Dims]:
    tt = value.type.tensor_type
    if not value.type.HasField("tensor_type"):
        return onnx.TensorProto.UNDEFINED, None
    dims = None if not tt.HasField("shape") else tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return tt.elem_type, dims


def _batch_linear(symbols: Sequence[str]) -> re.Pattern[str] | None:
    """``batch``, ``2*batch``, ``batch+1``...: the dims the exporter writes that fixing the batch fixes."""
    if not symbols:
        return None
    names = "|".join(re.escape(s) for s in symbols)
    return re.compile(rf"^(\d+\*)?({names})([+-]\d+)?$")


@dataclass(frozen=True, eq=False)
class ModelFacts:
    """The main graph's nodes and their values, as every target sees them."""

    nodes: tuple[onnx.NodeProto, ...]
    labels: tuple[str, ...]
    opsets: dict[str, int]
    types: dict[str, int]  # value -> ONNX element type
    dims: dict[str, Dims]
    initializers: frozenset[str]
    producers: tuple[frozenset[int], ...]  # node -> the nodes whose outputs it reads
    consumers: tuple[frozenset[int], ...]
    batch: re.Pattern[str] | None  # the dim_params a fixed batch makes integers
    graph_outputs: frozenset[str] = frozenset()

    @classmethod
    def of(cls, proto: onnx.ModelProto, batch_symbols: Sequence[str]) -> ModelFacts:
        graph = proto.graph
        nodes = tuple(graph.node)
        types, dims = _declared(graph)
        if any(o and o not in types for n in nodes for o in n.output):
            _inferred(proto, batch_symbols, types, dims)
        producers, consumers = _edges(nodes)
        return cls(nodes=nodes, labels=tuple(node_label(n, i) for i, n in enumerate(nodes)),
                   opsets={e.domain or "ai.onnx": e.version for e in proto.opset_import}, types=types, dims=dims,
                   initializers=frozenset(t.name for t in graph.initializer), producers=producers, consumers=consumers,
                   batch=_batch_linear(batch_symbols), graph_outputs=frozenset(v.name for v in graph.output))

    @functools.cached_property
    def signatures(self) -> tuple[tuple[object, ...], ...]:
        """Per node, what a verdict depends on: domain, op, version, the element types of its inputs and
        outputs and its kind (a QDQ unit's member or not; equal signatures get equal verdicts; the detail names
        the first value, so the value names are part of it only through their types)."""
        return tuple((n.domain, n.op_type, self.since(i), tuple(self.types.get(v, 0) for v in n.input),
                      tuple(self.types.get(v, 0) for v in n.output), len(n.input), self.kind(i))
                     for i, n in enumerate(self.nodes))

    def opset(self, domain: str) -> int | None:
        return self.opsets.get(domain or "ai.onnx")

    def since(self, index: int) -> int | None:
        node = self.nodes[index]
        opset = self.opset(node.domain)
        return None if opset is None else since_version(node.domain, node.op_type, opset)

    def kind(self, index: int) -> str:
        """What a backend that answers per kind of node judges (QNN's HTP): ``quantized`` for a node of a QDQ
        unit (an input dequantized by a DequantizeLinear, every output quantized by a QuantizeLinear), else
        the element type of its input 0 (``float32``...)."""
        node = self.nodes[index]
        made_by = {self.nodes[j].output[0]: self.nodes[j].op_type for j in self.producers[index] if self.nodes[j].output}
        outputs = {o for o in node.output if o}
        takers = [self.nodes[j] for j in self.consumers[index]]
        if any(made_by.get(i) == "DequantizeLinear" for i in node.input) and takers \
                and all(t.op_type == "QuantizeLinear" for t in takers) and not outputs & self.graph_outputs:
            return "quantized"
        return dtype_name(self.types.get(node.input[0], 0)) if node.input and node.input[0] else "none"

    def fixed(self, value: str, batch_fixed: bool) -> bool:
        """Does the value have a fixed size (every dim a positive integer; with ``batch_fixed``, a
        batch dim counts as fixed)? Initializers do; a value without dims does not, as in ORT's
        ``usability_checker._is_fixed_shape_value``."""
        if value in self.initializers and value not in self.dims:
            return True
        dims = self.dims.get(value)
        if dims is None:
            return False
        return all((isinstance(d, int) and d > 0) or (batch_fixed and self._batchy(d)) for d in dims)

    def _batchy(self, dim: int | str | None) -> bool:
        return isinstance(dim, str) and self.batch is not None and self.batch.match(dim) is not None


def _declared(graph: onnx.GraphProto) -> tuple[dict[str, int], dict[str, Dims]]:
    types: dict[str, int] = {}
    dims: dict[str, Dims] = {}
    for tensor in graph.initializer:
        types[tensor.name], dims[tensor.name] = tensor.data_type, tuple(tensor.dims)
    for value in (*graph.input, *graph.output, *graph.value_info):
        elem, shape = _value_types(value)
        if elem != onnx.TensorProto.UNDEFINED:
            types[value.name], dims[value.name] = elem, shape
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            tensor = next((a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR), None)
            if tensor is not None and node.output[0] not in types:
                types[node.output[0]], dims[node.output[0]] = tensor.data_type, tuple(tensor.dims)
    return types, dims


def _inferred(proto: onnx.ModelProto, symbols: Sequence[str], types: dict[str, int], dims: dict[str, Dims]) -> None:
    """Fill in what the file does not declare with ONNX shape inference on the payload-free skeleton."""
    from portable.validators.shapes import skeleton

    try:
        inferred = onnx.shape_inference.infer_shapes(skeleton(proto, tuple(symbols), None))
    except Exception:  # noqa: BLE001 - a model ONNX cannot infer keeps what it declares
        return
    for value in inferred.graph.value_info:
        elem, shape = _value_types(value)
        if elem != onnx.TensorProto.UNDEFINED and value.name not in types:
            types[value.name], dims[value.name] = elem, shape


def _edges(nodes: Sequence[onnx.NodeProto]) -> tuple[tuple[frozenset[int], ...], tuple[frozenset[int], ...]]:
    """Producer and consumer sets per node (main graph; a subgraph's reads of outer values count
    for the node that holds it, as ORT's ``get_producer_consumer_maps`` counts them)."""
    made = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    producers: list[set[int]] = [set() for _ in nodes]
    consumers: list[set[int]] = [set() for _ in nodes]
    for i, node in enumerate(nodes):
        for name in (*node.input, *_outer_reads(node)):
            j = made.get(name)
            if j is not None and j != i:
                producers[i].add(j)
                consumers[j].add(i)
    return tuple(frozenset(p) for p in producers), tuple(frozenset(c) for c in consumers)


def _outer_reads(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read that they do not define (implicit inputs)."""
    reads: set[str] = set()
    for attr in node.attribute:
        for graph in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
            defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
            defined |= {o for n in graph.node for o in n.output}
            reads |= {i for n in graph.node for i in (*n.input, *_outer_reads(n)) if i and i not in defined}
    return reads
