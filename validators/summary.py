"""``portable inspect``: what a model file holds, and its portability verdict in one line.

What users reach for first (Polygraphy's ``inspect model``, onnxslim's table): inputs and outputs with
shapes and types, the op counts, the initializers' count and bytes, the opset, IR and producer. The
model is read once (the lean parse: no copy of the weights) and the verdict is the validation of that
same parse. Initializer bytes come from each tensor's dims and type, so external data is counted
without being opened.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from portable.policy import Policy
from portable.report import ValidationReport
from portable.validators.graphs import iter_scopes

__all__ = ["ModelSummary", "Signature", "inspect", "op_counts"]

# Bits per element of the types whose size numpy's itemsize does not give (sub-byte, strings: 0).
_BITS = {onnx.TensorProto.INT4: 4, onnx.TensorProto.UINT4: 4, onnx.TensorProto.STRING: 0,
         getattr(onnx.TensorProto, "FLOAT4E2M1", -1): 4, getattr(onnx.TensorProto, "INT2", -2): 2,
         getattr(onnx.TensorProto, "UINT2", -3): 2}


@dataclass(frozen=True)
class Signature:
    """One graph input or output: its name, element type and shape (a dim as an int, a symbol or ``?``)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...] | None  # None: no shape declared

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}


@dataclass(frozen=True)
class ModelSummary:
    path: str
    size_bytes: int
    ir_version: int
    opsets: tuple[tuple[str, int], ...]
    producer: str
    inputs: tuple[Signature, ...]
    outputs: tuple[Signature, ...]
    ops: tuple[tuple[str, int], ...]  # most frequent first; subgraphs and functions included
    nodes: int
    initializers: int
    initializer_bytes: int
    functions: int
    report: ValidationReport = field(repr=False)

    def verdict(self) -> str:
        """``portable: yes`` or ``portable: no (PORT004 x1, PORT009 x2; 1 warning); see `portable validate M```."""
        r = self.report
        if r.error is not None:
            return f"portable: cannot tell: {r.error}"
        counts = r.counts
        errors = Counter(f.rule_id for f in r.failing())
        rules = ", ".join(f"{rule} x{n}" for rule, n in sorted(errors.items()))
        warnings = f"{counts['warning']} warning{'' if counts['warning'] == 1 else 's'}" if counts["warning"] else ""
        if r.ok:
            return f"portable: yes ({warnings})" if warnings else "portable: yes"
        return f"portable: no ({rules}{'; ' + warnings if warnings else ''}); see `portable validate {self.path}`"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "size_bytes": self.size_bytes, "ir_version": self.ir_version,
            "opset": dict(self.opsets), "producer": self.producer,
            "inputs": [s.to_dict() for s in self.inputs], "outputs": [s.to_dict() for s in self.outputs],
            "nodes": self.nodes, "ops": dict(self.ops), "functions": self.functions,
            "initializers": {"count": self.initializers, "bytes": self.initializer_bytes},
            "portable": {"ok": self.report.ok, "verdict": self.verdict(), "counts": self.report.counts,
                         "rules": sorted({f.rule_id for f in self.report.failing()})},
            **({"targets": [t.to_dict() for t in self.report.targets]} if self.report.targets else {}),
        }


def _dim(dim: onnx.TensorShapeProto.Dimension) -> int | str:
    if dim.HasField("dim_value"):
        return dim.dim_value
    return dim.dim_param or "?"


def _dtype_name(elem_type: int) -> str:
    """numpy's name (``float32``, ``int64``, ``bfloat16``), else ONNX's in lower case."""
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return onnx.helper.tensor_dtype_to_string(elem_type).removeprefix("TensorProto.").lower()


def _signature(value: onnx.ValueInfoProto) -> Signature:
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        return Signature(value.name, kind or "?", None)
    tensor = value.type.tensor_type
    dtype = _dtype_name(tensor.elem_type)
    shape = tuple(_dim(d) for d in tensor.shape.dim) if tensor.HasField("shape") else None
    return Signature(value.name, dtype, shape)


def _tensor_bytes(tensor: onnx.TensorProto) -> int:
    """Bytes of a tensor's values from its dims and type (external or stripped payloads too)."""
    count = 1
    for d in tensor.dims:
        count *= d
    if tensor.data_type == onnx.TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    bits = _BITS.get(tensor.data_type)
    if bits is None:
        try:
            bits = 8 * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        except (KeyError, TypeError, ValueError):  # a type this onnx does not know
            bits = 0
    return (count * bits + 7) // 8


def op_counts(proto: onnx.ModelProto) -> Counter[str]:
    """Nodes per op over every graph, subgraph and function (``domain::Op`` outside ai.onnx)."""
    counts: Counter[str] = Counter()
    for scope in iter_scopes(proto):
        for node in scope.body.node:
            counts[f"{node.domain}::{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type] += 1
    return counts


def _initializers(proto: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [t for scope in iter_scopes(proto) if isinstance(scope.body, onnx.GraphProto)
            for t in (*scope.body.initializer, *(s.values for s in scope.body.sparse_initializer))]


def summarize(proto: onnx.ModelProto, path: str, size: int, report: ValidationReport) -> ModelSummary:
    graph = proto.graph
    counts = op_counts(proto)
    inits = _initializers(proto)
    return ModelSummary(
        path=path, size_bytes=size, ir_version=proto.ir_version,
        opsets=tuple((e.domain or "ai.onnx", e.version) for e in proto.opset_import),
        producer=f"{proto.producer_name} {proto.producer_version}".strip(),
        inputs=tuple(_signature(v) for v in graph.input if v.name not in {t.name for t in graph.initializer}),
        outputs=tuple(_signature(v) for v in graph.output),
        ops=tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0]))), nodes=sum(counts.values()),
        initializers=len(inits), initializer_bytes=sum(_tensor_bytes(t) for t in inits),
        functions=len(proto.functions), report=report)


def inspect(path: str | Path, policy: Policy | None = None) -> ModelSummary:
    """Read ``path`` once (lean) and summarize it, with the validation of the same parse as the verdict.
    An unreadable file raises :class:`portable.errors.InputError` (exit 3)."""
    from portable.validators.engine import validate_proto
    from portable.validators.loading import load_model_file

    loaded = load_model_file(path)
    try:
        report = validate_proto(loaded.proto, str(path), policy or Policy(), loaded.size, lean=loaded.lean)
        return summarize(loaded.proto, str(path), loaded.size, report)
    finally:
        loaded.close()
