"""Which layers' int8 weights cost the model most, end to end: the precision search's first ranking.

Why: the report's per-node loss (:mod:`portable.quantization.nodes`) is each tensor's own Q/DQ error, which
says nothing of how much of it reaches the output. A trained convnet's stem is the plain case: its 27-weight
filters round well (a small own error), yet every later layer amplifies what they lose (EfficientNet-Lite0:
the stem's int8 weights alone, everything else float, leave the logits at 21 dB; block 0's depthwise at 22 dB;
no other layer below 29 dB). Here each Conv, Gemm and MatMul with a constant weight has that weight rounded
as ONNX Runtime's quantizer will (``correction.ort_rounded``: the run's type, symmetry, per-channel axis), the rest
of the float model untouched, and its outputs' SQNR against the float model's is measured on the calibration
samples. Worst first. One float run per layer: this runs only for the precision search (a user's budget).
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from portable.quantization.accuracy import sqnr_db
from portable.quantization.data import Samples
from portable.quantization.settings import Settings

__all__ = ["LayerSensitivity", "weight_sensitivity"]


@dataclass(frozen=True)
class LayerSensitivity:
    """One layer: its node, and the worst output SQNR with only its weights int8."""

    node: str
    sqnr_db: float


def _axis(node: onnx.NodeProto, settings: Settings) -> int | None:
    if not settings.per_channel_for(node.op_type):
        return None
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return 1 if node.op_type == "MatMul" else 0


def _layers(proto: onnx.ModelProto) -> list[onnx.NodeProto]:
    uses = Counter(name for n in proto.graph.node for name in n.input)
    weights = {t.name for t in proto.graph.initializer if uses[t.name] == 1 and len(t.dims) >= 2}
    return [n for n in proto.graph.node if n.op_type in ("Conv", "Gemm", "MatMul") and n.name
            and len(n.input) > 1 and n.input[1] in weights]


def _overridable(proto: onnx.ModelProto, names: list[str], path: Path) -> None:
    """``proto`` saved with the weights ``names`` also listed as graph inputs: ONNX Runtime then takes a value fed
    under such a name in place of the initializer (an overridable initializer), so one session serves every layer's
    trial, the weights left as they are in the file."""
    tables = {t.name: t for t in proto.graph.initializer}
    augmented = onnx.ModelProto()
    augmented.CopyFrom(proto)
    augmented.graph.input.extend(onnx.helper.make_tensor_value_info(n, tables[n].data_type, list(tables[n].dims))
                                 for n in names)
    onnx.save(augmented, str(path))


def _outputs(session: Any, samples: Samples, weight: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    runs = [session.run(None, {**feeds, **(weight or {})}) for feeds in samples.batches()]
    return [np.concatenate([r[i] for r in runs]) for i in range(len(runs[0]))]


def _rounded(proto: onnx.ModelProto, node: onnx.NodeProto, settings: Settings) -> dict[str, np.ndarray]:
    """``node``'s weight as ONNX Runtime's quantizer will round it, to feed in place of the initializer."""
    from portable.quantization.correction import ort_rounded

    weight = numpy_helper.to_array(next(t for t in proto.graph.initializer if t.name == node.input[1]))
    return {node.input[1]: ort_rounded(weight.astype(np.float64), settings, _axis(node, settings)).astype(weight.dtype)}


def weight_sensitivity(source: Path, settings: Settings, samples: Samples) -> list[LayerSensitivity]:
    """Every weight layer of ``source``, the one whose int8 weights alone cost the outputs most first, measured on
    ``samples`` (a few calibration samples: one float run of them per layer)."""
    from portable.quantization.speed import cpu_session

    proto = onnx.load(str(source))
    layers = _layers(proto)
    with tempfile.TemporaryDirectory(prefix="portable-sensitivity-") as tmp:
        _overridable(proto, [n.input[1] for n in layers], Path(tmp) / "overridable.onnx")
        session = cpu_session(Path(tmp) / "overridable.onnx", "the float model")
    reference, found = _outputs(session, samples), []
    for node in layers:
        outputs = _outputs(session, samples, _rounded(proto, node, settings))
        found.append(LayerSensitivity(node.name, min((sqnr_db(r, o) for r, o in zip(reference, outputs)),
                                                     default=math.inf)))
    return sorted(found, key=lambda layer: layer.sqnr_db)
