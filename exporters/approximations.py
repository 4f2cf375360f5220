"""Rewrites that change what a model computes, made only when the user asks (``portable fix --approximate-gelu``).

:class:`ApproximateGeluPass`: the exact GELU ``x * 0.5 * (1 + erf(x / √2))`` as its tanh form
``0.5 * x * (1 + tanh(√(2/π) * (x + 0.044715 * x³)))`` (PyTorch's ``approximate='tanh'``, the form torchlib's
``aten_gelu`` writes). ``Erf`` is missing from the QNN and NNAPI tables, where one exact GELU per transformer
layer splits the model; ``Tanh``, ``Mul`` and ``Add`` are in every table. The two differ by at most
:data:`MAX_GELU_GAP` per element, so the fixed model is not the original's bit for bit: fix's proof judges it
against the original run in float64 with its GELUs in the tanh form (``portable.repair.float64``) and says so.

Matched: the three orders exact GELUs are written in (torchlib's ``x * (0.5 * (erf + 1))``, portable's own
``(x * (erf + 1)) * 0.5``, hand-written ``(x * 0.5) * (erf + 1)``), with the constants
:func:`~portable.exporters.fusions.gelu_constants` accepts; a lone ``Erf`` is left and named.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from portable.exporters.fusions import gelu_constants, gelu_half_inside, shaped_like

if TYPE_CHECKING:
    from onnxscript.rewriter.pattern import RewriteRule

__all__ = ["CUBIC", "MAX_GELU_GAP", "ROOT_2_OVER_PI", "ApproximateGeluPass", "erf_nodes", "gelu_tanh"]

ROOT_2_OVER_PI = math.sqrt(2.0 / math.pi)
CUBIC = 0.044715
# a bound on max over x of |0.5x(1 + erf(x/√2)) - gelu_tanh(x)|: 4.73e-4, at |x| ≈ 2.70, in float64 on a 1e-4
# grid over [-10, 10] (the gap falls off on both sides); tests/exporters/test_approximations.py computes it again
MAX_GELU_GAP = 4.8e-4


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """The tanh form, in numpy (the tests' and the proof's reference for what the rewrite writes)."""
    return 0.5 * x * (1.0 + np.tanh(ROOT_2_OVER_PI * (x + CUBIC * x ** 3)))


def _ort_order(op: Any, x: ir.Value, root2: ir.Value, one: ir.Value, half: ir.Value) -> ir.Value:
    """``(x * (erf(x / √2) + 1)) * 0.5``: the order portable's exporter writes (``GeluInOrtOrder``)."""
    return op.Mul(op.Mul(x, op.Add(op.Erf(op.Div(x, root2)), one)), half)


def _half_first(op: Any, x: ir.Value, root2: ir.Value, one: ir.Value, half: ir.Value) -> ir.Value:
    """``(x * 0.5) * (erf(x / √2) + 1)``: the order of hand-written GELUs (transformers' ``GELUActivation`` of old)."""
    return op.Mul(op.Mul(x, half), op.Add(op.Erf(op.Div(x, root2)), one))


def _tanh_form(op: Any, x: ir.Value, root2: ir.Value, one: ir.Value, half: ir.Value) -> ir.Value:
    """``0.5 * x * (1 + tanh(√(2/π) * (x + 0.044715 * x * x * x)))`` in ``x``'s type, the pattern's 1 and 0.5
    reused (the cube as two Muls: no Pow, whose integer exponent some tables restrict)."""
    dtype = x.dtype.numpy() if x.dtype is not None else np.float32
    cubic = op.initializer(ir.tensor(np.array(CUBIC, dtype=dtype)), name=f"{x.name or 'x'}_gelu_cubic")
    scale = op.initializer(ir.tensor(np.array(ROOT_2_OVER_PI, dtype=dtype)), name=f"{x.name or 'x'}_gelu_scale")
    square = op.Mul(x, x)
    cube = op.Mul(square, x)
    term = op.Mul(cube, cubic)
    inner = op.Add(x, term)
    scaled = op.Mul(inner, scale)
    tanh = op.Tanh(scaled)
    plus = op.Add(tanh, one)
    product = op.Mul(x, plus)
    out = op.Mul(product, half)
    shaped_like(x, (square, cube, term, inner, scaled, tanh, plus, product, out), (one, half))
    return out


def approximate_gelu_rules() -> list[RewriteRule]:
    """The rules, one per written order, each with its operands commuted."""
    from onnxscript.rewriter.pattern import RewriteRule

    patterns = ((gelu_half_inside, "TorchOrder"), (_ort_order, "OrtOrder"), (_half_first, "HalfFirst"))
    return [rule for pattern, name in patterns
            for rule in RewriteRule(pattern, _tanh_form, gelu_constants, name=f"ApproximateGelu{name}").commute()]


def erf_nodes(model: ir.Model) -> list[ir.Node]:
    """The main graph's default-domain ``Erf`` nodes."""
    return [n for n in model.graph if n.op_type == "Erf" and n.domain in ("", "ai.onnx")]


class ApproximateGeluPass(ir.passes.InPlacePass):
    """Each exact GELU of the main graph in its tanh form (module docstring); other ``Erf`` nodes stay."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from onnxscript.rewriter import RewritePass

        before = len(erf_nodes(model))
        result = RewritePass(approximate_gelu_rules())(model)
        return ir.passes.PassResult(result.model, len(erf_nodes(result.model)) != before)
