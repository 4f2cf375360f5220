"""PORT014 ort-session (opt-in)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from portable.findings import Finding, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.rules.port010_self_contained import external_tensors

__all__ = ["OrtSession"]


class OrtSession(Rule):
    """ONNX Runtime creates an inference session on the CPU execution provider (opt-in: ``--ort``).

    Off by default because it imports onnxruntime and builds a session, which costs
    time and memory on large models. The session is created from the bytes in memory;
    a model with external data is skipped (PORT010 reports it), so no path named in the
    model is ever opened.

    *Why*: the checker validates the spec; a runtime also needs kernels for every op
    and type, and catches problems the checker does not (type constraints, fusions).

    *Bad*: ``MaxPool`` on ``int64`` input, which ONNX allows and the CPU provider lacks.

    *Fix*: what the runtime's message names: usually a type or an op to change.
    """

    id = "PORT014"
    name = "ort-session"
    severity = Severity.ERROR
    message = "onnxruntime could not create a CPU session: {error}"
    hint = "change the op or type the runtime names; check with a current onnxruntime"
    opt_in = True
    needs_all_weights: ClassVar[bool] = True  # the session is built from the whole serialized model

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        if any(True for _ in external_tensors(ctx)):
            return
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            ort.InferenceSession(ctx.proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - every ORT failure is this finding
            text = " ".join(str(exc).split())
            yield self.finding(error=text[:400])
