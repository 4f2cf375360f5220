"""PORT009 static-intermediate-shapes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import onnx

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.shapes import Dims, linear_dim

__all__ = ["StaticIntermediateShapes"]


def _shape_text(dims: Dims) -> str:
    return "?" if dims is None else "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _symbolic_text(known: Sequence[Dims], batches: tuple[int | None, ...], symbol: str) -> str:
    """The shape with the batch as the model names it (``[batch_size, ?]``, not ``[1, ?]``: the analysis
    fixes the batch to 1, 2 and 3, and a dim that follows it is the batch)."""
    first = known[0] or ()
    texts = []
    for i, dim in enumerate(first):
        values = tuple(d[i] for d in known if d is not None and len(d) > i)
        linear = linear_dim(values, symbol=symbol, batches=batches) if len(values) == len(batches) else None
        texts.append(str(linear) if linear is not None else ("?" if dim is None else str(dim)))
    return "[" + ", ".join(texts) + "]"


def _describe(runs: list[Dims], batches: tuple[int | None, ...], symbol: str = "batch") -> tuple[str, str | None]:
    """Dims as text (ints, or expressions of the batch) and, if any, what is not static."""
    known = [d for d in runs if d is not None]
    if len(known) != len(runs):
        return "?", "has unknown rank"
    first = known[0]
    if any(len(d) != len(first) for d in known):
        seen = "; ".join(f"{_shape_text(d)} at batch {b}" for b, d in zip(batches, runs))
        return _shape_text(first), f"changes rank with the batch size ({seen})"
    texts = []
    for i, dim in enumerate(first):
        values = tuple(d[i] for d in known)
        if not all(isinstance(v, int) for v in values):
            return _symbolic_text(known, batches, symbol), f"dim {i} is not static ({dim or '?'})"
        text = linear_dim(values, batches=batches) if len(values) > 1 else values[0]
        if text is None:
            seen = ", ".join(f"{v} at batch {b}" for b, v in zip(batches, values))
            return _shape_text(first), f"dim {i} varies with the batch but not as a*batch+c ({seen})"
        texts.append(str(text))
    return "[" + ", ".join(texts) + "]", None


def _declared_static(value: onnx.ValueInfoProto) -> bool:
    """A graph output whose declared dims 1.. are integers (else PORT008 reports it, not this rule)."""
    tt = value.type.tensor_type
    return tt.HasField("shape") and all(d.HasField("dim_value") for d in list(tt.shape.dim)[1:])


class StaticIntermediateShapes(Rule):
    """Every intermediate value has a known rank and static dims (integers or expressions of the batch).

    How it decides: on a copy of the model the batch is fixed to 1, to 2 and to 3, and
    ``onnx.shape_inference.infer_shapes(data_prop=True)`` and onnxscript's constant
    folder run in turn until nothing changes (at most 4 rounds); the model's own
    ``value_info`` and declared output shapes are not trusted. A dim that is an integer
    at every value is static (``9``), or an expression of the batch when it is linear
    in it (``4*batch``). A value whose rank differs between the batch values (a
    ``Squeeze`` without axes drops the batch dim at batch 1) is an error. ONNX's
    symbolic inference alone would rename the batch after ``Reshape`` (``unk__0``) and
    cannot size a ``Range`` over the batch; fixing the batch and folding avoids both.
    A graph output whose declared shape is not static is PORT008's finding, and an output
    that nothing reads is not judged. Only the
    first node (in topological order) whose output loses a static dim is reported:
    everything downstream follows from it. Only the main graph is analysed: control-flow
    bodies are already errors (PORT004), and their shapes depend on the branch taken.

    *Why*: an intermediate shape that does not resolve means the runtime must
    compute shapes while running, and compilers for fixed-shape hardware refuse.

    *Bad*: a ``NonZero`` or a ``Reshape`` with a computed target whose values
    depend on data; an op ONNX cannot infer (custom domain); ``x.squeeze()`` on
    ``[batch, 1, 8]`` (``[8]`` at batch 1, ``[batch, 8]`` otherwise).

    *Fix*: fix the source of the dynamic shape (see PORT006, PORT007), name the axes
    of a squeeze (``x.squeeze(1)``), or export with ``portable export``, which folds
    shape computations.
    """

    id = "PORT009"
    name = "static-intermediate-shapes"
    severity = Severity.ERROR
    message = "{what}"
    hint = "remove the data-dependent or unknown shape at this node (see PORT006/PORT007) and fold constants"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        analysis = ctx.shapes
        if analysis.error:
            yield self.finding(Location(), what=f"shape inference failed: {analysis.error}")
            return
        main = ctx.scopes[0]
        judged = _judged(ctx)
        for index, node in enumerate(ctx.proto.graph.node):
            for out in node.output:
                if not out or out not in judged:
                    continue
                symbol = ctx.batch_symbols[0] if ctx.batch_symbols else "batch"
                shape, problem = _describe(analysis.dims(out), _batches(analysis), symbol)
                if problem:
                    rest = self._downstream(ctx, analysis, index, judged)
                    tail = f"; {rest} later value(s) are not static either" if rest else ""
                    yield self._first(ctx.location(main, index, node, out), node,
                                      f"output '{out}' {problem}, shape {shape}{tail}")
                    return

    def _first(self, location: Location, node: onnx.NodeProto, what: str) -> Finding:
        """The first value that is not static; under a custom-domain op, whose shapes no inference knows and
        which PORT002 already reports as an error, once and as info (no cascade of errors below it)."""
        if node.domain in ("", "ai.onnx"):
            return self.finding(location, what=what)
        return self.finding(location, severity=Severity.INFO, hint="see PORT002: the op of this node is the cause",
                            what=f"{what} (from the {node.domain} op {node.op_type}, which PORT002 names)")

    @staticmethod
    def _downstream(ctx: ModelContext, analysis, start: int, judged: frozenset[str]) -> int:
        count = 0
        for node in list(ctx.proto.graph.node)[start + 1:]:
            for out in node.output:
                if out in judged and _describe(analysis.dims(out), _batches(analysis))[1]:
                    count += 1
        return count


def _judged(ctx: ModelContext) -> frozenset[str]:
    """Node outputs this rule judges: those the graph uses (an input of a node or a graph output),
    but not graph outputs whose declared shape PORT008 rejects. An output nothing reads (Dropout's
    optional mask in old models) carries no shape into the graph."""
    graph = ctx.proto.graph
    skipped = {v.name for v in graph.output if not _declared_static(v)}
    used = {i for n in graph.node for i in n.input} | {v.name for v in graph.output}
    return frozenset(o for n in graph.node for o in n.output if o and o in used and o not in skipped)


def _batches(analysis) -> tuple[int | None, ...]:
    return tuple(run.batch for run in analysis.runs)
