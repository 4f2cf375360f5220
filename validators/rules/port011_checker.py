"""PORT011 onnx-checker."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.rules.port010_self_contained import external_tensors

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
            onnx.checker.check_model(_without_external_data(ctx), full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            yield self.finding(error=_first_lines(str(exc)))
        except ValueError as exc:  # e.g. a model over protobuf's 2 GiB limit
            yield self.finding(error=_first_lines(str(exc)))


def _without_external_data(ctx: ModelContext) -> onnx.ModelProto:
    """The checker stats external-data paths (relative to the working directory). We never
    let it: external initializers become graph inputs of the same type and shape in a copy.
    PORT010 reports them."""
    names = {name for _, name, _ in external_tensors(ctx)}
    if not names:
        return ctx.proto
    copy = onnx.ModelProto()
    copy.CopyFrom(ctx.proto)
    graph = copy.graph
    kept = [t for t in graph.initializer if t.name not in names]
    moved = [t for t in graph.initializer if t.name in names]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    inputs = {v.name for v in graph.input}
    graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                       for t in moved if t.name not in inputs)
    return copy


def _first_lines(text: str, limit: int = 400) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    joined = " ".join(lines[:3])
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."
