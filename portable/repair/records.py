"""What a fix run is asked for and what it gives: frozen records, no work.

:class:`Plan` (the user's request, resolved once), :class:`Remedy` (one entry of the remedies table:
a name and the pass it builds), :class:`RemedyReport` (what one remedy did), :class:`FixResult` (what the
run did, proved, found and wrote) and :class:`FixFailed` (nothing was written, and why).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import ExitCode, FindingsError
from portable.findings import Finding
from portable.policy import Policy
from portable.repair.proof import Proof
from portable.report import OpChange, ValidationReport, op_change

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["FIX_SCHEMA", "FixFailed", "FixResult", "Plan", "Remedy", "RemedyReport"]

FIX_SCHEMA = "portable.fix/1"


@dataclass(frozen=True)
class Plan:
    """What the user asked for, resolved once."""

    source: Path
    output: Path
    batch: str | int
    dims: dict[str, int]
    policy: Policy
    canonical_names: bool
    inputs: Path | None = None  # the user's inputs for the proof (.npz), instead of seeded ones
    approximate_gelu: bool = False  # --approximate-gelu: exact GELUs in the tanh form (not exact; proven in float64)


@dataclass(frozen=True)
class Remedy:
    """One remedy: its name, and the pass it runs on the current model (None: not asked for)."""

    name: str
    build: Callable[[Plan, ir.Model], ir.passes.PassBase | None]
    fatal: bool = False  # refused: nothing can be done safely (e.g. external data outside the folder)
    # The report's detail from the model before and after the pass (applied or unchanged), when it has one:
    # what a rewrite changed on the targets, and what it left and why.
    detail: Callable[[Plan, ir.Model, ir.Model], str] | None = None


@dataclass(frozen=True)
class RemedyReport:
    """What one remedy did: ``applied``, ``unchanged``, ``skipped`` (not asked for), ``refused`` or ``failed``."""

    name: str
    status: str
    detail: str = ""
    nodes_before: dict[str, int] = field(default_factory=dict)
    nodes_after: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "nodes_before": dict(self.nodes_before), "nodes_after": dict(self.nodes_after)}


@dataclass(frozen=True)
class FixResult:
    """What the fix did, proved, found and wrote (``written``: False under ``strict`` with findings)."""

    source: Path
    path: Path
    written: bool
    opset_before: int | None
    opset_after: int | None
    remedies: tuple[RemedyReport, ...]
    proof: Proof | None
    report: ValidationReport | None
    bytes_internalized: int = 0
    dims_fixed: dict[str, int | str] = field(default_factory=dict)
    fingerprint: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    # per ``--target``: the partition estimate of the original and of the fixed model (``before``, ``after``), and
    # with the batch fixed where the target needs fixed sizes and the batch is a symbol (None otherwise)
    partitions: dict[str, dict[str, int | None]] = field(default_factory=dict)

    @property
    def ops(self) -> OpChange | None:
        """The op counts' change over the whole fix (the first remedy's input, the last one's output);
        None when no remedy counted nodes (the fix stopped before the remedies)."""
        before = next((r.nodes_before for r in self.remedies if r.nodes_before), None)
        after = next((r.nodes_after for r in reversed(self.remedies) if r.nodes_after), None)
        return None if before is None or after is None else op_change(before, after)

    @property
    def remaining(self) -> tuple[Finding, ...]:
        """Findings that fail the contract after every remedy: not fixable automatically."""
        return self.report.failing() if self.report is not None else ()

    @property
    def ok(self) -> bool:
        """Written, honouring the contract, and proven at every batch the proof tried: a batch size the original
        itself cannot run at (``proof.skipped``) means dim 0 is not a free batch, a finding (exit 1)."""
        proven = self.proof is None or (self.proof.ok and not self.proof.skipped)
        return self.written and not self.remaining and proven

    @property
    def unrunnable_ops(self) -> tuple[str, ...]:
        """The custom-domain ops left (PORT002) that ONNX Runtime could not load the original for: the proof
        cannot run because of a finding of the model (exit 1), not of fix or of its input (exit 3)."""
        why = self.proof.unavailable if self.proof is not None else None
        if not why or "cannot load the original" not in why:
            return ()
        ort = why.split("; nor can onnx.reference")[0]  # ONNX Runtime's words alone, not the fallback's
        ops = [f.location.op_type for f in self.remaining if f.rule_id == "PORT002" and f.location.op_type]
        return tuple(op for op in ops if _unloadable(op, ort))

    @property
    def exit_code(self) -> ExitCode:
        if self.proof is not None and self.proof.unavailable and not self.unrunnable_ops:
            return ExitCode.ERROR
        return ExitCode.OK if self.ok else ExitCode.FINDINGS

    @property
    def manifest_path(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": FIX_SCHEMA, "source": str(self.source), "path": str(self.path), "written": self.written,
            "manifest": str(self.manifest_path) if self.written else None, "ok": self.ok,
            "exit_code": int(self.exit_code), "fingerprint": self.fingerprint,
            "opset": {"before": self.opset_before, "after": self.opset_after},
            "bytes_internalized": self.bytes_internalized, "dims_fixed": dict(self.dims_fixed),
            "remedies": [r.to_dict() for r in self.remedies],
            "ops": self.ops.to_dict() if self.ops is not None else None,
            "proof": self.proof.to_dict() if self.proof is not None else None,
            "remaining": [f.to_dict() for f in self.remaining],
            "validation": self.report.to_dict() if self.report is not None else None,
            "timings": dict(self.timings),
            "partitions": {name: dict(counts) for name, counts in self.partitions.items()},
        }


def _unloadable(op: str, ort: str) -> bool:
    """Whether ONNX Runtime's load error ``ort`` says it has nothing for ``op`` (``domain::name``): its own
    phrases for an unknown domain, an unregistered op or a missing kernel, naming that domain or op."""
    domain, _, name = op.partition("::")
    if f"No opset import for domain '{domain}'" in ort:
        return True
    return name in ort and ("is not a registered function/op" in ort or f"implementation for {name}(" in ort)


class FixFailed(FindingsError):
    """Nothing was written: a refused remedy, a failed proof (exit 1), or a proof the original
    cannot run (exit 3; exit 1 when a custom-domain op ONNX Runtime cannot load is why, see
    :attr:`FixResult.unrunnable_ops`). ``result`` holds what was done and found up to there."""

    def __init__(self, message: str, result: FixResult) -> None:
        super().__init__(message, path=str(result.source))
        self.result = result
        self.exit_code = result.exit_code if result.exit_code != ExitCode.OK else ExitCode.FINDINGS
