"""PORT203 target-partitions (per target)."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.report import FAIL_ON, TargetSummary
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["TargetPartitions"]


class TargetPartitions(Rule):
    """Per target (``--target``): the partition estimate, with the gates ``--max-partitions N``,
    ``--no-fallback`` and ``--fail-on partial|unsupported`` (``max-partitions`` / ``no-fallback`` /
    ``fail-on`` in ``[tool.portable]``). ``--fail-on`` reads the tables' verdict per node: ``unsupported``
    fails on a node the table lacks (op, version or type) or does not name; ``partial`` also on one it
    lists with a restriction in words (PORT204).

    How many subgraphs the target would be given and how many nodes fall back, estimated as ONNX
    Runtime's mobile usability checker does (its partitioning walk, over the nodes the target's table
    has; NNAPI and CoreML also need fixed input sizes there, so a model with a symbolic batch is
    estimated as it is and once more with the batch fixed). The report carries one line per target
    whatever it finds; this rule adds a warning when nodes fall back or the model is split, and an
    error when a gate is exceeded (exit 1). A target that takes under half the nodes is always a warning
    (so ``--strict`` fails on it), and its line says first that the model does not run there as it is.
    Runtimes without a fallback (ONNX Runtime's CPU provider, OpenVINO, tract, WebNN, LiteRT) load the whole
    model or nothing: one partition, or none.

    *Why*: every partition boundary is a copy between the device and the host; more than two
    partitions usually make an NPU slower than the CPU (the checker's own rule of thumb).

    *Bad*: ``nnapi: 0/418 nodes, 0 partitions`` for a dynamic-batch model (NNAPI needs fixed sizes);
    ``qnn: 412/418 nodes, 3 partitions, fallback: Erf x2``.

    *Fix*: replace the fallback ops (PORT201 names each node and its source line); fix the batch for
    NNAPI and CoreML (``portable export --batch 1`` or ``portable fix --batch 1``).
    """

    id = "PORT203"
    name = "target-partitions"
    severity = Severity.WARNING
    message = "{line}{gate}"
    hint = "replace the ops that fall back (see PORT201), or fix the batch for targets that need fixed sizes"
    opt_in = True
    needs_targets = True

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for summary in ctx.targets.summaries():
            gate = _gate(summary, ctx.policy.max_partitions, ctx.policy.no_fallback, ctx.policy.fail_on)
            if gate or _split(summary):  # a gate that fails is an error even when nothing is split
                yield self.finding(Location(), severity=Severity.ERROR if gate else None, line=summary.line(), gate=gate,
                                   hint=self._hint(summary, gate))

    @staticmethod
    def _hint(summary: TargetSummary, gate: str) -> str:
        if "--fail-on" in gate and not summary.fallback:
            return ("the restrictions PORT204 names are stated, not checked: check them on the device, then gate with "
                    "--fail-on unsupported, or change the PyTorch code that exports those nodes")
        if summary.fixed_batch is not None and summary.fixed_batch[0] > summary.supported:
            return "this target needs fixed sizes: export with a fixed batch (`portable export --batch 1`, `portable fix --batch 1`)"
        if summary.fallback:
            return "replace the ops named (PORT201 gives each node and its source line) or accept the fallback"
        return "nothing to change"


def _split(summary: TargetSummary) -> bool:
    """Nodes fall back, the model is split, or the target takes under half the nodes (a warning at least)."""
    return bool(summary.fallback) or summary.partitions > 1 or summary.runs_little


def _failing(summary: TargetSummary, fail_on: str) -> str:
    """``3 nodes (1 partial, 2 unknown)``."""
    kinds = [(kind, n) for kind, n in summary.counts if n and kind in FAIL_ON[fail_on]]
    total = sum(n for _, n in kinds)
    return f"{total} node{'' if total == 1 else 's'} ({', '.join(f'{n} {kind}' for kind, n in kinds)})"


def _gate(summary: TargetSummary, max_partitions: int | None, no_fallback: bool, fail_on: str | None = None) -> str:
    """Why a gate fails ("" when none does)."""
    failed = []
    if fail_on is not None and summary.failing(fail_on):
        failed.append(f"--fail-on {fail_on}: {_failing(summary, fail_on)}")
    if no_fallback and summary.fallback:
        failed.append("--no-fallback: nodes fall back" if summary.falls_back else "--no-fallback: it does not load")
    if max_partitions is not None and summary.falls_back and summary.partitions > max_partitions:
        failed.append(f"--max-partitions {max_partitions}: {summary.partitions} partitions")
    return f" (gate failed: {'; '.join(failed)})" if failed else ""
