"""PORT012 no-randomness."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from portable.findings import Finding, Severity
from portable.validators.context import RANDOM_OPS, ModelContext
from portable.validators.rules.base import Rule

__all__ = ["NoRandomness", "is_random", "random_nodes"]


def _true_constant(body: onnx.GraphProto | onnx.FunctionProto, name: str) -> bool:
    """Whether ``name`` is an initializer or a ``Constant`` of ``body`` holding true (Dropout's training_mode)."""
    from onnx import numpy_helper

    tensors = [t for t in getattr(body, "initializer", []) if t.name == name]
    tensors += [a.t for n in body.node if n.op_type == "Constant" and name in n.output for a in n.attribute
                if a.name == "value"]
    return bool(tensors) and bool(numpy_helper.to_array(tensors[0]).all())


def is_random(body: onnx.GraphProto | onnx.FunctionProto, node: onnx.NodeProto) -> bool:
    """A random op, or a Dropout whose ``training_mode`` is a constant true (it then drops at random)."""
    if node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type == "Dropout":
        return len(node.input) > 2 and bool(node.input[2]) and _true_constant(body, node.input[2])
    return node.op_type in RANDOM_OPS


def random_nodes(proto: onnx.ModelProto) -> list[str]:
    """The random nodes of the model's graphs, named (``Dropout 'd1'``; an unnamed one by op and index)."""
    from portable.validators.graphs import iter_scopes, node_label

    return [f"{n.op_type} {node_label(n, i)!r}" for scope in iter_scopes(proto)
            for i, n in enumerate(scope.body.node) if is_random(scope.body, n)]


class NoRandomness(Rule):
    """No random-number ops: ``RandomNormal``, ``RandomUniform``, their ``...Like`` forms,
    ``Bernoulli``, ``Multinomial``, and ``Dropout`` whose ``training_mode`` is a constant true.

    *Why*: an inference graph should be deterministic; random ops usually mean a
    training-mode layer (dropout) was exported, and runtimes seed them differently.

    *Bad*: exporting a model in ``train()`` mode with ``nn.Dropout``; ``torch.randn_like(x)``
    in ``forward``.

    *Fix*: call ``model.eval()`` before export; pass noise in as an input.
    """

    id = "PORT012"
    name = "no-randomness"
    severity = Severity.ERROR
    message = "random op '{op}' makes the model non-deterministic"
    hint = "export in eval() mode; pass random values as inputs instead"

    def check(self, ctx: ModelContext) -> Iterator[Finding]:
        for scope, index, node in ctx.nodes():
            if is_random(scope.body, node):
                yield self.finding(ctx.location(scope, index, node), op=node.op_type)
