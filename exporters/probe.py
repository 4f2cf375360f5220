"""What the exported graph looks like with the batch fixed to a number.

Shape computations that only carry the batch (``Shape`` -> ``Gather``/``Slice`` ->
``Concat`` -> ``Reshape``) cannot be folded while the batch is a symbol. The probe runs
the validators' shape analysis (:mod:`portable.validators.shapes`: fix the batch at 1, 2
and 3, infer and fold to a fixed point) on a light copy of the model, so the exporter
and PORT007/PORT009 decide from one implementation. :class:`ShapeProbe` computes it
once per model and hands the same result to every pass that reads it.
"""

from __future__ import annotations

from typing import TypeAlias

import onnx_ir as ir

# One definition of the batch values, the folding size limit and the batch expressions,
# shared with the validators' analysis (PORT007/PORT009).
from portable.validators.shapes import BATCH_VALUES, SMALL_TENSOR, FixedBatch, analyse, linear_dim

__all__ = ["BATCH_VALUES", "Probe", "ShapeProbe", "linear_dim", "probes"]

Probe: TypeAlias = FixedBatch  # dims by value name, constant inputs by (node name, input index)


def probes(model: ir.Model, symbol: str | None) -> tuple[Probe, ...]:
    """One probe per batch value (1, 2 and 3) for a dynamic batch; one for a static model."""
    return analyse(ir.to_proto(_light_copy(model)), (symbol,) if symbol else ())


def _light_copy(model: ir.Model) -> ir.Model:
    """A clone whose large initializers are graph inputs (no weight bytes serialized)."""
    clone = model.clone()
    graph = clone.graph
    for name, value in list(graph.initializers.items()):
        tensor = value.const_value
        if tensor is not None and tensor.size > SMALL_TENSOR:
            graph.initializers.pop(name)
            value.shape = value.shape or ir.Shape(tensor.shape.numpy())
            value.dtype = value.dtype or tensor.dtype
            value.const_value = None
            graph.inputs.append(value)
    return clone


class ShapeProbe:
    """The probes of one model, computed on first use and shared by the passes given this object.

    The result stays valid while value names and shapes do not change: the passes that
    read it in :func:`~portable.exporters.passes.portable_passes` only swap shape inputs
    for equal constants or remove unused nodes in between. A pipeline that changes more
    between them needs a new ``ShapeProbe``.
    """

    def __init__(self, symbol: str | None) -> None:
        self.symbol = symbol
        self._model: ir.Model | None = None
        self._found: tuple[Probe, ...] = ()
        self.runs = 0  # how many times the analysis ran (tests assert once per export)

    def of(self, model: ir.Model) -> tuple[Probe, ...]:
        if self._model is not model:
            self._found, self._model = probes(model, self.symbol), model
            self.runs += 1
        return self._found
