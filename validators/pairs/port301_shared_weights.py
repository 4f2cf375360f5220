"""PORT301 pair-shared-weights."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from portable.findings import Location, Severity
from portable.validators.pairs.base import PairFinding, PairRule
from portable.validators.pairs.context import PairContext

__all__ = ["SharedWeights"]


class SharedWeights(PairRule):
    """The prefill and decode graphs hold the same weights, bit for bit.

    *Why*: the two graphs of a text-generation export are one model run at two token counts; the
    host loads both and feeds one's cache to the other. A weight that differs between them (a
    fine-tuned checkpoint exported into one graph only, an fp16 conversion of one, a folded
    constant rounded differently) makes the decode steps continue a sequence that the prefill
    started with another model, and nothing at run time says so. The weights are compared by
    dtype, dims and the sha256 of their bytes (floating-point initializers of 16 elements or
    more), not by name: names of folded weights differ between exports.

    *Bad*: ``model.prefill.onnx`` exported from one checkpoint and ``model.decode.onnx`` from
    another; the decode graph converted to fp16 and the prefill kept in fp32.

    *Fix*: export both graphs from the same model in one run (``portable export SPEC --task
    text-generation``), and convert or quantize them together.
    """

    id = "PORT301"
    name = "pair-shared-weights"
    severity = Severity.ERROR
    message = ("{count} of the {role} graph's {total} weight(s) have no identical tensor in the {other} graph "
               "({other_path}), first {first}")
    hint = "export both graphs from the same model in one run (portable export SPEC --task text-generation)"

    def check_pair(self, ctx: PairContext) -> Iterator[PairFinding]:
        for side in ctx.sides:
            other = ctx.other(side)
            left = Counter(w.key for w in other.weights)
            missing = []
            for weight in side.weights:
                if left[weight.key]:
                    left[weight.key] -= 1
                else:
                    missing.append(weight)
            if missing:
                yield side, self.finding(Location(value=missing[0].name), count=len(missing), role=side.role,
                                         total=len(side.weights), other=other.role, other_path=other.path,
                                         first=missing[0].describe())
