"""What every rule is: an id, a name, a default severity, a message template and a fix hint."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, ClassVar

from portable.findings import Finding, Location, Severity
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
        first = cls.doc().split("\n\n")[0] if cls.__doc__ else cls.name
        return " ".join(first.split())
