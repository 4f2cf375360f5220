"""PORT009 static-intermediate-shapes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.shapes import BATCH_VALUES, Dims, linear_dim

__all__ = ["StaticIntermediateShapes"]


def _describe(runs: list[Dims]) -> tuple[str, str | None]:
    """Dims as text (ints, or expressions of the batch) and, if any, what is not static."""
    if any(d is None for d in runs):
        return "?", "has unknown rank"
    known = cast("list[tuple[int | str | None, ...]]", runs)  # no None: returned above
    first = known[0]
    if any(len(d) != len(first) for d in known):
        return "?", "changes rank with the batch size"
    texts = []
    for i, dim in enumerate(first):
        values = tuple(d[i] for d in known)
        if not all(isinstance(v, int) for v in values):
            return str(list(first)), f"dim {i} is not static ({dim or '?'})"
        text = linear_dim(cast("tuple[int, ...]", values)) if len(values) == len(BATCH_VALUES) else values[0]
        if text is None:
            return str(list(first)), f"dim {i} varies with the batch but not as a*batch+c ({values})"
        texts.append(str(text))
    return "[" + ", ".join(texts) + "]", None


class StaticIntermediateShapes(Rule):
    """Every intermediate value has a known rank and static dims (integers or expressions of the batch).

    How it decides: the batch is fixed to 2 and to 3 on a copy of the model and
    ``onnx.shape_inference.infer_shapes(data_prop=True)`` runs on each; the model's
    own ``value_info`` is not trusted. A dim that is an integer at both values is
    static (``9``), or an expression of the batch when they differ (``4*batch``).
    ONNX's symbolic inference alone would rename the batch after ``Reshape``
    (``unk__0``) and lose attention shapes; fixing the batch avoids both. Only the
    first node (in topological order) whose output loses a static dim is reported:
    everything downstream follows from it. Only the main graph is analysed: control-flow
    bodies are already errors (PORT004), and their shapes depend on the branch taken.

    *Why*: an intermediate shape that does not resolve means the runtime must
    compute shapes while running, and compilers for fixed-shape hardware refuse.

    *Bad*: a ``NonZero`` or a ``Reshape`` with a computed target whose values
    depend on data; an op ONNX cannot infer (custom domain).

    *Fix*: fix the source of the dynamic shape (see PORT006, PORT007), or export
    with ``portable export``, which folds shape computations.
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
        for index, node in enumerate(ctx.proto.graph.node):
            for out in node.output:
                if not out:
                    continue
                shape, problem = _describe([run.dims.get(out) for run in analysis.runs])
                if problem:
                    rest = self._downstream(ctx, analysis, index)
                    tail = f"; {rest} later value(s) are not static either" if rest else ""
                    yield self.finding(ctx.location(main, index, node, out),
                                       what=f"output '{out}' {problem}, shape {shape}{tail}")
                    return

    @staticmethod
    def _downstream(ctx: ModelContext, analysis, start: int) -> int:
        count = 0
        for node in list(ctx.proto.graph.node)[start + 1:]:
            for out in node.output:
                if out and _describe([run.dims.get(out) for run in analysis.runs])[1]:
                    count += 1
        return count
