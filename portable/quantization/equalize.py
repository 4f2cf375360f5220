"""Cross-layer equalization (CLE): consecutive convolutions' weight ranges made alike, exactly in float.

Why: for two convolutions with a positively homogeneous activation between them, scaling output channel ``i``
of the first by ``1 / s_i`` and input channel ``i`` of the second by ``s_i`` leaves the function unchanged
(Nagel et al., "Data-Free Quantization Through Weight Equalization and Bias Correction", ICCV 2019, section
4.1). With ``s_i = sqrt(r1_i / r2_i)`` (``r1_i`` the range of the first layer's output channel ``i``, ``r2_i``
of the second layer's input channel ``i``) both ranges become ``sqrt(r1_i r2_i)``: a depthwise convolution's
channel with 50x the range of its neighbours no longer sets the scale of all of them when weights are
quantized per tensor. Pairs are equalized in graph order and the whole chain repeated ``ROUNDS`` times (the
paper iterates until the scales settle).

ReLU commutes with a positive scale; ReLU6 does not (``min(relu(x / s), 6) != min(relu(x), 6) / s``). The
paper replaces ReLU6 by ReLU before equalizing, which changes the model: on EfficientNet-Lite0 that alone
leaves the float model at 1.1 dB against the original (Lite relies on the cap). Kept exact here instead: a
``Clip(0, c)`` between an equalized pair becomes ``Relu`` then ``Min`` with the per-channel cap ``c / s_i``
(a ``[1, C, 1, 1]`` constant), so the float model computes what it did (the float output is checked against
the original on the calibration samples before the pass is kept). ONNX Runtime's QDQ quantizer has no rule
for ``Min``; the quantize step asks it to quantize ``Min`` with its generic operator (``QDQOperatorBase``: both
inputs, the cap as a constant, and the output), so the graph stays integer between layers for an NPU; on
ONNX Runtime's CPU the ``Min`` runs in float between a DequantizeLinear and a QuantizeLinear.

Whether the pass is kept is measured, not assumed: with per-channel weights (the default on ``ort-cpu`` and
``qnn``) each output channel has its own scale already and CLE mostly moves range between activations;
:mod:`portable.quantization.quantizer` quantizes the model with and without it and keeps the better on the
calibration samples (``--equalization`` forces it, ``--no-equalization`` skips it).

Hand-written: ONNX Runtime's quantization tooling has no equalization (AIMET's ``cross_layer_equalization``
works on its own graph representation and replaces ReLU6 by ReLU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["ROUNDS", "Equalization", "equalize"]

ROUNDS = 4  # passes over the chain of pairs
SCALE_LIMITS = (1e-2, 1e2)  # s_i kept within these: a dead channel's range of 0 gives no scale


@dataclass(frozen=True)
class Equalization:
    """What the pass did: pairs equalized, ReLU6 caps made per-channel, the largest scale applied."""

    pairs: int
    capped: tuple[str, ...]  # the Min nodes that hold per-channel caps
    largest_scale: float

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "per_channel_caps": len(self.capped), "largest_scale": round(self.largest_scale, 4)}


@dataclass(frozen=True)
class _Pair:
    first: onnx.NodeProto
    act: onnx.NodeProto | None
    second: onnx.NodeProto
    cap: float | None  # a Clip(0, cap) between them


def _attr(node: onnx.NodeProto, name: str, default: Any) -> Any:
    found = next((a for a in node.attribute if a.name == name), None)
    return default if found is None else onnx.helper.get_attribute_value(found)


def _conv_ok(node: onnx.NodeProto, single: set[str]) -> bool:
    return (node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in single
            and (len(node.input) < 3 or not node.input[2] or node.input[2] in single))


def _activation(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> tuple[bool, float | None]:
    """(whether ``node`` is an activation CLE can pass, the cap of a Clip(0, cap))."""
    if node.op_type == "Relu":
        return True, None
    if node.op_type != "Clip" or len(node.input) < 2:
        return False, None
    low = constants.get(node.input[1]) if node.input[1] else None
    high = constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if low is None or float(low) != 0.0 or (len(node.input) > 2 and node.input[2] and high is None):
        return False, None
    return True, float(high) if high is not None else None


def _pairs(proto: onnx.ModelProto, kept: Collection[str]) -> list[_Pair]:
    """Conv -> [Relu | Clip(0, c)] -> Conv chains with single-reader tensors and constant weights, none of their
    nodes named in ``kept``."""
    uses = Counter(name for n in proto.graph.node for name in n.input)
    constants = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    single = {name for name in constants if uses[name] == 1}
    outputs = {o.name for o in proto.graph.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in proto.graph.node:
        for name in dict.fromkeys(n.input):
            readers.setdefault(name, []).append(n)

    def only_reader(name: str) -> onnx.NodeProto | None:
        found = readers.get(name, [])
        return found[0] if len(found) == 1 and name not in outputs and found[0].input[0] == name else None

    pairs = []
    for first in (n for n in proto.graph.node if _conv_ok(n, single)):
        nxt = only_reader(first.output[0])
        act, cap = None, None
        if nxt is not None and nxt.op_type in ("Relu", "Clip"):
            passes, cap = _activation(nxt, constants)
            act, nxt = (nxt, only_reader(nxt.output[0])) if passes else (None, None)
        if (nxt is not None and _conv_ok(nxt, single) and _groups_ok(first, nxt, constants)
                and not {first.name, nxt.name, act.name if act is not None else first.name} & set(kept)):
            pairs.append(_Pair(first, act, nxt, cap))
    return pairs


def _groups_ok(first: onnx.NodeProto, second: onnx.NodeProto, constants: dict[str, np.ndarray]) -> bool:
    """The second convolution reads the first's channels as plain (group 1) or depthwise (one per group)."""
    channels = constants[first.input[1]].shape[0]
    group = int(_attr(second, "group", 1))
    return group == 1 or (group == channels and constants[second.input[1]].shape[1] == 1)


def _ranges(first: np.ndarray, second: np.ndarray, depthwise: bool) -> tuple[np.ndarray, np.ndarray]:
    r1 = np.abs(first).reshape(first.shape[0], -1).max(axis=1)
    r2 = (np.abs(second).reshape(second.shape[0], -1).max(axis=1) if depthwise
          else np.abs(np.moveaxis(second, 1, 0)).reshape(second.shape[1], -1).max(axis=1))
    return r1.astype(np.float64), r2.astype(np.float64)


def _scales(r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.sqrt(r1 / r2)
    return np.where(np.isfinite(s) & (s > 0), np.clip(s, *SCALE_LIMITS), 1.0)


def _apply(pair: _Pair, tables: dict[str, onnx.TensorProto], caps: dict[str, np.ndarray]) -> float:
    """Equalize one pair in place (``caps``: the per-channel cap of a Clip between them, updated); the largest
    scale moved."""
    w1 = numpy_helper.to_array(tables[pair.first.input[1]]).astype(np.float64)
    w2 = numpy_helper.to_array(tables[pair.second.input[1]]).astype(np.float64)
    depthwise = int(_attr(pair.second, "group", 1)) > 1
    s = _scales(*_ranges(w1, w2, depthwise))
    shape2 = (-1, 1, 1, 1) if depthwise else (1, -1, 1, 1)
    _store(tables, pair.first.input[1], w1 / s.reshape(-1, 1, 1, 1))
    _store(tables, pair.second.input[1], w2 * s.reshape(shape2))
    if len(pair.first.input) > 2 and pair.first.input[2]:
        _store(tables, pair.first.input[2], numpy_helper.to_array(tables[pair.first.input[2]]) / s)
    if pair.act is not None and pair.cap is not None:
        caps[pair.act.name] = caps.get(pair.act.name, np.full(len(s), pair.cap)) / s
    return float(max(s.max(), 1.0 / s.min()))


def _store(tables: dict[str, onnx.TensorProto], name: str, value: np.ndarray) -> None:
    tables[name].CopyFrom(numpy_helper.from_array(value.astype(np.float32), name))


def _capped(graph: onnx.GraphProto, pairs: list[_Pair], caps: dict[str, np.ndarray]) -> tuple[str, ...]:
    """Each equalized Clip(0, c) becomes Relu (``<clip>_relu``) then Min with its per-channel cap, the Min named as
    the Clip was (a node name the user's file has); the Min nodes' names."""
    names = []
    for pair in (p for p in pairs if p.act is not None and p.act.name in caps):
        act = pair.act
        assert act is not None
        name, relu_out = act.name, f"{act.output[0]}_relu"  # the Min keeps the Clip's name: --exclude node:NAME
        graph.initializer.append(numpy_helper.from_array(caps[act.name].astype(np.float32).reshape(1, -1, 1, 1),
                                                         f"{name}_cap_value"))
        position = list(graph.node).index(act)
        graph.node.insert(position + 1, onnx.helper.make_node("Min", [relu_out, f"{name}_cap_value"], [act.output[0]],
                                                              name=name))
        relu = onnx.helper.make_node("Relu", [act.input[0]], [relu_out], name=f"{act.name}_relu")
        graph.node.remove(act)
        graph.node.insert(position, relu)
        names.append(name)
    return tuple(names)


def equalize(proto: onnx.ModelProto, kept: Collection[str] = ()) -> tuple[onnx.ModelProto, Equalization]:
    """A copy of ``proto`` with every Conv pair equalized (the module docstring); ``proto`` itself when there
    is none. ``kept``: nodes the user keeps float (``--exclude``); a pair with one of them (either Conv or the
    activation between) is left as it is, so the node keeps its name and op type and computes what it did."""
    pairs = _pairs(proto, kept)
    if not pairs:
        return proto, Equalization(0, (), 1.0)
    equalized = onnx.ModelProto()
    equalized.CopyFrom(proto)
    pairs = _pairs(equalized, kept)
    tables = {t.name: t for t in equalized.graph.initializer}
    caps: dict[str, np.ndarray] = {}
    largest = 1.0
    for _ in range(ROUNDS):
        for pair in pairs:
            largest = max(largest, _apply(pair, tables, caps))
    return equalized, Equalization(len(pairs), _capped(equalized.graph, pairs, caps), largest)
