"""What the float model's activations look like on the calibration samples, for the passes that run
before ONNX Runtime's quantizer: each chosen tensor's largest magnitude, and its largest magnitude per
channel of the last axis (a transformer's hidden dimension).

Hand-written: ONNX Runtime's calibrators keep one min/max (or one histogram) per tensor, not per channel,
and hold them inside ``quantize_static``; the passes need per-channel figures of the float model before it.
One float run over the calibration samples, the chosen tensors added as graph outputs (what ONNX Runtime's
calibrators do too), reduced batch by batch so no activation is kept (``calibration_outputs``, which bias
correction's input means read as well).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from portable.quantization.data import Samples

__all__ = ["TensorRange", "calibration_outputs", "float_tensors", "tensor_ranges"]


@dataclass(frozen=True)
class TensorRange:
    """One tensor over the calibration samples: rank, largest |value|, largest |value| per last-axis channel."""

    name: str
    rank: int
    absmax: float
    channels: np.ndarray  # [last dim], float64

    @property
    def outlier_ratio(self) -> float:
        """The largest channel's magnitude over the median channel's (1: every channel alike)."""
        median = float(np.median(self.channels))
        return float(self.channels.max() / median) if median > 0 else float("inf")


def float_tensors(proto: onnx.ModelProto) -> dict[str, int]:
    """Every float intermediate tensor of the graph with a known rank (shape inference), by name."""
    inferred = onnx.shape_inference.infer_shapes(proto)
    infos = list(inferred.graph.value_info) + list(inferred.graph.output)
    return {v.name: len(v.type.tensor_type.shape.dim) for v in infos
            if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and v.type.tensor_type.HasField("shape")}


def calibration_outputs(proto: onnx.ModelProto, calibration: Samples, names: list[str],
                        what: str = "the float model") -> Iterator[dict[str, np.ndarray]]:
    """``names`` (intermediate tensors added as graph outputs, as ONNX Runtime's calibrators do) for each
    calibration batch, from one ONNX Runtime CPU session of ``proto``."""
    from portable.quantization.speed import cpu_session

    augmented = onnx.ModelProto()
    augmented.CopyFrom(proto)
    have = {o.name for o in augmented.graph.output}
    augmented.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t) for t in names if t not in have)
    with tempfile.TemporaryDirectory(prefix="portable-activations-") as tmp:
        path = Path(tmp) / "augmented.onnx"
        onnx.save(augmented, str(path))
        session = cpu_session(path, what)
        for feeds in calibration.batches():
            yield dict(zip(names, session.run(names, feeds)))


def _reduce(value: np.ndarray) -> np.ndarray:
    magnitude = np.abs(np.asarray(value, dtype=np.float64))
    return magnitude.reshape(-1, magnitude.shape[-1]).max(axis=0) if magnitude.ndim else magnitude.reshape(1)


def tensor_ranges(proto: onnx.ModelProto, calibration: Samples, names: Iterable[str]) -> dict[str, TensorRange]:
    """``names``' ranges over every calibration batch of the float model ``proto``."""
    wanted = list(dict.fromkeys(names))
    channels: dict[str, np.ndarray] = {}
    ranks: dict[str, int] = {}
    for batch in calibration_outputs(proto, calibration, wanted) if wanted else ():
        for name, value in batch.items():
            reduced = _reduce(value)
            channels[name] = reduced if name not in channels else np.maximum(channels[name], reduced)
            ranks[name] = np.ndim(value)
    return {name: TensorRange(name, ranks[name], float(c.max(initial=0.0)), c) for name, c in channels.items()}
