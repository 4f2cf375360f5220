"""The rule catalogue: one :class:`~portable.ruleinfo.RuleInfo` per rule, model rules (PORT001+),
pre-export rules (PORT101+) and pair rules (PORT301+, a text-generation export's two graphs), which
formatters and ``portable rules`` / ``portable explain`` read.

The records are declared where the rules live (``portable.validators.rules.RULE_INFOS``,
``portable.exporters.rules.PRECHECK_RULES``): :func:`catalogue` imports them on first use, so
this base package never imports the folders above it at module level; and since the rules
import only :mod:`portable.ruleinfo`, not this module, there is no cycle even through that
function-level import.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

from portable.ruleinfo import RuleInfo

__all__ = ["Catalogue", "catalogue"]


@dataclass(frozen=True)
class Catalogue:
    """Every rule, in listing order (model rules, then pre-export rules, then pair rules)."""

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
    from portable.validators.pairs import PAIR_RULE_INFOS
    from portable.validators.rules import RULE_INFOS

    return Catalogue(RULE_INFOS + tuple(PRECHECK_RULES.values()) + PAIR_RULE_INFOS)
