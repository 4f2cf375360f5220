"""SmoothQuant-style scaling: a LayerNormalization's outlier channels moved into the weights of the
MatMuls that read it, so the per-tensor int8 activation between them has no outliers left.

Why: a trained transformer's LayerNorm outputs carry a few hidden channels many times larger than the
rest (all-MiniLM-L6-v2: up to 17x the median channel), and opset 18 quantizes an activation with one
scale per tensor; the query/key/value and FFN-up MatMuls then read most channels at a few levels. For a
per-channel factor ``s``, ``LN(x) @ W == (LN(x) / s) @ (diag(s) W)``: dividing LayerNorm's scale and
bias by ``s`` and multiplying the weight rows by ``s`` is exact in real arithmetic, and with
``s_j = max|x_j|^a / max|W_j|^(1-a)`` (``a = ALPHA``, Xiao et al., "SmoothQuant", ICML 2023, section 4)
the activation's channels come out alike while the weights, quantized per output channel, take the
difference. A reader of the LayerNorm that is not such a MatMul (the residual Add of a post-LN BERT)
gets the original values back through one float ``Mul`` by ``s``, which the quantizer leaves float.

Hand-written: ONNX Runtime's quantization tooling has no SmoothQuant pass for QDQ models (its
``SmoothQuant`` option needs Intel Neural Compressor, which rewrites with its own graph tools).
Only a LayerNormalization over the last axis with constant scale and bias that nothing else reads, and
MatMuls whose constant 2-D weight nothing else reads, are changed; everything else is left as it was.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from portable.quantization.activations import tensor_ranges
from portable.quantization.data import Samples

__all__ = ["ALPHA", "Smoothing", "smooth"]

ALPHA = 0.5  # SmoothQuant's migration strength for BERT-sized models (the paper's default)


@dataclass(frozen=True)
class Smoothing:
    """What the pass did: LayerNorms smoothed, MatMuls that took the factors, float Muls added, the largest factor."""

    layer_norms: int
    matmuls: int
    float_nodes: tuple[str, ...]  # the Muls that give other readers the original values: kept out of the quantizer
    largest_factor: float

    def to_dict(self) -> dict[str, Any]:
        return {"layer_norms": self.layer_norms, "matmuls": self.matmuls, "restoring_muls": len(self.float_nodes),
                "largest_factor": round(self.largest_factor, 4), "alpha": ALPHA}


@dataclass(frozen=True)
class _Site:
    norm: onnx.NodeProto
    matmuls: tuple[onnx.NodeProto, ...]
    others: tuple[onnx.NodeProto, ...]


def _single_use(proto: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    uses = Counter(name for n in proto.graph.node for name in n.input)
    return {t.name: t for t in proto.graph.initializer if uses[t.name] == 1}


def _norm_ok(node: onnx.NodeProto, constants: dict[str, onnx.TensorProto]) -> bool:
    axis = next((a.i for a in node.attribute if a.name == "axis"), -1)
    return (node.op_type == "LayerNormalization" and axis == -1 and len(node.input) == 3
            and node.input[1] in constants and node.input[2] in constants and len(node.output) == 1)


def _sites(proto: onnx.ModelProto) -> list[_Site]:
    constants = _single_use(proto)
    outputs = {o.name for o in proto.graph.output}
    readers_of: dict[str, list[onnx.NodeProto]] = {}
    for node in proto.graph.node:
        for name in dict.fromkeys(node.input):
            readers_of.setdefault(name, []).append(node)
    sites = []
    for norm in (n for n in proto.graph.node if _norm_ok(n, constants) and n.output[0] not in outputs):
        readers = readers_of.get(norm.output[0], [])
        width = numpy_helper.to_array(constants[norm.input[1]]).size
        matmuls = tuple(n for n in readers if n.op_type == "MatMul" and n.input[0] == norm.output[0]
                        and n.input[1] in constants and tuple(constants[n.input[1]].dims)[:1] == (width,)
                        and len(constants[n.input[1]].dims) == 2)
        if matmuls:
            sites.append(_Site(norm, matmuls, tuple(n for n in readers if n not in matmuls)))
    return sites


def _factors(site: _Site, xmax: np.ndarray, tables: dict[str, onnx.TensorProto]) -> np.ndarray:
    wmax = np.max([np.abs(numpy_helper.to_array(tables[m.input[1]])).max(axis=1) for m in site.matmuls], axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.power(xmax, ALPHA) / np.power(wmax.astype(np.float64), 1.0 - ALPHA)
    return np.where(np.isfinite(s) & (s > 0), np.clip(s, 1e-5, 1e5), 1.0)


def _scaled(tables: dict[str, onnx.TensorProto], name: str, by: np.ndarray) -> None:
    array = numpy_helper.to_array(tables[name])
    tables[name].CopyFrom(numpy_helper.from_array((array * by).astype(array.dtype), name))


def _restore(graph: onnx.GraphProto, site: _Site, s: np.ndarray) -> str:
    """A float Mul by ``s`` after the LayerNorm for its other readers; the Mul's name."""
    name, out = f"{site.norm.name}_smoothing_restore", f"{site.norm.output[0]}_restored"
    graph.initializer.append(numpy_helper.from_array(s.astype(np.float32), f"{name}_factor"))
    mul = onnx.helper.make_node("Mul", [site.norm.output[0], f"{name}_factor"], [out], name=name)
    for reader in site.others:
        reader.input[:] = [out if i == site.norm.output[0] else i for i in reader.input]
    position = list(graph.node).index(site.norm) + 1
    graph.node.insert(position, mul)
    return name


def smooth(proto: onnx.ModelProto, calibration: Samples) -> tuple[onnx.ModelProto, Smoothing]:
    """A copy of ``proto`` with every LayerNorm -> MatMul site smoothed (the module docstring)."""
    smoothed = onnx.ModelProto()
    smoothed.CopyFrom(proto)
    sites = _sites(smoothed)
    if not sites:
        return proto, Smoothing(0, 0, (), 1.0)
    ranges = tensor_ranges(proto, calibration, [site.norm.output[0] for site in sites])
    tables = {t.name: t for t in smoothed.graph.initializer}
    restoring, largest = [], 1.0
    for site in sites:
        s = _factors(site, ranges[site.norm.output[0]].channels, tables)
        largest = max(largest, float(s.max()), float(1.0 / s.min()))
        for name in site.norm.input[1:3]:
            _scaled(tables, name, 1.0 / s)
        for matmul in site.matmuls:
            _scaled(tables, matmul.input[1], s[:, None])
        if site.others:
            restoring.append(_restore(smoothed.graph, site, s))
    return smoothed, Smoothing(len(sites), sum(len(s.matmuls) for s in sites), tuple(restoring), largest)
