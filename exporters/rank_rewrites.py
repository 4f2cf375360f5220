"""A Transpose above a target's rank limit rewritten at a lower rank (``fix --target``'s ``rank-limit``).

CoreML takes tensors of rank 5 at most (ONNX Runtime's usability checker, ``check_coreml_partitions``'s
``max_rank``; microsoft/onnxruntime#14212: reshapes above rank 5 gave 114 CoreML partitions). Window
partitions and pixel shuffles export as ``Reshape`` to rank 6 -> ``Transpose`` -> ``Reshape`` back. The axes
a Transpose keeps together, in order (a run of ``perm`` increasing by one), and the axes of size 1 move as
one block, so the same data movement can be written at the rank of its blocks: the first Reshape's shape
merged by blocks, the Transpose's ``perm`` over the blocks. Pure data movement, so the rewrite is exact. Only
where the pattern is whole: the Transpose's input made by a Reshape used by nothing else, its output used
only by Reshapes, every size known.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

__all__ = ["TransposeRankPass", "blocks", "rank_refusal"]


def blocks(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The merged input shape and ``perm`` of the same transpose: axes of size 1 dropped, then each run of
    ``perm`` increasing by one (axes that stay together, in order) one axis."""
    kept = [a for a in perm if shape[a] != 1]
    runs: list[list[int]] = []
    for axis in kept:
        if runs and axis == runs[-1][-1] + 1:
            runs[-1].append(axis)
        else:
            runs.append([axis])
    order = sorted(range(len(runs)), key=lambda i: runs[i][0])  # the blocks in input order
    merged = tuple(math.prod(shape[a] for a in runs[i]) for i in order)
    return merged, tuple(order.index(i) for i in range(len(runs)))


def _static(value: ir.Value) -> tuple[int, ...] | None:
    shape = value.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def rank_refusal(node: ir.Node, limit: int) -> str | None:
    """Why this Transpose above ``limit`` cannot be rewritten (None: it can, or it is not above the limit)."""
    perm = node.attributes.get_ints("perm", None)
    if node.op_type != "Transpose" or perm is None or len(perm) <= limit:
        return None
    producer = node.inputs[0].producer() if node.inputs[0] is not None else None
    if producer is None or producer.op_type != "Reshape" or len(node.inputs[0].uses()) != 1:  # type: ignore[union-attr]
        return "its input is not made by a Reshape of its own"
    if not node.outputs[0].uses() or any(n.op_type != "Reshape" or i != 0 for n, i in node.outputs[0].uses()):
        return "its output is used other than by Reshapes"
    shape = _static(node.inputs[0])  # type: ignore[arg-type]
    if shape is None:
        return "its input's sizes are not all known"
    if len(blocks(shape, tuple(perm))[0]) > limit:
        return f"its axes form {len(blocks(shape, tuple(perm))[0])} blocks, over the limit of {limit}"
    return None


class TransposeRankPass(ir.passes.InPlacePass):
    """Each Transpose above ``limit`` of the whole Reshape -> Transpose -> Reshape pattern, at the rank of its blocks."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        count = 0
        for node in list(model.graph):
            perm = node.attributes.get_ints("perm", None) if node.op_type == "Transpose" else None
            if perm is not None and len(perm) > self.limit and rank_refusal(node, self.limit) is None:
                self._rewrite(model.graph, node, tuple(perm))
                count += 1
        return ir.passes.PassResult(model, modified=count > 0)

    @staticmethod
    def _rewrite(graph: ir.Graph, node: ir.Node, perm: tuple[int, ...]) -> None:
        x = node.inputs[0]
        assert x is not None and x.shape is not None
        shape = _static(x)
        assert shape is not None
        merged, new_perm = blocks(shape, perm)
        reshape = x.producer()
        assert reshape is not None
        name, count = f"{reshape.name or 'reshape'}_rank{len(merged)}", 0
        while name in graph.initializers:  # two unnamed Reshapes: a name of its own each
            count += 1
            name = f"{reshape.name or 'reshape'}_rank{len(merged)}_{count}"
        target = ir.Value(name=name, const_value=ir.tensor(np.array(merged, dtype=np.int64), name=name))
        graph.register_initializer(target)
        reshape.replace_input_with(1, target)
        x.shape = ir.Shape(merged)
        node.attributes["perm"] = ir.AttrInt64s("perm", list(new_perm))
        node.outputs[0].shape = ir.Shape(tuple(merged[i] for i in new_perm))
