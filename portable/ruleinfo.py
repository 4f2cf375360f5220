"""What a rule is, as data: the :class:`RuleInfo` record that each rule declares where it lives
(the model rules in ``portable.validators.rules``, the pre-export rules in
``portable.exporters.rules``) and that the catalogue (:mod:`portable.catalogue`) gathers.
Imports nothing above the base package, so every folder may import it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Literal

from portable.findings import Severity

__all__ = ["Phase", "RuleInfo", "summary_of"]

Phase = Literal["model", "pre-export", "pair"]


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
    phase: Phase = "model"  # "model": checks an ONNX file; "pre-export": the PyTorch code; "pair": two graphs

    def matches(self, key: str) -> bool:
        """True for the rule's id (any case) or name."""
        return key.upper() == self.id or key.lower() == self.name
