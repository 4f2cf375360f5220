"""Validating a prefill/decode pair: each graph through the model rules, then the pair rules over both.

Each graph gets its own :class:`~portable.report.ValidationReport` (so every formatter, SARIF's file
locations included, renders a pair as two files); a pair finding goes into the report of the graph it
is about. ``--select``/``--ignore`` take model and pair rule ids alike; a selection of pair rules only
runs no model rule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

from portable.errors import InputError, UsageError
from portable.findings import Finding
from portable.policy import Policy
from portable.report import ValidationReport
from portable.validators.context import ModelContext
from portable.validators.engine import select_rules, validate_proto
from portable.validators.loading import LoadedModel, load_model_file
from portable.validators.pairs import PAIR_RULES, PairRule
from portable.validators.pairs.context import GraphSide, PairContext
from portable.validators.rules import ALL_RULES

__all__ = ["model_policy", "pair_reports", "select_pair_rules", "validate_pair", "weights_fingerprint"]


def select_pair_rules(policy: Policy) -> tuple[Policy, list[PairRule]]:
    """The policy for the model rules (pair ids taken out of its selection) and the pair rules it turns on."""
    pair_ids = {r.id for r in PAIR_RULES}
    unknown = sorted((set(policy.select) | set(policy.ignore)) - pair_ids - {r.id for r in ALL_RULES})
    if unknown:
        raise UsageError(f"unknown rule id(s): {', '.join(unknown)} (see `portable rules`)")
    chosen = [cls() for cls in PAIR_RULES
              if (cls.id in policy.select if policy.select else not cls.opt_in) and cls.id not in policy.ignore]
    model_select = tuple(i for i in policy.select if i not in pair_ids)
    model = policy.with_(select=model_select, ignore=tuple(i for i in policy.ignore if i not in pair_ids))
    return model, chosen


def validate_pair(prefill: str | Path, decode: str | Path, policy: Policy | None = None, *,
                  context: int | None = None, names: tuple[str, str] | None = None
                  ) -> tuple[ValidationReport, ValidationReport]:
    """The reports of ``prefill`` and ``decode``: model rules on each, pair rules on both. ``context``: the
    C the cache must hold (default: the prefill graph's attention mask length); ``names``: the paths the
    reports give (default: the files'; an export validates staged files under their targets' names). An
    unreadable file gives its report an ``error`` (exit 3) and the pair rules do not run."""
    policy = policy or Policy()
    model_policy, pair_rules = select_pair_rules(policy)
    only_pair = bool(policy.select) and not model_policy.select
    model_rules = [] if only_pair else select_rules(model_policy)
    with _loaded((prefill, decode)) as loaded:
        if isinstance(loaded, ValidationReport):
            return _unreadable(loaded, (prefill, decode), policy)
        shown = names or tuple(m.path for m in loaded)
        reports = [validate_proto(m.proto, name, policy, m.size, rules=model_rules, lean=m.lean)
                   for m, name in zip(loaded, shown)]
        first, second = (ModelContext(m.proto, name, policy, m.size, m.lean) for m, name in zip(loaded, shown))
        ctx = PairContext(first, second, policy, context)
        found = _run_pair(pair_rules, ctx)
        prints = [weights_fingerprint(side) for side in ctx.sides]  # while the files are mapped
    ids = tuple(r.id for r in pair_rules)
    prefill_report, decode_report = (
        replace(r, findings=_sorted(r.findings + found[side.role]), rules=r.rules + ids,
                model={**r.model, "pair_role": side.role, "weights_fingerprint": print_})
        for r, side, print_ in zip(reports, ctx.sides, prints))
    return prefill_report, decode_report


@contextmanager
def _loaded(paths: Sequence[str | Path]) -> Iterator[list[LoadedModel] | ValidationReport]:
    """Both files loaded (lean), released at the end; the first unreadable one as an error report."""
    with ExitStack() as stack:
        loaded = []
        for path in paths:
            try:
                model = load_model_file(path)
            except InputError as exc:
                yield ValidationReport(path=str(path), policy=Policy(), error=exc.message)
                return
            stack.callback(model.close)
            loaded.append(model)
        yield loaded


def _unreadable(bad: ValidationReport, paths: Sequence[str | Path], policy: Policy
                ) -> tuple[ValidationReport, ValidationReport]:
    reports = [replace(bad, policy=policy) if bad.path == str(p) else
               ValidationReport(path=str(p), policy=policy, error=f"not checked: the other graph of the pair, {bad.path}, "
                                f"cannot be read") for p in paths]
    return reports[0], reports[1]


def _run_pair(rules: Sequence[PairRule], ctx: PairContext) -> dict[str, tuple[Finding, ...]]:
    found: dict[str, list[Finding]] = {side.role: [] for side in ctx.sides}
    for rule in rules:
        for side, finding in rule.check_pair(ctx):
            severity = ctx.policy.severity_for(rule.id, finding.severity) if finding.severity == rule.severity \
                else finding.severity
            found[side.role].append(replace(finding, severity=severity))
    return {role: tuple(items) for role, items in found.items()}


def _sorted(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: (f.rule_id, f.location.sort_key(), f.message)))


def weights_fingerprint(side: GraphSide) -> str:
    """``sha256:<hex>`` over the graph's weights (PORT301's: dtype, dims and bytes, in sorted order, names
    left out), the same for both graphs of a pair that passes PORT301."""
    digest = hashlib.sha256()
    for dtype, dims, value in sorted(w.key for w in side.weights):
        digest.update(f"{dtype} {list(dims)} {value}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def model_policy(policy: Policy) -> Policy:
    """The policy for single model files beside pairs (``portable validate PATHS --pair A B``): the pair rules'
    ids taken out of ``--select``/``--ignore``; a selection of pair rules only is a usage error there."""
    model, _ = select_pair_rules(policy)
    if policy.select and not model.select:
        raise UsageError(f"--select {','.join(policy.select)}: pair rules run on --pair PREFILL DECODE only, "
                         "not on the other paths given")
    return model


def pair_reports(pairs: Sequence[tuple[str, str]], policy: Policy, context: int | None) -> Iterator[ValidationReport]:
    """Each pair's two reports, in turn (:func:`validate_pair`)."""
    for prefill, decode in pairs:
        yield from validate_pair(prefill, decode, policy, context=context)
