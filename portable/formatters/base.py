"""The formatter interface: reports in, text out. Formatters never see models."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from portable.findings import Finding, Severity, SourceLocation
from portable.frames import is_library
from portable.report import ValidationReport

__all__ = ["Formatter", "annotated_source", "message_with_hint"]


def annotated_source(finding: Finding) -> SourceLocation | None:
    """The source line an annotation may point at: the user's own file, never an installed library's
    (``site-packages/...``, the standard library), which a code-scanning view cannot open in the
    user's repository. ``None``: annotate the model file instead."""
    source = finding.location.source
    return None if source is None or is_library(source.file) else source


def message_with_hint(finding: Finding) -> str:
    """The message as one-line formats print it: a library source line in the text (the annotation
    points at the model), and the fix hint unless the finding is info (allowed behaviour)."""
    text = finding.message
    source = finding.location.source
    if source is not None and annotated_source(finding) is None:
        text += f" (at {source})"
    return text if finding.severity is Severity.INFO else f"{text} (fix: {finding.hint})"


class Formatter(ABC):
    """Renders a run's reports (one per model) as one document."""

    name: str

    @abstractmethod
    def render(self, reports: Sequence[ValidationReport]) -> str:
        """The whole document, ending with a newline."""
