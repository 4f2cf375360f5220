"""PORT001 opset-version."""

from __future__ import annotations

from collections.abc import Iterator

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["OpsetVersion"]


class OpsetVersion(Rule):
    """The default-domain (``ai.onnx``) opset is exactly the policy's (18).

    *Why*: runtimes and compilers support a fixed range of opsets, and an op's
    meaning can change between versions (``Split``, ``Resize``, reductions). One
    opset across every model keeps behaviour predictable; down-conversion after
    the fact is unreliable (``Gelu`` and ``Attention`` have no adapter).

    *Bad*: ``opset_import { domain: "" version: 20 }`` or no default-domain import.

    *Fix*: export at the target opset directly:
    ``torch.onnx.export(..., dynamo=True, opset_version=18)`` (``portable export`` does).
    """

    id = "PORT001"
    name = "opset-version"
    severity = Severity.ERROR
    message = "default-domain opset is {found}, the policy requires {wanted}"
    hint = "convert this file: `portable fix MODEL -o OUT.onnx`; or export with opset_version={wanted} (portable export does)"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        wanted = ctx.policy.opset
        found = ctx.opset("")
        if found != wanted:
            yield self.finding(found="missing" if found is None else found, wanted=wanted,
                               hint=self.hint.format(wanted=wanted))
        for function in ctx.proto.functions:
            for entry in function.opset_import:
                if entry.domain in ("", "ai.onnx") and entry.version != wanted:
                    yield self.finding(Location(graph=f"function:{function.domain}.{function.name}"),
                                       found=entry.version, wanted=wanted, hint=self.hint.format(wanted=wanted))
