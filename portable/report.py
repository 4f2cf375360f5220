"""Validation reports: what formatters see, and what the exit code comes from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from portable.errors import ExitCode
from portable.findings import Finding, Severity
from portable.policy import Policy

__all__ = ["REPORT_SCHEMA_VERSION", "VERDICT_KINDS", "OpChange", "TargetSummary", "ValidationReport", "op_change", "worst_exit_code"]

REPORT_SCHEMA_VERSION = "1.0"

OpCounts = tuple[tuple[str, int], ...]
# A node on a target, as winml-cli's analyze and the EP tables word it: the table has it; has it with a
# restriction stated in words, not checked (PORT204); lists the op but not this version or element type,
# or as not supported; does not name the op at all.
VERDICT_KINDS = ("supported", "partial", "unsupported", "unknown")
# `--fail-on KIND`: the kinds that fail the gate (PORT203)
FAIL_ON = {"partial": ("partial", "unsupported", "unknown"), "unsupported": ("unsupported", "unknown")}


def _live_text(live: dict[str, str]) -> str:
    """``; live (RUNTIME): VERDICT``, and where the runtime's answer was set against the offline one and
    they differ, on which ops."""
    if not live:
        return ""
    disagreements = live.get("disagreements", "0")
    differ = f"; offline and live disagree on {disagreements}" if disagreements not in ("0", "not compared") else ""
    return f"; live ({live.get('runtime', '?')}): {live.get('verdict', '?')}{differ}"


def _ops(counts: OpCounts, limit: int = 6) -> str:
    """``Erf x2, IsNaN x12`` (the first ``limit``, then how many more ops)."""
    shown = ", ".join(f"{op} x{n}" for op, n in counts[:limit])
    return shown + (f" and {len(counts) - limit} more ops" if len(counts) > limit else "")


@dataclass(frozen=True)
class TargetSummary:
    """One target's verdict on one model (``portable validate --target``): how many nodes its tables
    say it runs, the partition estimate, what falls back (or stops the load), and the live answer
    of its runtime where one was asked for."""

    name: str
    nodes: int
    supported: int  # nodes in the target's partitions
    partitions: int
    fallback: OpCounts  # ops of the nodes outside them
    falls_back: bool  # False: the runtime has no fallback, an unsupported node stops the load
    unsupported: OpCounts = ()  # ops the tables lack (op, version or type), whatever the shapes
    fixed_batch: tuple[int, int, OpCounts] | None = None  # (supported, partitions, fallback) with the batch fixed
    casts: int = 0  # values of an element type the target wants cast
    sources: tuple[str, ...] = ()  # repository@commit of the profile's table
    counts: OpCounts = ()  # nodes per verdict kind (VERDICT_KINDS order), by the tables alone
    live: tuple[tuple[str, str], ...] = ()  # the runtime's own answer: (key, value) pairs, "verdict" among them
    live_refusals: tuple[tuple[str, str, str], ...] = ()  # (op, node, the runtime's reason) of each node it refused
    live_blocking: str = ""  # why the runtime does not load the model at all (the QNN HTP's compile failure)

    @property
    def loads(self) -> bool:
        return self.supported == self.nodes

    @property
    def runs_little(self) -> bool:
        """The target takes under half the nodes (the rest fall back): the model does not run there as it is."""
        return self.falls_back and self.nodes > 0 and 2 * self.supported < self.nodes

    def line(self) -> str:
        """``qnn: 412/418 nodes, 3 partitions, fallback: Erf x2, IsNaN x4``; a target that takes under half the
        nodes says first that the model does not run there as it is (``nnapi: does not run there as it is: 3/426
        nodes, ...``)."""
        lead = "does not run there as it is: " if self.runs_little else ""
        head = f"{self.name}: {lead}{self.supported}/{self.nodes} nodes"
        if not self.falls_back:
            text = f"{head}, {'loads' if self.loads else 'does not load: ' + _ops(self.fallback)}"
        else:
            text = f"{head}, {self.partitions} partition{'' if self.partitions == 1 else 's'}"
            text += f", fallback: {_ops(self.fallback)}" if self.fallback else ", nothing falls back"
        if self.fixed_batch is not None:
            done, parts, rest = self.fixed_batch
            text += f"; with a fixed batch: {done}/{self.nodes} nodes, {parts} partition{'' if parts == 1 else 's'}"
            text += f", fallback: {_ops(rest)}" if rest else ""
        if self.casts:
            text += f"; {self.casts} value{'' if self.casts == 1 else 's'} to cast"
        if self.failing("partial"):  # every node plainly supported: the head says it
            text += "; by its tables: " + ", ".join(f"{n} {kind}" for kind, n in self.counts)
        return text + _live_text(dict(self.live))

    def failing(self, fail_on: str) -> int:
        """Nodes whose verdict fails ``--fail-on fail_on``."""
        return sum(n for kind, n in self.counts if kind in FAIL_ON[fail_on])

    def to_dict(self) -> dict[str, Any]:
        fixed = None
        if self.fixed_batch is not None:
            done, parts, rest = self.fixed_batch
            fixed = {"supported": done, "partitions": parts, "fallback": dict(rest)}
        return {"name": self.name, "line": self.line(), "nodes": self.nodes, "supported": self.supported,
                "partitions": self.partitions, "falls_back": self.falls_back, "loads": self.loads,
                "fallback": dict(self.fallback), "unsupported": dict(self.unsupported), "fixed_batch": fixed,
                "casts": self.casts, "verdicts": dict(self.counts) or None, "sources": list(self.sources),
                "live": dict(self.live) or None,
                **({"live_refusals": [{"op": o, "node": n, "reason": r} for o, n, r in self.live_refusals]}
                   if self.live_refusals else {}),
                **({"live_blocking": self.live_blocking} if self.live_blocking else {})}


@dataclass(frozen=True)
class ValidationReport:
    """The findings for one model (or why it could not be read: ``error``)."""

    path: str
    policy: Policy
    findings: tuple[Finding, ...] = ()
    error: str | None = None  # unreadable input: one line naming the problem
    model: dict[str, Any] = field(default_factory=dict)  # opset, producer, graph size
    suppressed: tuple[tuple[Finding, str], ...] = ()  # findings waived inline, with the reason
    rules: tuple[str, ...] = ()  # ids of the rules that ran
    targets: tuple[TargetSummary, ...] = ()  # one per target the policy names (`--target`)

    @property
    def counts(self) -> dict[str, int]:
        seen = Counter(f.severity.value for f in self.findings)
        return {sev.value: seen.get(sev.value, 0) for sev in Severity}

    def failing(self, *, strict: bool | None = None) -> tuple[Finding, ...]:
        strict = self.policy.strict if strict is None else strict
        floor = Severity.WARNING.rank if strict else Severity.ERROR.rank
        return tuple(f for f in self.findings if f.severity.rank >= floor)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failing()

    @property
    def exit_code(self) -> ExitCode:
        if self.error is not None:
            return ExitCode.ERROR
        return ExitCode.FINDINGS if self.failing() and not self.policy.exit_zero else ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "exit_code": int(self.exit_code),
            "error": self.error,
            "counts": self.counts,
            "rules": list(self.rules),
            "model": dict(self.model),
            "findings": [f.to_dict() for f in self.findings],
            "suppressed": [{**f.to_dict(), "reason": why} for f, why in self.suppressed],
        } | ({"targets": [t.to_dict() for t in self.targets]} if self.policy.targets else {})


def worst_exit_code(reports: Sequence[ValidationReport]) -> ExitCode:
    """The exit code of a run over several models: the worst of them."""
    return max((r.exit_code for r in reports), default=ExitCode.OK)


@dataclass(frozen=True)
class OpChange:
    """How a rewrite changed a model's op counts (``portable fix`` prints it, as onnxslim does)."""

    before: int
    after: int
    changes: tuple[tuple[str, int], ...]  # (op, after - before), largest change first

    def line(self, limit: int = 8) -> str:
        """``nodes 412 -> 398 (Identity -12, Constant -3, Cast +1)``."""
        parts = [f"{op} {delta:+d}" for op, delta in self.changes[:limit]]
        if len(self.changes) > limit:
            parts.append(f"{len(self.changes) - limit} more")
        return f"nodes {self.before} -> {self.after}" + (f" ({', '.join(parts)})" if parts else " (no op changed)")

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after, "changes": dict(self.changes)}


def op_change(before: Mapping[str, int], after: Mapping[str, int]) -> OpChange:
    ops: Iterable[str] = set(before) | set(after)
    deltas = [(op, after.get(op, 0) - before.get(op, 0)) for op in ops]
    changes = tuple(sorted(((op, d) for op, d in deltas if d), key=lambda item: (-abs(item[1]), item[0])))
    return OpChange(sum(before.values()), sum(after.values()), changes)
