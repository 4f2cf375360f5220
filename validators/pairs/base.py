"""What every pair rule is: a :class:`~portable.validators.rules.base.Rule` record (id, name, severity,
message, hint, docstring with *Why* / *Bad* / *Fix*) whose check reads a :class:`PairContext` and
says which of the two graphs each finding belongs to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from portable.findings import Finding
from portable.ruleinfo import RuleInfo
from portable.validators.pairs.context import GraphSide, PairContext
from portable.validators.rules.base import Rule

__all__ = ["PairFinding", "PairRule"]

PairFinding = tuple[GraphSide, Finding]  # the graph whose report holds the finding, and the finding


class PairRule(Rule):
    """Base class of the pair rules (PORT301+): implement :meth:`check_pair`."""

    phase: ClassVar[str] = "pair"

    def check_pair(self, ctx: PairContext) -> Iterator[PairFinding]:
        raise NotImplementedError

    @classmethod
    def info(cls) -> RuleInfo:
        return RuleInfo(id=cls.id, name=cls.name, severity=cls.severity, summary=cls.summary(), docs=cls.doc(),
                        hint=cls.hint, message=cls.message, opt_in=cls.opt_in, phase="pair")
