"""Rewrites for a target (``portable fix --target NAME``): a node the target's table lacks, as ops it has,
computing the same elements. Only exact rewrites live here: the fixed model gives the original's
outputs bit for bit, and fix's proof checks it like every remedy.

:class:`PadAsSlicesPass`: ``Pad`` in ``reflect`` or ``edge`` mode as ``Slice`` + ``Concat``, axis by axis.
ONNX Runtime's CoreML ML Program table has no Pad row and NNAPI's takes constant mode only, so one
reflect Pad splits the model there (microsoft/onnxruntime#28022: 14 CoreML partitions, 1 as Slice +
Concat, bit-identical); Slice and Concat are in every table. :func:`pad_refusal` says why a Pad stays.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from portable.exporters.initializers import add_initializer

__all__ = ["PAD_MODES", "PadAsSlicesPass", "pad_mode", "pad_refusal"]

PAD_MODES = ("edge", "reflect")  # the modes this rewrite writes as slices (constant is a Pad every table has)
_MIN_OPSET = 11  # Pad's pads an input, Slice's negative steps: opset 11 on


def _is_pad(node: ir.Node) -> bool:
    return node.op_type == "Pad" and node.domain in ("", "ai.onnx")


def pad_mode(node: ir.Node) -> str | None:
    """The node's mode when it is a default-domain Pad (``constant`` when unset), else None."""
    if not _is_pad(node):
        return None
    attr = node.attributes.get("mode")
    return attr.as_string() if attr is not None else "constant"


@dataclass(frozen=True)
class _Plan:
    """What one Pad adds: per axis with padding, (axis, size, before, after)."""

    mode: str
    axes: tuple[tuple[int, int, int, int], ...]


def _constant(value: ir.Value | None) -> np.ndarray | None:
    """The value's array when it is a constant the user cannot feed (an initializer that is not a graph
    input, or a Constant's output)."""
    if value is None or value.is_graph_input():
        return None
    tensor = ir.convenience.get_const_tensor(value)
    return None if tensor is None else tensor.numpy()


def _pads_of(node: ir.Node) -> tuple[np.ndarray, np.ndarray] | str:
    """The Pad's constant ``pads`` and the axes they apply to (every axis when ``axes`` is absent), or why
    they are not known before the run."""
    x = node.inputs[0] if node.inputs else None
    if x is None or x.shape is None:
        return "its input's shape is unknown"
    pads = _constant(node.inputs[1]) if len(node.inputs) > 1 else None
    if pads is None:
        return "its pads are computed at run time (not a constant)"
    rank = x.shape.rank()
    given = _constant(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None else np.arange(rank)
    if given is None:
        return "its axes are computed at run time (not a constant)"
    axes = np.where(given < 0, given + rank, given).astype(np.int64).ravel()
    if pads.size != 2 * axes.size or (axes.size and (axes.min() < 0 or axes.max() >= rank)):
        return f"its pads ({pads.size} values) do not match its axes {axes.tolist()} on rank {rank}"
    return pads.astype(np.int64).ravel(), axes


def _plan(node: ir.Node) -> _Plan | str:
    """The slices the Pad becomes, or why it cannot be rewritten exactly."""
    found = _pads_of(node)
    if isinstance(found, str):
        return found
    pads, axes = found
    if (pads < 0).any():
        return f"negative pads {pads.tolist()} (a crop)"
    x = node.inputs[0]
    assert x is not None and x.shape is not None
    mode, planned = str(pad_mode(node)), []
    for k, axis in enumerate(axes.tolist()):
        before, after, size = int(pads[k]), int(pads[k + axes.size]), x.shape[axis]
        if before == after == 0:
            continue
        if not isinstance(size, int):
            return f"axis {axis} has no static size ({size})"
        if mode == "reflect" and max(before, after) >= size:
            return f"reflect pads {before}, {after} on axis {axis} reach past its size {size} (reflect needs pad < size)"
        if size == 0:
            return f"axis {axis} is empty: no edge to repeat"
        planned.append((axis, size, before, after))
    if not planned:
        return "every pad is zero"
    return _Plan(mode, tuple(planned))


def pad_refusal(node: ir.Node, opset: int | None) -> str | None:
    """Why this reflect or edge Pad cannot be rewritten exactly (None: it can)."""
    if pad_mode(node) not in PAD_MODES:
        return f"mode {pad_mode(node)!r} is not one this rewrite writes"
    if opset is None or opset < _MIN_OPSET:
        return f"the model's opset {opset} is below {_MIN_OPSET} (fix --opset 18 first)"
    found = _plan(node)
    return found if isinstance(found, str) else None


class PadAsSlicesPass(ir.passes.InPlacePass):
    """Each main-graph ``Pad`` in one of ``modes`` (``reflect``, ``edge``) as ``Slice`` + ``Concat``, axis by axis.

    For an axis of size ``n`` padded ``b`` before and ``a`` after: ``reflect`` is
    ``Concat(x[b:0:-1], x, x[n-2:n-2-a:-1])``, ``edge`` ``Concat(x[0:1] * b, x, x[n-1:n] * a)`` (the
    one-element slice repeated as Concat's inputs). Padding is separable, so the axes are padded one
    after another (numpy's ``np.pad`` does the same): every element is a copy, the result bit for bit
    the Pad's. Only where that is known before the run: constant, non-negative pads (and axes),
    static sizes on the padded axes, reflect pads below the axis size, opset 11 on. A Pad that falls
    short stays as it is; :func:`pad_refusal` says why. The last Concat takes the Pad's output name;
    every new node carries the Pad's ``metadata_props`` (its source line).
    """

    def __init__(self, modes: Collection[str]) -> None:
        super().__init__()
        self.modes = frozenset(modes)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        opset = model.opset_imports.get("")
        if opset is None or opset < _MIN_OPSET:
            return ir.passes.PassResult(model, modified=False)
        graph, count = model.graph, 0
        names = _Names(graph)
        for node in list(graph):
            plan = _plan(node) if pad_mode(node) in self.modes else None
            if isinstance(plan, _Plan):
                _rewrite(graph, node, plan, names)
                count += 1
        return ir.passes.PassResult(model, modified=count > 0)


class _Names:
    """Fresh value and node names for the rewrite's new values, and its index constants, each made once."""

    def __init__(self, graph: ir.Graph) -> None:
        self.graph = graph
        self.taken = {v.name for n in graph for v in n.outputs if v.name}
        self.taken |= {v.name for v in (*graph.inputs, *graph.initializers.values()) if v.name}
        self._constants: dict[tuple[int, ...], ir.Value] = {}

    def fresh(self, base: str) -> str:
        name, count = base, 0
        while name in self.taken:
            count += 1
            name = f"{base}_{count}"
        self.taken.add(name)
        return name

    def constant(self, values: tuple[int, ...]) -> ir.Value:
        """A 1-D int64 initializer of ``values``, shared by every slice that uses the same."""
        if values not in self._constants:
            label = "_".join(str(v).replace("-", "m") for v in values)
            self._constants[values] = add_initializer(self.graph, self.fresh(f"pad_slice_{label}"),
                                                      np.array(values, dtype=np.int64))
        return self._constants[values]


def _rewrite(graph: ir.Graph, pad: ir.Node, plan: _Plan, names: _Names) -> None:
    """Replace ``pad`` by one Concat per padded axis (and its slices), in place."""
    current, output = pad.inputs[0], pad.outputs[0]
    assert current is not None and current.shape is not None
    dims = list(current.shape)
    for axis, size, before, after in plan.axes:
        dims[axis] = size + before + after
        nodes = _axis_nodes(current, (axis, size, before, after), plan.mode, names, pad)
        result = nodes[-1].outputs[0]
        result.name = names.fresh(f"{output.name or 'pad'}__{plan.mode}{axis}")
        result.shape, result.type = ir.Shape(dims), current.type
        graph.insert_before(pad, nodes)
        current = result
    name, declared = output.name, output.shape
    output.name = None
    current.name = name
    if output.is_graph_output() and declared is not None:
        current.shape = declared  # the model's interface stays as it was declared
    ir.convenience.replace_all_uses_with(output, current, replace_graph_outputs=True)
    graph.remove(pad, safe=True)


def _axis_nodes(x: ir.Value, where: tuple[int, int, int, int], mode: str, names: _Names, pad: ir.Node) -> list[ir.Node]:
    """The slices of ``x``'s two sides along one axis and the Concat around ``x`` (last)."""
    axis, size, before, after = where
    label = f"{pad.name or 'Pad'}/{mode}{axis}"
    nodes: list[ir.Node] = []
    parts: dict[str, list[ir.Value]] = {"before": [], "after": []}
    for side, amount, (start, end, step), length, copies in _sides(mode, size, before, after):
        if amount:
            node = _slice(x, (start, end, axis, step), length, names, f"{label}_{side}", pad)
            nodes.append(node)
            parts[side] = [node.outputs[0]] * copies
    concat = ir.node("Concat", [*parts["before"], x, *parts["after"]], attributes={"axis": axis},
                     name=f"{label}_concat", metadata_props=dict(pad.metadata_props))
    return [*nodes, concat]


_Side = tuple[str, int, tuple[int, int, int], int, int]  # side, its pad, (start, end, step), slice length, copies


def _sides(mode: str, size: int, before: int, after: int) -> tuple[_Side, _Side]:
    """Reflect: one reversed slice per side (``x[b:0:-1]``, ``x[n-2:n-2-a:-1]``); edge: the end element, repeated."""
    if mode == "reflect":
        end = size - 2 - after if size - 2 - after >= 0 else -(size + 1)  # -(n+1): through index 0
        return ("before", before, (before, 0, -1), before, 1), ("after", after, (size - 2, end, -1), after, 1)
    return ("before", before, (0, 1, 1), 1, before), ("after", after, (size - 1, size, 1), 1, after)


def _slice(x: ir.Value, spec: tuple[int, int, int, int], length: int, names: _Names, label: str,
           pad: ir.Node) -> ir.Node:
    """``x[start:end:step]`` along ``axis`` (``spec``): ``length`` elements there."""
    start, end, axis, step = spec
    inputs = [x, *(names.constant((v,)) for v in (start, end, axis, step))]
    node = ir.node("Slice", inputs, name=label, metadata_props=dict(pad.metadata_props))
    dims = list(x.shape or ())
    dims[axis] = length
    value = node.outputs[0]
    value.name, value.shape, value.type = names.fresh(label.replace("/", "__")), ir.Shape(dims), x.type
    return node
