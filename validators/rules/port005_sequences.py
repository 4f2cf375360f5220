"""PORT005 no-sequence-types."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["NoSequenceTypes"]

SEQUENCE_OPS = frozenset({
    "SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase", "SequenceAt",
    "SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
    "OptionalGetElement", "SequenceMap",
})


def _kind(tp: onnx.TypeProto) -> str | None:
    which = tp.WhichOneof("value")
    if which in ("sequence_type", "optional_type", "map_type"):
        return which.replace("_type", "")
    return None


class NoSequenceTypes(Rule):
    """No sequence, optional or map types, and no ops that make or use them.

    *Why*: most accelerators and their compilers support tensors only. A sequence
    (a Python list of tensors) or an optional value forces a host fallback or fails.

    *Bad*: ``torch.split`` returned as a list into ``torch.cat`` may export as
    ``SplitToSequence`` → ``ConcatFromSequence``; a graph output of type ``seq(tensor)``.

    *Fix*: return tuples of tensors with a fixed count; use ``Split`` with constant
    sizes, then ``Concat``.
    """

    id = "PORT005"
    name = "no-sequence-types"
    severity = Severity.ERROR
    message = "{what}"
    hint = "use fixed-count tuples of tensors (Split/Concat) instead of sequences or optionals"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for scope, index, node in ctx.nodes():
            if node.domain in ("", "ai.onnx") and node.op_type in SEQUENCE_OPS:
                yield self.finding(ctx.location(scope, index, node), what=f"op '{node.op_type}' uses sequence or optional types")
        for scope in ctx.scopes:
            if not isinstance(scope.body, onnx.GraphProto):
                continue
            g = scope.body
            for role, values in (("input", g.input), ("output", g.output), ("value", g.value_info)):
                for value in values:
                    kind = _kind(value.type)
                    if kind:
                        yield self.finding(Location(graph=scope.path, value=value.name),
                                           what=f"graph {role} '{value.name}' has {kind} type")
