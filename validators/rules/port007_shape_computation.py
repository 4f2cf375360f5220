"""PORT007 no-runtime-shape-computation."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["NoRuntimeShapeComputation"]


class NoRuntimeShapeComputation(Rule):
    """Shape-like inputs (``Reshape`` shape, ``Expand``, ``Tile``, ``Slice``, ``Pad``, ``Resize``,
    ``ConstantOfShape``, ``Range``, reduction axes, ``STFT`` frame step and length, ``DFT``
    length, ``AffineGrid`` size, ...) are constants.

    *Why*: a shape computed at run time (``Shape`` → ``Gather`` → ``Concat`` → ``Reshape``)
    keeps a compiler from planning the graph statically, and often means the export
    kept a dynamic dim it should have fixed.

    How it decides: every non-constant shape input is checked by fixing the batch to
    1, to 2 and to 3, running ONNX shape inference and onnxscript's constant folder on
    the copy in turn until nothing changes (at most 4 rounds), and looking at what is
    left. With a dynamic batch, an input that folds to a constant at every value
    depends on nothing but the batch (e.g. expanding a class
    token to the batch): allowed, reported as *info*. Anything else is an error. With
    a fixed batch nothing may remain: even a foldable computation is an error. The
    main graph is analysed (control-flow bodies are PORT004's).

    *Bad*: ``x.view(x.shape[0], x.shape[1] * 2, -1)`` exported without folding;
    ``torch.arange(n)`` with ``n`` computed from data.

    *Fix*: fold constants (``portable export`` does; or ``onnxscript.optimizer.optimize``),
    write reshapes with ``0``/``-1`` for the batch (``x.flatten(1)``, ``x.view(-1, 8, 64)``),
    and compute sizes from configuration, not tensors.
    """

    id = "PORT007"
    name = "no-runtime-shape-computation"
    severity = Severity.ERROR
    message = "{op} input {index} ('{value}') {what}{why}"
    hint = "fold constants and use Reshape's 0/-1 for the batch; derive sizes from config, not tensors"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        analysis = ctx.shapes
        if not analysis.candidates:
            return
        nodes = ctx.proto.graph.node
        main = ctx.scopes[0]
        origin = _origins(ctx)
        for index, name, i in analysis.candidates:
            node = nodes[index]
            loc = ctx.location(main, index, node, node.input[i])
            what = origin.get(node.input[i], "is computed at run time")
            yield self._judge(analysis, loc, node.op_type, name, i, node.input[i], what)

    def _judge(self, analysis, loc: Location, op: str, name: str, i: int, value: str, what: str) -> Finding:
        folds = analysis.batch_only(name, i) and analysis.error is None
        if analysis.dynamic and folds:
            return self.finding(loc, severity=Severity.INFO, op=op, index=i, value=value, what=what,
                                why=" from the batch size only (allowed with a dynamic batch)")
        if folds:
            why = " but folds to a constant: the file still carries the computation"
        elif analysis.error:
            why = f" and could not be resolved (shape inference failed: {analysis.error})"
        elif what != "is computed at run time":
            why = ", so the caller decides the output shape"
        else:
            why = " and depends on more than the batch size"
        return self.finding(loc, op=op, index=i, value=value, what=what, why=why)


def _origins(ctx: ModelContext) -> dict[str, str]:
    """What a non-constant shape input is when no node computes it: a graph input, or an
    initializer also listed as a graph input (which the caller may override from IR 4)."""
    graph = ctx.proto.graph
    initialized = {t.name for t in graph.initializer}
    overridable = ("is an initializer that the caller may override (it is also a graph input)"
                   if ctx.proto.ir_version >= 4 else "is an initializer listed as a graph input")
    return {v.name: overridable if v.name in initialized else "is a graph input" for v in graph.input}
