"""PORT204 target-restrictions (per target)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.targets.facts import ModelFacts
from portable.validators.targets.profile import OpEntry

__all__ = ["TargetRestrictions"]


class TargetRestrictions(Rule):
    """Per target (``--target``): the restrictions the target's table states for the ops the model
    uses, which portable does not check (information).

    The tables word them as free text (``Only 2D Conv is supported.``, ```axes` must be an
    initializer``); the usability checker prints them the same way, as caveats to check by hand.
    One finding per target and op, at its first node, with the node count. A backend's partial refusals
    measured per kind of node (QNN's HTP: ``float32``, ``quantized``...) are stated for the nodes of that
    kind only, one finding per op and kind.

    *Why*: a node the table lists can still be refused for an attribute or a shape the table
    restricts; knowing which restrictions apply narrows what to check before the device build.

    *Bad*: ``Conv`` with a 3-D kernel on ``--target nnapi`` (``Only 2D Conv is supported.``).

    *Fix*: check each restriction against the model; where one is not met, the node falls back
    (or the build fails): change the PyTorch code that exports it.
    """

    id = "PORT204"
    name = "target-restrictions"
    severity = Severity.INFO
    message = "{target}: {count} {op} node{s}; its table states: {notes} (not checked)"
    hint = "check the restriction against these nodes; where it is not met, change the PyTorch code that exports them"
    opt_in = True
    needs_targets = True

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        main = ctx.scopes[0]
        facts = ctx.targets.facts
        for name, analysis in ctx.targets:
            supported = [v.index for v in analysis.verdicts if v.supported and v.index not in analysis.folded]
            notes = {i: self._notes(analysis.profile.entry(facts.nodes[i].domain, facts.nodes[i].op_type), facts, i)
                     for i in supported}
            counts = Counter((facts.nodes[i].op_type, notes[i]) for i in supported)
            first: dict[tuple[str, str], int] = {}
            for i in supported:
                first.setdefault((facts.nodes[i].op_type, notes[i]), i)
            for (op, text), index in first.items():
                if text:
                    count = counts[op, text]
                    yield self.finding(ctx.location(main, index, facts.nodes[index]), target=name, count=count, op=op,
                                       s="" if count == 1 else "s", notes=text)

    @staticmethod
    def _notes(entry: OpEntry | None, facts: ModelFacts, index: int) -> str:
        """The restrictions stated for the node: the table's notes, and a backend's for its kind (QNN's HTP)."""
        if entry is None:
            return ""
        return entry.restriction(facts.kind(index)) if entry.partial else entry.notes
