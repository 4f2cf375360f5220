"""PORT201 target-op-support (per target)."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.targets.profile import Profile, load_profile
from portable.validators.targets.support import Verdict

__all__ = ["OP_HINTS", "TargetOpSupport"]

# What to change in the PyTorch model when a target lacks an op portable exports from common code.
OP_HINTS: dict[str, str] = {
    "Erf": ("exact GELU exports Erf: nn.GELU(approximate='tanh') (or F.gelu(x, approximate='tanh')) exports Tanh instead; "
            "on a file, portable fix --approximate-gelu rewrites it (not exact: proven in float64)"),
    "IsNaN": "a NaN guard (torch.isnan, nan_to_num, masked_fill after a -inf softmax) exports IsNaN: drop it for inference",
    "IsInf": "an infinity guard (torch.isinf) exports IsInf: drop it or clamp instead",
    "Range": "torch.arange sized from a tensor exports Range: register the positions as a buffer of the fixed length",
    "Einsum": "torch.einsum exports Einsum: write it with matmul, permute and reshape",
    "CumSum": "torch.cumsum exports CumSum: a matmul with a triangular constant computes it where the size is fixed",
    "GatherND": "advanced indexing (x[idx_a, idx_b]) exports GatherND: index one dim at a time (index_select, gather)",
}


class TargetOpSupport(Rule):
    """Per target (``--target``): every node's op, op version and element types are in that target's
    own support table (the profile generated from it: ``docs/targets.md``).

    A node the table lacks falls back to the target's fallback (a warning: ONNX Runtime's CUDA
    provider for TensorRT, its CPU provider for CUDA, QNN, NNAPI, CoreML, DirectML, MIGraphX and
    WebGPU) or, where the runtime has none (ONNX Runtime's CPU provider itself, OpenVINO, tract, WebNN,
    LiteRT), stops the model from loading (an error). Only what the table states is checked: a table
    without op versions or types checks none.

    *Why*: a file that honours the contract can still fail on the device: an op the NPU lacks, a
    kernel registered for other opsets, a type the provider has no kernel for. The device compiler
    says so late, or the node silently runs on the CPU.

    *Bad*: ``Erf`` from an exact GELU on ``--target qnn`` (no builder); ``MaxPool`` on int64 on
    ``--target ort-cpu``; ``Softmax-13`` where a provider registers only versions 1-12.

    With ``--live``, a runtime that names the nodes it refuses (the QNN HTP: onnxruntime-qnn's QNN EP)
    adds a finding per refused node with the runtime's own reason, and an error when it cannot compile
    the graph at all (the session fails on the device).

    *Fix*: change the PyTorch code at the node's source line to ops the target has (the hint names
    a rewrite for common ops), cast to a type the message lists, or accept the fallback.
    """

    id = "PORT201"
    name = "target-op-support"
    severity = Severity.WARNING
    message = "{target}: {detail}; {consequence}"
    hint = "change the PyTorch code that exports this op to ops the target has, or accept the fallback"
    opt_in = True
    needs_targets = True

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        main = ctx.scopes[0]
        for _name, analysis in ctx.targets:
            profile = analysis.profile
            yield from self._opsets(ctx, profile)
            for verdict in analysis.unsupported:
                node = ctx.targets.facts.nodes[verdict.index]
                loc = ctx.location(main, verdict.index, node)
                yield self._finding(profile, verdict, node.op_type, loc)
        if ctx.policy.targets_live:
            yield from self._live(ctx)

    def _live(self, ctx: ModelContext) -> Iterator[Finding]:
        """The live runtime's refusals, node by node in its own words, and its refusal to compile."""
        main, facts = ctx.scopes[0], ctx.targets.facts
        where = {node.name: i for i, node in enumerate(facts.nodes) if node.name}
        for summary in ctx.targets.summaries():
            profile, runtime = load_profile(summary.name), dict(summary.live).get("runtime", "?")
            falls = f"it falls back to {profile.fallback}" if profile.fallback else "the model does not load there"
            for op, name, reason in summary.live_refusals:
                index = where.get(name)
                loc = ctx.location(main, index, facts.nodes[index]) if index is not None else Location(node=name)
                yield self.finding(loc, target=f"{summary.name} (live, {runtime})", consequence=falls,
                                   detail=f"refuses {op} node '{name}': {reason}",
                                   hint=OP_HINTS.get(op, f"replace what exports {op} in the PyTorch model"))
            if summary.live_blocking:
                yield self.finding(Location(), severity=Severity.ERROR, target=f"{summary.name} (live, {runtime})",
                                   detail=summary.live_blocking, consequence="the session fails on the device",
                                   hint="replace the op the message names (the HTP's own words), then check again")

    def _finding(self, profile: Profile, verdict: Verdict, op: str, loc: Location) -> Finding:
        falls = profile.fallback if verdict.reason != "compile" else None
        consequence = f"it falls back to {falls}" if falls else "the model does not load there (no fallback)"
        if verdict.reason == "compile":
            consequence = "the graph does not compile there: the session fails on the device"
        return self.finding(loc, severity=None if falls else Severity.ERROR, hint=_hint(profile, verdict, op),
                            target=profile.name, detail=verdict.detail, consequence=consequence)

    def _opsets(self, ctx: ModelContext, profile: Profile) -> Iterator[Finding]:
        opset = ctx.opset("")
        if profile.opset_range is None or opset is None:
            return
        low, high = profile.opset_range
        if not low <= opset <= high:
            yield self.finding(Location(), severity=Severity.ERROR, target=profile.name,
                               detail=f"the model's opset {opset} is outside the opsets {low}-{high} its table covers",
                               consequence="the parser refuses it", hint=f"convert it: `portable fix --opset {high}`")


def _hint(profile: Profile, verdict: Verdict, op: str) -> str:
    fallback = f", or accept the fallback to {profile.fallback}" if profile.fallback else ""
    if verdict.reason == "dtype":
        wanted = verdict.wanted[0] if verdict.wanted else "a listed type"
        return f"cast to {wanted} in the PyTorch model before this op (tensor.to(torch.{wanted})){fallback}"
    if verdict.reason == "opset":
        return f"the target registers {op} at other versions: a different op, or a model at such an opset{fallback}"
    return (OP_HINTS.get(op, f"replace what exports {op} in the PyTorch model with ops {profile.name} has")
            + fallback)
