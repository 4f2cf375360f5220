"""PORT202 target-dtype-casts (per target)."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.targets.check import Cast

__all__ = ["TargetCasts"]

_HINTS = {
    "input": "feed {wanted}: build the example input as {wanted} before export and cast inside the model if needed",
    "output": "return {wanted}: cast the output in the PyTorch model's forward (out.to(torch.{wanted}))",
    "initializer": "store the weight as {wanted}: model.to(torch.{wanted}) before export",
    "value": "cast to {wanted} in the PyTorch code that computes it (tensor.to(torch.{wanted}))",
}


class TargetCasts(Rule):
    """Per target (``--target``): no value has an element type the target wants as another (float64
    where it takes float32, int64 where it takes int32), as its tables state it.

    One finding per such value, saying whether it is a graph input, output, weight or computed
    value, and which node computes it: the casts a user would need, answered before the device
    compiler asks. Targets whose tables state no element types (OpenVINO, tract, NNAPI, CoreML)
    have nothing to check here; ``docs/targets.md`` lists what each profile holds.

    *Why*: TensorRT casts float64 down to float32 (clamping to the float32 range); QNN has no
    float64 at all. A value the target cannot hold is converted silently or refused.

    *Bad*: a float64 output from ``torch.from_numpy`` of a NumPy default array, on ``--target qnn``.

    *Fix*: the message's hint: feed, store or cast the value as the wanted type in the PyTorch model.
    """

    id = "PORT202"
    name = "target-dtype-casts"
    severity = Severity.WARNING
    message = "{target}: {kind} '{value}' is {dtype}; {target} wants {wanted}{made}"
    hint = "cast to the wanted type in the PyTorch model (inputs, weights or the computing op)"
    opt_in = True
    needs_targets = True

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        main = ctx.scopes[0]
        nodes = ctx.targets.facts.nodes
        for name, analysis in ctx.targets:
            for cast in analysis.casts:
                loc = Location(value=cast.value)
                made = ""
                if cast.producer is not None:
                    loc = ctx.location(main, cast.producer, nodes[cast.producer], cast.value)
                    made = f" (computed by {nodes[cast.producer].op_type})"
                yield self._finding(name, cast, loc, made)

    def _finding(self, target: str, cast: Cast, loc: Location, made: str) -> Finding:
        kinds = {"input": "graph input", "output": "graph output", "initializer": "weight", "value": "value"}
        return self.finding(loc, hint=_HINTS[cast.kind].format(wanted=cast.wanted), target=target,
                            kind=kinds[cast.kind], value=cast.value, dtype=cast.dtype, wanted=cast.wanted, made=made)
