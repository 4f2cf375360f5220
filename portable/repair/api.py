"""``portable.fix``: an ONNX model from elsewhere in, a portable one out where that is safe, proven equivalent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from portable.errors import UsageError
from portable.policy import Policy, load_policy
from portable.progress import Phases
from portable.repair.records import FixResult, Plan

__all__ = ["fix", "parse_batch"]


def fix(model: str | Path, output: str | Path, *, batch: str | int = "dynamic", dims: Mapping[str, int] | None = None,
        opset: int | None = None, policy: Policy | None = None, force: bool = False, verify: bool = True,
        strict: bool = False, canonical_names: bool = False, inputs: str | Path | None = None,
        quiet: bool = True, approximate_gelu: bool = False) -> FixResult:
    """Make the model at ``model`` portable where that is safe, prove it, write it to ``output``.

    ``inputs``: an ``.npz`` of the model's inputs (keys: input names, or ``arr_0``... in order) that
    the proof runs on instead of seeded random ones (for indices or shapes fed as data).
    ``approximate_gelu``: write each exact GELU in its tanh form (``Erf`` is missing from the QNN and NNAPI
    tables); not exact, so the proof judges it by float64 references and reports how far the outputs moved.
    Returns the result when the proof holds (``result.remaining``: findings no remedy
    addresses; then ``result.ok`` is False and, under ``strict``, nothing is written).
    Raises :class:`~portable.repair.records.FixFailed` (nothing written) when a remedy must be refused or the
    proof fails, :class:`portable.errors.UsageError` for bad arguments, and
    :class:`portable.errors.InputError` for an unreadable model.
    """
    from portable.repair.run import run

    plan = replace(_plan(model, output, batch, dims, opset, policy, strict, canonical_names, inputs),
                   approximate_gelu=bool(approximate_gelu))
    return run(plan, Phases(quiet), verify=verify, force=force)


def parse_batch(batch: str | int) -> str | int:
    """``dynamic`` or a positive integer (the exporter's own parser)."""
    from portable.exporters.inputs import parse_batch as parse

    return parse(batch)


def _plan(model: str | Path, output: str | Path, batch: str | int, dims: Mapping[str, int] | None,
          opset: int | None, policy: Policy | None, strict: bool, canonical_names: bool,
          inputs: str | Path | None) -> Plan:
    batch = parse_batch(batch)
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int) or opset < 1):
        raise UsageError(f"bad opset {opset!r}: expected a positive integer")
    policy = policy or load_policy()
    changes: dict[str, Any] = {"strict": policy.strict or strict}
    if opset is not None:
        changes["opset"] = opset
    if isinstance(batch, int):
        changes["batch"] = "static"
    return Plan(Path(model), Path(output), batch, dict(dims or {}), policy.with_(**changes), canonical_names,
                Path(inputs) if inputs is not None else None)
