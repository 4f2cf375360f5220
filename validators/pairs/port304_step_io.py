"""PORT304 pair-step-io."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Location, Severity
from portable.validators.pairs.base import PairFinding, PairRule
from portable.validators.pairs.context import CacheValue, PairContext

__all__ = ["StepIO"]


class StepIO(PairRule):
    """The graphs are one step at two token counts: decode takes one token, both agree on the rest.

    *Why*: the host runs the prefill graph on blocks of the prompt and the decode graph on one
    token at a time, with the same batch, the same kinds of inputs (token ids, positions, the
    attention mask over the context) and the same logits. A decode graph that takes more than one
    token per row, a batch that differs, an input only one graph has, or logits over another
    vocabulary break that loop or make it compute something else.

    *Bad*: a decode graph whose ``input_ids`` are ``[1, 32]``; a prefill graph at batch 1 beside a
    decode graph at batch 4; ``position_ids`` in one graph only; logits of 32000 against 32001.

    *Fix*: export both graphs in one run (``portable export SPEC --task text-generation
    --prefill P --batch N``).
    """

    id = "PORT304"
    name = "pair-step-io"
    severity = Severity.ERROR
    message = "{role} graph: {problem}"
    hint = "export both graphs in one run (portable export SPEC --task text-generation --prefill P)"

    def check_pair(self, ctx: PairContext) -> Iterator[PairFinding]:
        prefill, decode = ctx.sides
        ids = decode.inputs.get("input_ids")
        if ids is None or prefill.inputs.get("input_ids") is None:
            lacking = decode if ids is None else prefill
            yield lacking, self.finding(Location(), role=lacking.role, problem="no input_ids input")
            return
        if decode.tokens != 1:
            yield decode, self.finding(Location(value="input_ids"), role="decode",
                                       problem=f"input_ids {ids.describe()} do not take one token per row")
        counts = (prefill.tokens, decode.tokens)
        for name in sorted(set(prefill.step_inputs) | set(decode.step_inputs)):
            problem = _agree(prefill.step_inputs.get(name), decode.step_inputs.get(name), name, counts)
            if problem:
                yield decode, self.finding(Location(value=name), role="decode", problem=problem)
        problem = _logits(prefill.outputs.get("logits"), decode.outputs.get("logits"))
        if problem:
            yield decode, self.finding(Location(value="logits"), role="decode", problem=problem)


def _agree(a: CacheValue | None, b: CacheValue | None, name: str, counts: tuple[int | None, int | None]) -> str | None:
    """Same dtype, rank and batch; every other axis the same or the token count of each graph (a mask per query)."""
    if a is None or b is None:
        return f"input '{name}' is in the {'decode' if a is None else 'prefill'} graph only"
    if a.dtype != b.dtype or len(a.dims) != len(b.dims) or a.dims[:1] != b.dims[:1]:
        return f"input {b.describe()} differs from the prefill graph's {a.describe()} (dtype, rank or batch)"
    if any(x != y and (x, y) != counts for x, y in zip(a.dims[1:], b.dims[1:])):
        return f"input {b.describe()} differs from the prefill graph's {a.describe()} beyond the token count"
    return None


def _logits(a: CacheValue | None, b: CacheValue | None) -> str | None:
    if a is None or b is None:
        return "no 'logits' output in " + ("the decode graph" if b is None else "the prefill graph")
    if a.dtype != b.dtype or a.dims[:1] != b.dims[:1] or a.dims[-1:] != b.dims[-1:]:
        return f"logits {b.describe()} differ from the prefill graph's {a.describe()} (dtype, batch or vocabulary)"
    return None
