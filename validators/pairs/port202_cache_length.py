"""PORT202 pair-cache-length."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Location, Severity
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

    id = "PORT202"
    name = "pair-cache-length"
    severity = Severity.ERROR
    message = "cache input {value} of the {role} graph has no axis of {expected} slots (context {context}, {tokens} token(s) a call)"
    hint = "export both graphs over one static cache of C slots (--context C)"

    def check_pair(self, ctx: PairContext) -> Iterator[PairFinding]:
        context = ctx.context
        for side in ctx.sides:
            for value in side.cache_inputs.values():
                symbolic = [d for d in value.dims[1:] if not isinstance(d, int)]
                if symbolic:
                    yield side, self.finding(Location(value=value.name), value=value.describe(), role=side.role,
                                             expected="fixed", context=context or "unknown", tokens=side.tokens or "?",
                                             hint=f"its length is the symbol '{symbolic[0]}': export a static cache")
                elif context is not None and not _fits(value, side, context):
                    yield side, self.finding(Location(value=value.name), value=value.describe(), role=side.role,
                                             expected=_expected(side, context), context=context,
                                             tokens=side.tokens or "?")


def _fits(value: CacheValue, side: GraphSide, context: int) -> bool:
    lengths = {context} | ({context - side.tokens} if side.tokens else set())
    return any(d in lengths for d in value.dims[1:])


def _expected(side: GraphSide, context: int) -> str:
    return f"{context} or {context - side.tokens}" if side.tokens else str(context)
