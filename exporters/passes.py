"""Post-export passes, in onnx-ir style: one transformation per pass, composed by :func:`portable_passes`.

Library passes do the generic work (onnxscript's optimizer folds constants and removes
dead code; onnx-ir's common passes inline functions, sort, and fix names). The
hand-written passes do what no library does: resolve shape computations that carry
only the batch (``Reshape``'s ``0``/``-1``), write static value shapes as integers or
expressions of ``batch``, and strip the exporting machine's paths from provenance.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import onnx_ir as ir
from onnx_ir.passes import common

from portable.exporters.probe import Probe, linear_dim, probes
from portable.exporters.provenance import relativize_trace
from portable.validators.shapes import SHAPE_INPUTS

__all__ = [
    "BATCH",
    "CanonicalNamesPass",
    "FoldBatchShapesPass",
    "OptimizePass",
    "RelativeSourcesPass",
    "RenameSymbolPass",
    "StaticShapesPass",
    "portable_passes",
]

BATCH = "batch"
TRACE_KEY = "pkg.torch.onnx.stack_trace"


class OptimizePass(ir.passes.InPlacePass):
    """onnxscript's optimizer: constant folding, dead-code removal, simple rewrites."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from onnxscript.optimizer import optimize_ir

        optimize_ir(model)
        return ir.passes.PassResult(model, modified=True)


class RenameSymbolPass(ir.passes.InPlacePass):
    """Rename torch's batch symbol (``s77``) to ``batch`` in every value shape, expressions included."""

    def __init__(self, old: str | None, new: str = BATCH) -> None:
        super().__init__()
        self.pattern = re.compile(rf"\b{re.escape(old)}\b") if old else None
        self.new = new

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for value in _all_values(model.graph) if self.pattern else ():
            if value.shape is None or not any(isinstance(d, ir.SymbolicDim) for d in value.shape):
                continue
            value.shape = ir.Shape([self._rename(d) for d in value.shape])
            modified = True
        return ir.passes.PassResult(model, modified)

    def _rename(self, dim: int | ir.SymbolicDim) -> int | str | None:
        if isinstance(dim, int) or dim.value is None:
            return dim if isinstance(dim, int) else None
        return self.pattern.sub(self.new, dim.value)  # type: ignore[union-attr]


class _ProbedPass(ir.passes.InPlacePass):
    """A pass that works from the model's probes at the batch sizes of ``symbol`` (None: static)."""

    def __init__(self, symbol: str | None) -> None:
        super().__init__()
        self.symbol = symbol

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, self.apply(model, probes(model, self.symbol)))

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        """Change ``model`` in place from ``found``; True when anything changed."""
        raise NotImplementedError


class FoldBatchShapesPass(_ProbedPass):
    """Replace runtime shape inputs by constants wherever the probes resolve them.

    With a static batch every resolved shape input becomes a constant. With a dynamic
    batch, an input that is the same at both probe batches becomes a constant, and a
    ``Reshape`` shape that differs only where the batch flows becomes a constant with
    ``0`` (copy the input dim) or ``-1`` (infer). What stays is computed from the batch
    and cannot be written statically (e.g. ``Expand`` of a token to the batch).
    """

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        modified = False
        for node in list(model.graph):
            for index in SHAPE_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ():
                value = node.inputs[index] if index < len(node.inputs) else None
                if value is None or value.const_value is not None:
                    continue
                shape = _resolved(node, index, found)
                if shape is not None:
                    _replace_input(model.graph, node, index, shape)
                    modified = True
        return modified


def _resolved(node: ir.Node, index: int, found: Sequence[Probe]) -> np.ndarray | None:
    seen = [p.inputs.get((node.name, index)) for p in found]
    if any(s is None for s in seen):
        return None
    arrays = cast("list[np.ndarray]", seen)  # no None: returned above
    if all(np.array_equal(arrays[0], s) for s in arrays[1:]):
        return arrays[0]
    if node.op_type != "Reshape" or index != 1:
        return None
    assert node.inputs[0] is not None
    data = [p.shapes.get(node.inputs[0].name) for p in found]
    outs = [p.shapes.get(node.outputs[0].name) for p in found]
    return _batch_reshape(arrays, data, outs, _allowzero(node))


def _batch_reshape(seen: list[np.ndarray], data: list, outs: list, allowzero: bool) -> np.ndarray | None:
    """A constant Reshape shape valid at every probe: varying dims become 0 (copy) or one -1."""
    shape = []
    for i, dims in enumerate(zip(*(s.tolist() for s in seen))):
        copies = not allowzero and all(d is not None and i < len(d) and d[i] == v for d, v in zip(data, dims))
        shape.append(dims[0] if len(set(dims)) == 1 else 0 if copies else -1)
    candidate = np.array(shape, dtype=np.int64)
    ok = all(d is not None and o is not None and _reshaped(d, candidate) == tuple(o) for d, o in zip(data, outs))
    return candidate if ok else None


def _reshaped(data: tuple, shape: np.ndarray) -> tuple | None:
    """Reshape's output shape (allowzero=0), or None when it is invalid or unknown."""
    if any(d is None for d in data) or list(shape).count(-1) > 1:
        return None
    dims = [data[i] if s == 0 and i < len(data) else int(s) for i, s in enumerate(shape)]
    total, known = int(np.prod(data, dtype=np.int64)), int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if -1 in dims:
        if known == 0 or total % known:
            return None
        dims[dims.index(-1)] = total // known
    return tuple(dims)


def _allowzero(node: ir.Node) -> bool:
    attr = node.attributes.get("allowzero")
    return bool(attr.as_int()) if attr is not None else False


def _replace_input(graph: ir.Graph, node: ir.Node, index: int, array: np.ndarray) -> None:
    name = f"{node.name}_shape{index}"
    value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(ir.DataType.INT64),
                     const_value=ir.tensor(np.asarray(array, dtype=np.int64), name=name))
    graph.register_initializer(value)
    node.replace_input_with(index, value)


class StaticShapesPass(_ProbedPass):
    """Write every intermediate value's shape: integers, or linear expressions of ``batch``."""

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        modified = False
        for node in model.graph:
            for value in node.outputs:
                seen = cast("list[tuple[int | None, ...]]", [p.shapes.get(value.name) for p in found])  # None: skipped
                if any(s is None for s in seen) or len({len(s) for s in seen}) != 1:
                    continue
                dims = [linear_dim(tuple(s[i] for s in seen), BATCH) for i in range(len(seen[0]))]
                if None not in dims:
                    value.shape = ir.Shape(dims)
                    modified = True
        return modified


class RelativeSourcesPass(ir.passes.InPlacePass):
    """Make every node's recorded stack trace relative to the project root (no machine paths)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in model.graph.all_nodes():
            trace = node.metadata_props.get(TRACE_KEY)
            if trace:
                node.metadata_props[TRACE_KEY] = relativize_trace(trace, self.root)
                modified = True
        return ir.passes.PassResult(model, modified)


class _ClearNamesPass(ir.passes.InPlacePass):
    """Forget node names and intermediate value names (inputs, outputs, initializers keep theirs)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        keep = {*graph.inputs, *graph.outputs, *graph.initializers.values()}
        for node in graph:
            node.name = None
            for value in node.outputs:
                if value not in keep:
                    value.name = None
        return ir.passes.PassResult(model, modified=True)


class _OpNames(common.naming.SimpleNameGenerator):
    """``Conv``, ``Conv_1``...; values after their producer: ``conv``, ``conv_1``..."""

    def generate_node_name(self, node: ir.Node) -> str:
        return node.op_type

    def generate_value_name(self, value: ir.Value) -> str:
        producer = value.producer()
        return producer.op_type.lower() if producer is not None else "value"


def CanonicalNamesPass() -> ir.passes.Sequential:  # noqa: N802 - a pass factory reads as a pass
    """Sort topologically, then name nodes and values from their op types, in graph order."""
    return ir.passes.Sequential(common.TopologicalSortPass(), _ClearNamesPass(), common.NameFixPass(_OpNames()))


def _all_values(graph: ir.Graph):
    yield from graph.inputs
    for node in graph.all_nodes():
        yield from node.outputs


def portable_passes(symbol: str | None, root: Path) -> ir.passes.PassManager:
    """Everything between torch's ONNX graph and the file (``symbol``: torch's batch symbol)."""
    batch = BATCH if symbol else None
    return ir.passes.PassManager([
        common.InlinePass(),
        RenameSymbolPass(symbol),
        common.NameFixPass(),
        OptimizePass(),
        FoldBatchShapesPass(batch),
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedFunctionsPass(),
        common.RemoveUnusedOpsetsPass(),
        StaticShapesPass(batch),
        RelativeSourcesPass(root),
        CanonicalNamesPass(),
    ])
