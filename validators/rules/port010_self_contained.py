"""PORT010 self-contained."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Location, Severity
from portable.validators.context import ModelContext
from portable.validators.rules.base import Rule

__all__ = ["SelfContained", "external_tensors"]


def _external(tensor: onnx.TensorProto) -> str | None:
    if tensor.data_location != onnx.TensorProto.EXTERNAL and not tensor.external_data:
        return None
    entries = {e.key: e.value for e in tensor.external_data}
    return entries.get("location", "?")


def external_tensors(ctx: ModelContext) -> Iterator[tuple[Location, str, str]]:
    """(location, tensor name, declared external path) for every external-data tensor."""
    for scope in ctx.scopes:
        body = scope.body
        if isinstance(body, onnx.GraphProto):
            tensors = [*body.initializer, *(s.values for s in body.sparse_initializer)]
            for tensor in tensors:
                where = _external(tensor)
                if where is not None:
                    yield Location(graph=scope.path, value=tensor.name), tensor.name, where
        for index, node in enumerate(body.node):
            for attr in node.attribute:
                for tensor in [attr.t] if attr.type == onnx.AttributeProto.TENSOR else list(attr.tensors):
                    where = _external(tensor)
                    if where is not None:
                        yield ctx.location(scope, index, node, tensor.name), tensor.name, where


class SelfContained(Rule):
    """The model is one file: no external data, and under the policy's size limit.

    The validator never opens an external-data path: it reads only the declared
    location from the model.

    *Why*: external data splits a model into several files that must travel
    together, and a path inside a model file (``../../etc/passwd``) is something a
    deployment should never follow. Protobuf cannot hold more than 2 GiB inline.

    *Bad*: ``initializer { name: "w" data_location: EXTERNAL external_data { key: "location" value: "w.bin" } }``.

    *Fix*: save with the weights inline: ``onnx.save(model, path, save_as_external_data=False)``
    or ``torch.onnx.export(..., external_data=False)``; shrink the model (fp16) to fit under 2 GiB.
    """

    id = "PORT010"
    name = "self-contained"
    severity = Severity.ERROR
    message = "{what}"
    hint = "inline the weights: `portable fix MODEL -o OUT.onnx` (or save with external_data=False)"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        if not ctx.policy.external_data:
            yield from self._external(ctx)
        size = ctx.size if ctx.size is not None else ctx.proto.ByteSize()
        limit = ctx.policy.max_size_bytes
        if size > limit:
            yield self.finding(what=f"model is {size:,} bytes, over the policy's limit of {limit:,} bytes",
                               hint="reduce precision (fp16/bf16) or the model's size; the limit is max-size in the policy")

    def _external(self, ctx: ModelContext) -> Iterator[Finding]:
        """One finding per external data file (not per tensor: 17 tensors in one ``.data`` file are one
        problem), at the first tensor that names it."""
        by_file: dict[str, list[tuple[Location, str]]] = {}
        for loc, name, where in external_tensors(ctx):
            by_file.setdefault(where, []).append((loc, name))
        for where, tensors in by_file.items():
            loc, first = tensors[0]
            what = (f"tensor '{first}' keeps its data in an external file '{where}'" if len(tensors) == 1 else
                    f"{len(tensors)} tensors ('{first}', ...) keep their data in an external file '{where}'")
            yield self.finding(loc, what=what)
