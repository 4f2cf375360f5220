"""The formatter interface: reports in, text out. Formatters never see models."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from portable.report import ValidationReport

__all__ = ["Formatter"]


class Formatter(ABC):
    """Renders a run's reports (one per model) as one document."""

    name: str

    @abstractmethod
    def render(self, reports: Sequence[ValidationReport]) -> str:
        """The whole document, ending with a newline."""
