"""PORT011 onnx-checker."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["OnnxChecker"]


class OnnxChecker(Rule):
    """``onnx.checker.check_model(model, full_check=True)`` passes.

    The checker's own message becomes the finding's message. It runs on the model in
    memory, so it never opens external-data files.

    *Why*: a model that breaks the ONNX spec (wrong attribute type, an input used
    before it is produced, duplicate names, a shape inference conflict) loads in no
    runtime, or loads differently in each.

    *Bad*: a node whose input is never produced; an attribute ``axis`` given as a string.

    *Fix*: regenerate the model with a current exporter; the message names what to fix.
    """

    id = "PORT011"
    name = "onnx-checker"
    severity = Severity.ERROR
    message = "onnx.checker: {error}"
    hint = "fix what the checker names; regenerate the model with a current exporter"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        try:
            onnx.checker.check_model(ctx.proto, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            yield self.finding(error=_first_lines(str(exc)))
        except ValueError as exc:  # e.g. a model over protobuf's 2 GiB limit
            yield self.finding(error=_first_lines(str(exc)))


def _first_lines(text: str, limit: int = 400) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    joined = " ".join(lines[:3])
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."
