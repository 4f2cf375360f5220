"""PORT302 pair-cache-length."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.validators.pairs.base import PairFinding, PairRule
from portable.validators.pairs.context import CacheValue, GraphSide, PairContext

__all__ = ["CacheLength"]


class CacheLength(PairRule):
    """Every cache input is as long as the context implies, a fixed number of slots.

    *Why*: a static KV cache is what lets an NPU compile the decode step once: each layer's keys and
    values are a tensor of C slots (C the context: the manifest's, ``--context``, or the length of
    the attention mask). A symbolic sequence length (a dynamic cache, as torch.onnx and Optimum
    export it) or a length that fits neither convention means the graph cannot be compiled for the
    context the host allocates. Two conventions hold: the whole cache of C slots, in which the step
    writes its tokens (portable's, ExecuTorch's static llama), or the past of C - T slots beside
    the T tokens of the call (Qualcomm AI Hub's).

    *Bad*: ``past_key_0`` of shape ``[1, 8, past_sequence_length, 64]``; a decode graph exported at
    C = 255 beside a prefill graph at C = 256.

    *Fix*: export the pair with a static cache of one context for both graphs
    (``portable export SPEC --task text-generation --context C``).
    """

    id = "PORT302"
    name = "pair-cache-length"
    severity = Severity.ERROR
    message = ("cache input {value}{more} of the {role} graph: no axis of {expected} slots (context {context}, "
               "{tokens} token(s) a call)")
    hint = "export both graphs over one static cache of C slots (--context C)"

    def check_pair(self, ctx: PairContext) -> Iterator[PairFinding]:
        """One finding per graph, at its first such input (a 32-layer model has 64 cache inputs)."""
        context = ctx.context
        for side in ctx.sides:
            values = list(side.cache_inputs.values())
            symbolic = [v for v in values if any(not isinstance(d, int) for d in v.dims[1:])]
            short = [v for v in values if v not in symbolic and context is not None and not _fits(v, side, context)]
            if symbolic:
                name = next(d for d in symbolic[0].dims[1:] if not isinstance(d, int))
                yield side, self._one(side, symbolic, "fixed", context, hint=f"its length is the symbol '{name}': "
                                      "the cache is dynamic; export a static cache (--task text-generation)")
            if short and context is not None:
                yield side, self._one(side, short, _expected(side, context), context)

    def _one(self, side: GraphSide, values: list[CacheValue], expected: str, context: int | None,
             hint: str | None = None) -> Finding:
        more = f" and {len(values) - 1} more" if len(values) > 1 else ""
        return self.finding(Location(value=values[0].name), value=values[0].describe(), more=more, role=side.role,
                            expected=expected, context=context or "unknown", tokens=side.tokens or "?", hint=hint)


def _fits(value: CacheValue, side: GraphSide, context: int) -> bool:
    lengths = {context} | ({context - side.tokens} if side.tokens else set())
    return any(d in lengths for d in value.dims[1:])


def _expected(side: GraphSide, context: int) -> str:
    return f"{context} or {context - side.tokens}" if side.tokens else str(context)
