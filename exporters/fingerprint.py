"""A fingerprint of what a model computes: sha256 over a canonical form.

Covered: opset imports, nodes (op, domain, inputs, outputs, attributes, names), graph
inputs/outputs/value_info with shapes and dtypes, initializer names, dtypes, dims and
bytes. Ignored: doc strings, producer name/version, and all metadata_props (provenance
and the model-level stamps, the fingerprint itself included).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import onnx

__all__ = ["fingerprint"]


def fingerprint(proto: onnx.ModelProto, payloads: Mapping[int, bytes | memoryview] | None = None) -> str:
    """``sha256:<hex>`` of the canonical form of ``proto``.

    ``payloads``: main-graph initializer index -> its ``raw_data``, for a proto parsed lean
    (``validators.lean``: large payloads left in the serialized bytes); the same fingerprint as
    of the whole proto, hashed from the bytes in place (hashlib releases the GIL on them)."""
    payloads = payloads or {}
    digest = hashlib.sha256()
    for opset in sorted((o.domain, o.version) for o in proto.opset_import):
        digest.update(f"opset {opset[0]} {opset[1]}\n".encode())
    digest.update(_graph_without_payload(proto.graph).SerializeToString(deterministic=True))
    for index, tensor in sorted(enumerate(proto.graph.initializer), key=lambda it: it[1].name):
        digest.update(_tensor_header(tensor))
        if index in payloads:
            digest.update(payloads[index])
        else:
            digest.update(tensor.raw_data if tensor.HasField("raw_data") else _payload(tensor))
    for function in sorted(proto.functions, key=lambda f: (f.domain, f.name)):
        copy = onnx.FunctionProto()
        copy.CopyFrom(function)
        _strip_nodes(copy.node)
        copy.doc_string = ""
        del copy.metadata_props[:]
        digest.update(copy.SerializeToString(deterministic=True))
    return f"sha256:{digest.hexdigest()}"


def _graph_without_payload(graph: onnx.GraphProto) -> onnx.GraphProto:
    out = onnx.GraphProto(name=graph.name)
    out.node.extend(graph.node)
    _strip_nodes(out.node)
    for field in ("input", "output", "value_info"):
        values = getattr(out, field)
        values.extend(getattr(graph, field))
        for value in values:
            value.doc_string = ""
            del value.metadata_props[:]
    return out


def _strip_nodes(nodes) -> None:
    for node in nodes:
        node.doc_string = ""
        del node.metadata_props[:]
        for attr in node.attribute:
            attr.doc_string = ""
            if attr.type == onnx.AttributeProto.GRAPH:
                _strip_nodes(attr.g.node)
            for graph in attr.graphs:
                _strip_nodes(graph.node)


def _tensor_header(tensor: onnx.TensorProto) -> bytes:
    return f"init {tensor.name} {tensor.data_type} {list(tensor.dims)}\n".encode()


def _payload(tensor: onnx.TensorProto) -> bytes:
    copy = onnx.TensorProto()
    copy.CopyFrom(tensor)
    copy.name = ""
    copy.doc_string = ""
    return copy.SerializeToString(deterministic=True)
