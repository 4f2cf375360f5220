"""Validating many models: in worker processes, results in input order.

A model that kills its worker (a crash in a native library, an injected fault) is
reported as unreadable (exit 3) and the others are still validated: when the pool
breaks, the unfinished models are re-run one process each, so the culprit is known.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from portable.discovery import Target
from portable.policy import Policy
from portable.report import ValidationReport

if TYPE_CHECKING:
    from portable.validators.rules import Rule

__all__ = ["validate_many"]


def _one(target: Target, policy: Policy, rules: tuple[Rule, ...]) -> ValidationReport:
    if target.error is not None:
        return ValidationReport(path=target.path, policy=policy, error=target.error, rules=tuple(r.id for r in rules))
    from portable.validators import validate

    return validate(target.path, policy, rules=rules)


def _isolated(target: Target, policy: Policy, rules: tuple[Rule, ...]) -> ValidationReport:
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=1) as pool:
        try:
            return pool.submit(_one, target, policy, rules).result()
        except BrokenProcessPool:
            return ValidationReport(path=target.path, policy=policy, rules=tuple(r.id for r in rules),
                                    error="the validator's worker process died on this model (crash in a native library?)")


def _preload() -> None:
    """Import what every worker needs once, in the parent: forked workers then share it
    instead of each paying onnxscript's and onnx-ir's import (about a second of CPU)."""
    import onnx_ir  # noqa: F401
    import onnxscript.optimizer  # noqa: F401

    import portable.validators.shapes  # noqa: F401


def validate_many(targets: Sequence[Target], policy: Policy, jobs: int = 1) -> Iterator[ValidationReport]:
    """Yield one report per target, in input order, using ``jobs`` processes. The rules are
    chosen once for the run (workers receive them)."""
    from portable.validators import select_rules

    rules = tuple(select_rules(policy))
    if jobs <= 1 or len(targets) <= 1:
        for target in targets:
            yield _one(target, policy, rules)
        return
    yield from _pooled(targets, policy, rules, jobs)


def _pooled(targets: Sequence[Target], policy: Policy, rules: tuple[Rule, ...], jobs: int) -> Iterator[ValidationReport]:
    # concurrent.futures.process (and multiprocessing) cost ~10 ms to import: only here, not for one model.
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    _preload()
    done = 0
    chunk = max(1, min(16, len(targets) // (jobs * 4)))
    try:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for report in pool.map(_one, targets, [policy] * len(targets), [rules] * len(targets), chunksize=chunk):
                done += 1
                yield report
    except BrokenProcessPool:
        for target in targets[done:]:
            yield _isolated(target, policy, rules)
