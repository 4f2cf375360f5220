"""What every rule is: an id, a name, a default severity, a message template and a fix hint;
:meth:`Rule.info` is its record in the rule catalogue (:mod:`portable.catalogue`)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, ClassVar

from portable.findings import Finding, Location, Severity
from portable.ruleinfo import RuleInfo, summary_of
from portable.validators.context import ModelContext

__all__ = ["Rule"]


class Rule:
    """Base class. Subclasses set the class attributes and implement :meth:`check`.

    The docstring of a rule is its documentation (``portable explain``): it says
    *Why*, shows a *Bad* case and the *Fix*.
    """

    id: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    message: ClassVar[str]  # str.format template; fields come from check()
    hint: ClassVar[str]
    opt_in: ClassVar[bool] = False  # runs only when selected (or enabled by the policy)
    needs_targets: ClassVar[bool] = False  # runs only when the policy names targets (PORT201+)

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(
        self,
        location: Location | None = None,
        *,
        severity: Severity | None = None,
        hint: str | None = None,
        **fields: Any,
    ) -> Finding:
        return Finding(
            rule_id=self.id,
            rule_name=self.name,
            severity=severity or self.severity,
            message=self.message.format(**fields),
            hint=hint or self.hint,
            location=location or Location(),
        )

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return summary_of(cls.doc(), default=cls.name)

    @classmethod
    def info(cls) -> RuleInfo:
        """The rule's record in the catalogue."""
        return RuleInfo(id=cls.id, name=cls.name, severity=cls.severity, summary=cls.summary(), docs=cls.doc(),
                        hint=cls.hint, message=cls.message, opt_in=cls.opt_in, phase="model")
