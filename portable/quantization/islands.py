"""Float islands: the activations 8 bits per tensor cannot hold, kept in float, found from the calibration data.

Why: opset 18's activations are quantized per tensor, one scale for every channel. Two kinds of tensor
do not survive that, and a trained transformer has both (all-MiniLM-L6-v2: int8 everywhere gives a
sentence-embedding cosine of 0.34 against float):

- **masking sentinels**: an attention mask added as ``Where(mask, 0, finfo.min)``; the calibrated range
  of the mask and of the scores it is added to reaches -3.4e38, so the scale is 1.3e36 and every real
  score quantizes to the same level (the attention turns uniform). A tensor whose calibrated magnitude
  reaches ``SENTINEL`` is one.
- **outlier channels**: the residual stream of a BERT carries a few hidden channels hundreds of times
  larger than the rest (MiniLM: the FFN outputs' largest channel is up to 195x the median one); a
  per-tensor scale leaves the median channel a few of the 256 levels. A rank-3 ``[batch, seq, hidden]``
  tensor whose largest channel exceeds ``OUTLIER_RATIO`` times its median channel is one.

Each such tensor is left float: the nodes that read it and the node that makes it are kept out of the
quantizer (``nodes_to_exclude``), except a MatMul, Gemm or Conv with a constant weight, which stays int8
with its output left float (``OpTypesToExcludeOutputQuantization`` for its op type: ONNX Runtime then
quantizes such an output only where a quantized node reads it). Nothing of the model changes: it is the
quantizer's choice of what to quantize. Rank-4 NCHW convnets have no rank-3 activations; this pass finds
nothing there unless a constant holds a sentinel.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from portable.quantization.activations import TensorRange, float_tensors, tensor_ranges
from portable.quantization.data import Samples

__all__ = ["OUTLIER_RATIO", "SENTINEL", "FloatIslands", "float_islands"]

SENTINEL = 1e30  # a masking constant (finfo.min, -inf), not a value a trained layer computes
OUTLIER_RATIO = 24.0  # the median channel keeps about 256 / 24 / 2 = 5 levels of an asymmetric 8-bit range
WEIGHT_OPS = ("MatMul", "Gemm", "Conv")
# ops that pass a sentinel on unchanged in magnitude (the mask's way to the Softmax)
CARRIERS = frozenset({"Where", "Add", "Sub", "Mul", "Neg", "Min", "Max", "Expand", "Cast", "Reshape", "Unsqueeze",
                      "Squeeze", "Transpose", "Concat", "Slice", "Gather", "Tile", "Flatten", "Identity"})


@dataclass(frozen=True)
class FloatIslands:
    """What the pass found and what it keeps out of the quantizer."""

    sentinel_tensors: tuple[str, ...]
    outlier_tensors: tuple[str, ...]
    nodes: tuple[str, ...]  # node names kept float
    float_output_ops: tuple[str, ...]  # op types whose outputs are quantized only where a quantized node reads them

    def to_dict(self) -> dict[str, Any]:
        return {"sentinel_tensors": list(self.sentinel_tensors), "outlier_tensors": list(self.outlier_tensors),
                "nodes_kept_float": len(self.nodes), "float_output_ops": list(self.float_output_ops),
                "outlier_ratio": OUTLIER_RATIO}


def _huge(tensor: onnx.TensorProto) -> bool:
    return tensor.data_type == onnx.TensorProto.FLOAT and bool(np.any(np.abs(numpy_helper.to_array(tensor)) >= SENTINEL))


def _huge_constants(proto: onnx.ModelProto) -> set[str]:
    """Initializers and Constant nodes' outputs holding a value of magnitude ``SENTINEL`` or more."""
    found = {t.name for t in proto.graph.initializer if _huge(t)}
    return found | {n.output[0] for n in proto.graph.node if n.op_type == "Constant"
                    and any(a.name == "value" and _huge(a.t) for a in n.attribute)}


def _sentinel_candidates(proto: onnx.ModelProto) -> list[str]:
    """Tensors a huge constant reaches through ops that carry it unchanged (graph order)."""
    reached = _huge_constants(proto)
    found = []
    for node in proto.graph.node:
        if node.op_type in CARRIERS and reached.intersection(node.input):
            reached.update(node.output)
            found.extend(node.output)
    return found


def _nodes_around(proto: onnx.ModelProto, tensors: Iterable[str]) -> tuple[list[str], set[str]]:
    """Names of the nodes to keep float around ``tensors``, and the weight op types whose output is left float."""
    chosen, keep, outputs_float = set(tensors), [], set()
    for node in proto.graph.node:
        makes, reads = chosen.intersection(node.output), chosen.intersection(node.input)
        if makes and node.op_type in WEIGHT_OPS and not reads:
            outputs_float.add(node.op_type)
        elif (makes or reads) and node.name:
            keep.append(node.name)
    return keep, outputs_float


def _outliers(ranges: dict[str, TensorRange]) -> list[str]:
    return [r.name for r in ranges.values() if r.rank == 3 and r.absmax < SENTINEL and r.outlier_ratio > OUTLIER_RATIO]


def float_islands(proto: onnx.ModelProto, calibration: Samples) -> FloatIslands:
    """The tensors of the module docstring in ``proto`` (the float model the quantizer reads) on ``calibration``."""
    made = {o for n in proto.graph.node for o in n.output}
    candidates = _sentinel_candidates(proto)
    rank3 = [name for name, rank in float_tensors(proto).items() if rank == 3 and name in made]
    ranges = tensor_ranges(proto, calibration, candidates + rank3)
    sentinels = [name for name in candidates if name in ranges and not ranges[name].absmax < SENTINEL]
    outliers = _outliers(ranges)
    nodes, outputs_float = _nodes_around(proto, sentinels + outliers)
    return FloatIslands(tuple(sentinels), tuple(outliers), tuple(nodes), tuple(sorted(outputs_float)))
