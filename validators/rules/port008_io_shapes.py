"""PORT008 static-io-shapes."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["StaticIOShapes"]

INT32_MAX = 2**31 - 1  # many accelerator runtimes index tensors with int32


def _dim_text(dim: onnx.TensorShapeProto.Dimension) -> str:
    if dim.HasField("dim_value"):
        return str(dim.dim_value)
    return dim.dim_param or "?"


class StaticIOShapes(Rule):
    """Graph inputs and outputs have a known rank, a batch dim 0 and fixed other dims.

    Dim 0 is either an integer or the one batch symbol, shared by every input and
    output (with ``batch = "static"`` in the policy it must be an integer). Every
    other dim is an integer.

    *Why*: deployment targets allocate I/O buffers once. A symbolic sequence length or
    image size makes every shape downstream dynamic; two batch symbols (``batch`` and
    ``s0``) mean the runtime cannot tell they are the same size.

    *Bad*: ``input: float32[batch, seq, 768]``; ``input: float32[N, 3, 224, 224]`` with
    ``output: float32[batch, 1000]``; an input of unknown rank.

    *Fix*: export with ``dynamic_shapes`` naming dim 0 only, the same ``Dim("batch")``
    for every input (``portable export --batch dynamic`` does), or ``--batch N``.
    """

    id = "PORT008"
    name = "static-io-shapes"
    severity = Severity.ERROR
    message = "{subject} {problem}"
    hint = "make dim 0 the one batch symbol (or an integer) and every other dim an integer"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        graph = ctx.proto.graph
        initialized = {t.name for t in graph.initializer}
        symbols: dict[str, str] = {}
        for role, values in (("input", graph.input), ("output", graph.output)):
            for value in values:
                if value.name in initialized:
                    continue
                yield from self._check_value(ctx, role, value, symbols)
        if len(set(symbols.values())) > 1:
            names = ", ".join(f"{v}: {s}" for v, s in symbols.items())
            yield self.finding(Location(), subject="graph inputs and outputs",
                               problem=f"use different batch symbols ({names}); one shared symbol is required")

    def _check_value(self, ctx: ModelContext, role: str, value: onnx.ValueInfoProto,
                     symbols: dict[str, str]) -> Iterator[Finding]:
        loc = Location(value=value.name)
        tt = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            return  # PORT005 reports non-tensor types
        if not tt.HasField("shape"):
            yield self.finding(loc, subject=f"graph {role} '{value.name}'", problem="has unknown rank")
            return
        dims = list(tt.shape.dim)
        shape = "[" + ", ".join(_dim_text(d) for d in dims) + "]"
        if dims and not dims[0].HasField("dim_value"):
            if ctx.policy.batch == "static":
                yield self.finding(loc, subject=f"graph {role} '{value.name}'",
                               problem=f"has dynamic dim 0 {shape}; the policy requires a fixed batch")
            elif not dims[0].dim_param:
                yield self.finding(loc, subject=f"graph {role} '{value.name}'", problem=f"has an unnamed dim 0 {shape}")
            else:
                symbols[value.name] = dims[0].dim_param
        bad = [i for i, d in enumerate(dims) if i > 0 and not d.HasField("dim_value")]
        if bad:
            which = ", ".join(str(i) for i in bad)
            yield self.finding(loc, subject=f"graph {role} '{value.name}'",
                               problem=f"has dynamic dim(s) {which} in {shape}; only dim 0 may be dynamic")
        if any(d.HasField("dim_value") and d.dim_value < 0 for d in dims):
            yield self.finding(loc, subject=f"graph {role} '{value.name}'", problem=f"has a negative dim in {shape}")
        if any(d.HasField("dim_value") and d.dim_value > INT32_MAX for d in dims):
            yield self.finding(loc, subject=f"graph {role} '{value.name}'",
                               problem=f"has a dim over 2**31-1 in {shape}; no runtime can allocate it")
