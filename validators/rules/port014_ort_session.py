"""PORT014 ort-session (opt-in)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule
from portable.validators.rules.port010_self_contained import external_tensors

__all__ = ["OrtSession", "session_error"]

# onnxruntime's wording when no kernel matches a node: "... for AveragePool(1) node with name ''"
_NO_KERNEL = re.compile(r"implementation for (?P<op>[\w.:]+)\((?P<version>\d+)\) node with name '(?P<name>[^']*)'")


class OrtSession(Rule):
    """ONNX Runtime creates an inference session on the CPU execution provider (opt-in: ``--ort``).

    What it catches that the static rules do not: a node with no CPU kernel for its op,
    opset version and input types (old-opset models: ``Add(6)``, ``AveragePool(1)``;
    ``MaxPool`` on ``int64``), and onnxruntime's own graph checks (type constraints,
    initialisation failures of a kernel). The static rules ask the ONNX spec; this asks a
    runtime, so it is the check to turn on in CI for models meant for onnxruntime.

    Cost: the session is created once, with graph optimizations off (``ORT_DISABLE_ALL``:
    kernels are still looked up, nothing is fused or folded), on the CPU provider, and
    never run, and deleted at once. onnxruntime reads the model file itself (an in-memory
    model is handed over serialized), so the weights are not copied in this process first;
    a model with external data is skipped (PORT010 reports it), so no path named in the
    model is ever opened. onnxruntime's logger is kept quiet: its error is the finding's
    message.

    *Why*: the checker validates the spec; a runtime also needs kernels for every op
    and type, and checks things the checker does not.

    *Bad*: ``MaxPool`` on ``int64`` input, which ONNX allows and the CPU provider lacks;
    an opset-6 ``Add``, which today's onnxruntime has no kernel for.

    *Fix*: what the runtime's message names: usually a type or an op to change, or an
    export at the target opset (``portable export``; ``onnx.version_converter`` for an old file).
    """

    id = "PORT014"
    name = "ort-session"
    severity = Severity.ERROR
    message = "onnxruntime could not create a CPU session: {error}"
    hint = "change the op or type the runtime names; check with a current onnxruntime"
    opt_in = True

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        if any(True for _ in external_tensors(ctx)):
            return
        error = session_error(ctx.source())
        if error is None:
            return
        match = _NO_KERNEL.search(error)
        if match is None:
            yield self.finding(error=error[:400])
            return
        hint = (f"onnxruntime has no CPU kernel for {match['op']}-{match['version']} with these input types: "
                f"re-export at opset {ctx.policy.opset} (or onnx.version_converter) or change the type")
        yield self.finding(_node_named(ctx, match), hint=hint, error=error[:400])


def session_error(model: str | bytes) -> str | None:
    """Why onnxruntime cannot create a CPU session for ``model`` (a file or the serialized
    bytes; one line), or None if it can."""
    from portable.runners.sessions import FATAL, SessionFailed, SessionSpec, session_from_onnx

    # optimizations off (kernels are still looked up), no arena: the session is never run
    spec = SessionSpec(optimize=False, log_severity=FATAL, memory_arena=False)
    try:
        session = session_from_onnx(model, spec)
    except SessionFailed as exc:  # every ORT failure is this finding; the report names the file already
        return exc.detail
    del session  # the session holds a copy of every weight: free it before the next rule
    return None


def _node_named(ctx: ModelContext, match: re.Match[str]) -> Location:
    """The node a missing-kernel error names (by name, else the first of its op), else the graph."""
    main = ctx.scopes[0]
    op, name = match["op"], match["name"]
    for index, node in enumerate(main.body.node):
        if (node.name == name) if name else (node.op_type == op):
            return ctx.location(main, index, node)
    return Location()
