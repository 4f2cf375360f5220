"""The rule catalogue: one :class:`RuleInfo` per rule, model rules (PORT001+) and pre-export
rules (PORT101+), which formatters and ``portable rules`` / ``portable explain`` read.

The records are declared where the rules live (``portable.validators.rules.RULE_INFOS``,
``portable.exporters.rules.PRECHECK_RULES``): :func:`catalogue` imports them on first use,
so that this base package never imports the folders above it at module level.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from portable.findings import Severity

__all__ = ["Catalogue", "Phase", "RuleInfo", "catalogue", "summary_of"]

Phase = Literal["model", "pre-export"]


def summary_of(docs: str, default: str = "") -> str:
    """The first paragraph of a rule's documentation, on one line."""
    first = inspect.cleandoc(docs).split("\n\n")[0] if docs else default
    return " ".join(first.split())


@dataclass(frozen=True)
class RuleInfo:
    """What is known about a rule without running it."""

    id: str  # PORT001
    name: str  # no-control-flow
    severity: Severity  # the default one; a policy may change it
    summary: str  # one line: what the rule checks
    docs: str  # the documentation: *Why*, *Bad* and *Fix*
    hint: str  # the general remedy a finding carries
    message: str = ""  # the findings' message template; "" when each case words its own
    opt_in: bool = False  # runs only when selected or enabled by the policy
    phase: Phase = "model"  # "model": checks an ONNX file; "pre-export": the PyTorch code

    def matches(self, key: str) -> bool:
        """True for the rule's id (any case) or name."""
        return key.upper() == self.id or key.lower() == self.name


@dataclass(frozen=True)
class Catalogue:
    """Every rule, in listing order (model rules, then pre-export rules)."""

    rules: tuple[RuleInfo, ...]

    def __iter__(self) -> Iterator[RuleInfo]:
        return iter(self.rules)

    def get(self, key: str) -> RuleInfo | None:
        """A rule by id (``PORT004``, any case) or name (``no-control-flow``), or None."""
        return next((r for r in self.rules if r.matches(key)), None)

    def __getitem__(self, key: str) -> RuleInfo:
        rule = self.get(key)
        if rule is None:
            raise KeyError(key)
        return rule


@functools.cache
def catalogue() -> Catalogue:
    """Every rule's record, from where it is declared (imported here, not at module level:
    the validators and the exporter sit above this package). No torch is imported."""
    from portable.exporters.rules import PRECHECK_RULES
    from portable.validators.rules import RULE_INFOS

    return Catalogue(RULE_INFOS + tuple(PRECHECK_RULES.values()))
