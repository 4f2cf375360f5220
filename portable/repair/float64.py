"""The float64 side of fix's proof for a remedy that is not exact (``--approximate-gelu``).

An approximated model cannot be held to the original at fp32 tolerances: it computes something else. The proof
instead runs two float64 references, both made from the *original* file: the original as it is (what it means,
without fp32 rounding), and the original with each GELU the remedy replaced computed in the tanh form, substituted
here independently of the remedy: its ``Erf(u)`` (``u = x/√2``) becomes ``tanh((2/√π)(u + 2·0.044715·u³))``, which
is the tanh form's ``tanh(√(2/π)(x + 0.044715x³))`` written in ``u``. The fixed file's fp32 error against the
second must be within the noise floor of the original's own fp32 error against the first
(:class:`portable.runners.comparator.NoiseFloor`): a wrong constant or wiring of the remedy, or a fault of any
other remedy, shows there. The first minus the second is the approximation's own effect, reported.

No library converts an ONNX graph to float64 (onnxconverter-common converts to float16 only), hence
:func:`as_float64`. ONNX Runtime has no float64 kernel for several ops (``Erf``, ``Conv``): a graph it cannot load
runs in onnx's reference evaluator, with an ``Erf`` of float64 accuracy (the evaluator's own rounds to float32).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

__all__ = ["References", "approximated", "as_float64", "float64_feeds", "float64_runner", "gelu_erfs", "with_tanh_erfs"]

_FLOAT, _DOUBLE = ir.DataType.FLOAT, ir.DataType.DOUBLE
_TYPE_ATTRIBUTES = ("to", "dtype")  # Cast's target, the generators' output type (RandomNormal, EyeLike...)


def gelu_erfs(model: ir.Model) -> list[int]:
    """The positions, among the main graph's ``Erf`` nodes in order, of those the approximate-gelu remedy replaces
    (its pattern matched on a copy of ``model``; the substitution of :func:`with_tanh_erfs` is this module's)."""
    from portable.exporters.approximations import ApproximateGeluPass, erf_nodes

    copy = ir.from_proto(ir.to_proto(model))
    erfs = erf_nodes(copy)
    ApproximateGeluPass()(copy)
    return [i for i, node in enumerate(erfs) if node.graph is None]


def as_float64(model: ir.Model) -> ir.Model:
    """A copy of ``model`` computing in float64 where it computed in float32: its float32 inputs, weights,
    constants, casts and typed values; nothing else changes."""
    copy = ir.from_proto(ir.to_proto(model))
    graph = copy.graph
    for value in _values(graph):
        if value.dtype == _FLOAT:
            value.type = ir.TensorType(_DOUBLE)
        tensor = value.const_value
        if tensor is not None and tensor.dtype == _FLOAT:
            value.const_value = ir.tensor(tensor.numpy().astype(np.float64), name=value.name)
    for node in graph:
        _node_as_float64(node)
    return copy


def _values(graph: ir.Graph) -> Iterable[ir.Value]:
    yield from graph.inputs
    yield from graph.initializers.values()
    for node in graph:
        yield from node.outputs


def _node_as_float64(node: ir.Node) -> None:
    for name, attr in list(node.attributes.items()):
        if name in _TYPE_ATTRIBUTES and attr.type == ir.AttributeType.INT and attr.as_int() == _FLOAT:
            node.attributes[name] = ir.AttrInt64(name, int(_DOUBLE))
        elif attr.type == ir.AttributeType.TENSOR and attr.as_tensor().dtype == _FLOAT:
            node.attributes[name] = ir.AttrTensor(name, ir.tensor(attr.as_tensor().numpy().astype(np.float64)))
        elif node.op_type == "Constant" and name in ("value_float", "value_floats"):
            del node.attributes[name]
            values = np.asarray(attr.value, dtype=np.float64)
            node.attributes["value"] = ir.AttrTensor("value", ir.tensor(values))


# The tanh form's constants, written here again rather than imported from the remedy's module: a wrong constant
# there must show as a failed proof, not be copied into the reference.
_CUBIC_IN_U = 2.0 * 0.044715  # x = √2·u, so 0.044715·x³ = 2·0.044715·√2·u³ and √(2/π)·√2 = 2/√π
_SCALE_IN_U = 2.0 / math.sqrt(math.pi)


def with_tanh_erfs(model: ir.Model, positions: Sequence[int]) -> ir.Model:
    """``model`` (float64) with the ``Erf`` nodes at ``positions`` as the tanh form in ``u`` (module docstring)."""
    from portable.exporters.approximations import erf_nodes

    copy = ir.from_proto(ir.to_proto(model))
    erfs = erf_nodes(copy)
    for i in positions:
        _substitute(copy.graph, erfs[i], _CUBIC_IN_U, _SCALE_IN_U)
    return copy


def _substitute(graph: ir.Graph, erf: ir.Node, cubic: float, scale: float) -> None:
    u = erf.inputs[0]
    assert u is not None
    name = erf.name or "erf"
    c = ir.Value(name=f"{name}.tanh_cubic", const_value=ir.tensor(np.array(cubic)))
    k = ir.Value(name=f"{name}.tanh_scale", const_value=ir.tensor(np.array(scale)))
    graph.register_initializer(c)
    graph.register_initializer(k)
    square = ir.node("Mul", [u, u])
    cube = ir.node("Mul", [square.outputs[0], u])
    term = ir.node("Mul", [cube.outputs[0], c])
    inner = ir.node("Add", [u, term.outputs[0]])
    scaled = ir.node("Mul", [inner.outputs[0], k])
    tanh = ir.node("Tanh", [scaled.outputs[0]])
    graph.insert_before(erf, [square, cube, term, inner, scaled, tanh])
    ir.convenience.replace_all_uses_with(erf.outputs[0], tanh.outputs[0])
    if erf.outputs[0].is_graph_output():
        graph.outputs[graph.outputs.index(erf.outputs[0])] = tanh.outputs[0]
    graph.remove(erf, safe=True)


def approximated(model: ir.Model, positions: Sequence[int]) -> tuple[ir.Model, ir.Model]:
    """The two float64 references of the module docstring: the original, and the original approximated."""
    exact = as_float64(model)
    return exact, with_tanh_erfs(exact, positions)


def float64_runner(model: ir.Model) -> tuple[Any, str]:
    """Something with ``run(None, feeds)`` for a float64 model: ONNX Runtime, else onnx's reference evaluator."""
    from portable.runners.sessions import FATAL, SessionFailed, SessionSpec, session_from_onnx

    proto = ir.to_proto(model)
    try:
        return session_from_onnx(proto.SerializeToString(), SessionSpec(log_severity=FATAL),
                                 what="the float64 reference"), "onnxruntime"
    except SessionFailed:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(proto, new_ops=[_erf64()]), "onnx.reference"


def _erf64() -> type:
    """An ``Erf`` for onnx's reference evaluator in the input's own precision (its own computes in float32)."""
    from onnx.reference.op_run import OpRun

    erf = np.vectorize(math.erf, otypes=["d"])

    class Erf(OpRun):
        op_domain = ""

        def _run(self, x: np.ndarray) -> tuple[np.ndarray]:
            return (erf(x).astype(x.dtype),)

    return Erf


def float64_feeds(feeds: Mapping[str, Any]) -> dict[str, Any]:
    """The feeds with float32 arrays widened (exactly) to float64."""
    return {k: np.asarray(v, dtype=np.float64) if np.asarray(v).dtype == np.float32 else v for k, v in feeds.items()}


class References:
    """The two float64 references of one original, loaded once for every batch the proof runs."""

    def __init__(self, gelus: int, exact: tuple[Any, str], approximate: tuple[Any, str]) -> None:
        self.gelus = gelus
        self._exact, self._approximate = exact, approximate
        self.effect: dict[str, float] = {}  # output -> max |approximated - original|, both in float64
        self.scale: dict[str, float] = {}  # output -> the original's RMS in float64

    @classmethod
    def of(cls, source: str) -> References | None:
        """The references of the original at ``source``; None when no GELU is replaced (the proof is then exact).
        Raises when they cannot be built or loaded (the proof says why)."""
        model = ir.load(source)
        positions = gelu_erfs(model)
        if not positions:
            return None
        exact, approximate = approximated(model, positions)
        return cls(len(positions), float64_runner(exact), float64_runner(approximate))

    def run(self, names: Sequence[str], feeds: Mapping[str, Any]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Both references' outputs on ``feeds``; the approximation's effect per output is kept (its worst)."""
        wide = float64_feeds(feeds)
        exact = [np.asarray(o) for o in self._exact[0].run(None, wide)]
        shifted = [np.asarray(o) for o in self._approximate[0].run(None, wide)]
        for name, x, a in zip(names, exact, shifted):
            if x.dtype.kind == "f" and x.shape == a.shape and x.size:
                self.effect[name] = max(self.effect.get(name, 0.0), float(np.abs(a - x).max()))
                self.scale[name] = max(self.scale.get(name, 0.0), float(np.sqrt(np.mean(x ** 2))))
        return exact, shifted

    def runtimes(self) -> str:
        return f"{self._exact[1]} (original), {self._approximate[1]} (approximated)"

    def to_dict(self) -> dict[str, Any]:
        return {"remedy": "approximate-gelu", "gelus": self.gelus, "reference": self.runtimes(),
                "effect_max_abs": dict(self.effect), "reference_rms": dict(self.scale)}

    def sentence(self) -> str:
        """What the proof judged and what the approximation costs, in one sentence."""
        worst = max(self.effect, key=lambda k: self.effect[k] / (self.scale.get(k) or 1.0), default=None)
        cost = "" if worst is None else (
            f"; the approximation itself moves output {worst!r} by up to {self.effect[worst]:.3g} "
            f"({100 * self.effect[worst] / (self.scale[worst] or 1.0):.2g} % of its RMS {self.scale[worst]:.3g})")
        return (f"approximate (--approximate-gelu, {self.gelus} GELU(s) in the tanh form): not exact, so each output "
                "is judged against the original run in float64 with the same GELUs in the tanh form, within the "
                f"float64 noise floor of the original's own fp32 error (references: {self.runtimes()}){cost}")
