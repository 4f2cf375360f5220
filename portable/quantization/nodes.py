"""Per-node quantization error, by ONNX Runtime's ``qdq_loss_debug``: both models are made to
output every float tensor, run on the same held-out samples, and matched tensor by tensor.

For each quantized tensor: ``qdq_sqnr_db`` compares it just before and just after its own Q/DQ
pair in the int8 model (the error that pair adds), ``vs_float_sqnr_db`` compares the int8
model's value with the float model's (the error accumulated up to there). The worst by the
first are where ``--exclude`` helps most; the report lists them with the node that makes the
tensor in the float model. Where the quantizer folded that node into the Q/DQ pair (a Relu
after a Conv: the uint8 range does its clamp), the tensor before the pair is the Conv's, so the
pair's own error is not measurable: ``qdq_sqnr_db`` is None there and the row ranks last.
Weights are ranked with them (``kind`` "weight": the SQNR of the dequantized weight against
the float one), named by the node that reads the weight.

Like with like: the float model here is the one the quantizer read, before any pass that changes what it
computes (``Quantized.reference``). SmoothQuant multiplies a MatMul's weight rows by its factors (up to 4.4x
on a trained MPNet) and divides the LayerNorm output before it: compared with the user's unscaled weights,
healthy weights read -5.6 dB where their int8 rounding costs about 40 dB, and ``--exclude node:NAME`` then
points at the wrong layers. qdq_loss_debug augments the models and matches their tensors; the SQNRs are
:func:`~portable.quantization.accuracy.sqnr_db` (summed batch by batch, one sample at a time, so no batch's
activations outlive it), and the weights are dequantized here, because its helpers get both wrong in places
(see :func:`_dequantized` and :func:`_activation_sqnr`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from portable.quantization.accuracy import sqnr_db, sqnr_of_sums
from portable.quantization.data import Samples

__all__ = ["NodeError", "worst_nodes"]


@dataclass(frozen=True)
class NodeError:
    """One quantized tensor: the float model's node that makes it, and its two SQNRs."""

    tensor: str
    node: str
    op_type: str
    qdq_sqnr_db: float | None  # None: the node was folded into its Q/DQ pair (see the module docstring)
    vs_float_sqnr_db: float | None
    kind: str = "activation"  # or "weight"

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "kind": self.kind, "node": self.node, "op_type": self.op_type,
                "qdq_sqnr_db": _round(self.qdq_sqnr_db), "vs_float_sqnr_db": _round(self.vs_float_sqnr_db)}


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None and math.isfinite(value) else None


def _producers(proto: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    return {out: (n.name, n.op_type) for n in proto.graph.node for out in n.output}


def _readers(proto: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    return {i: (n.name, n.op_type) for n in reversed(proto.graph.node) for i in n.input}


def _dequantized(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int) -> np.ndarray:
    """DequantizeLinear's arithmetic in int32 and float64. Hand-written because qdq_loss_debug's own
    (``_run_dequantize_linear``) subtracts the zero point in the tensor's dtype: a uint8 weight with a
    zero point of 128 wraps around (ONNX Runtime 1.32), and its SQNR comes out at -15 dB."""
    zp = np.zeros_like(scale, dtype=np.int32) if zero_point is None else zero_point.astype(np.int32)
    if scale.size > 1:  # per-axis: scale and zero point along ``axis``
        shape = [1] * q.ndim
        shape[axis] = scale.size
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return (q.astype(np.int32) - zp).astype(np.float64) * scale.astype(np.float64)


def _weights(float_proto: onnx.ModelProto, int8_proto: onnx.ModelProto) -> list[NodeError]:
    """Each quantized weight (a DequantizeLinear of an integer initializer ``NAME_quantized``) against
    the float model's ``NAME``, named by the node that reads ``NAME`` there."""
    from onnx import numpy_helper
    from onnxruntime.quantization.quant_utils import TENSOR_NAME_QUANT_SUFFIX  # "_quantized"

    floats = {t.name: t for t in float_proto.graph.initializer}
    ints = {t.name: t for t in int8_proto.graph.initializer}
    readers, rows = _readers(float_proto), []
    for node in int8_proto.graph.node:
        name = node.input[0].removesuffix(TENSOR_NAME_QUANT_SUFFIX) if node.op_type == "DequantizeLinear" else ""
        if not name or node.input[0] not in ints or name not in floats:
            continue
        q, scale = numpy_helper.to_array(ints[node.input[0]]), numpy_helper.to_array(ints[node.input[1]])
        zp = numpy_helper.to_array(ints[node.input[2]]) if len(node.input) > 2 and node.input[2] else None
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        expected = numpy_helper.to_array(floats[name])
        sqnr = sqnr_db(expected, _dequantized(q, scale, zp, axis if axis >= 0 else axis + q.ndim))
        rows.append(NodeError(name, *readers.get(name, ("", "")), sqnr, None, "weight"))
    return rows


def _activation_sums(match: dict[str, Any]) -> np.ndarray:
    """One batch of one tensor: ``sum(pre^2)``, ``sum((pre - post)^2)``, ``sum(float^2)``, ``sum((float - post)^2)``
    (the last two NaN without a float tensor), which add up over batches into :func:`_activation_sqnr`'s figures."""
    def joined(key: str) -> np.ndarray:
        return np.concatenate([np.ravel(v) for v in match[key]]).astype(np.float64)

    pre, post = joined("pre_qdq"), joined("post_qdq")
    ref = joined("float") if "float" in match else None
    return np.array([np.sum(pre**2), np.sum((pre - post) ** 2), *((np.sum(ref**2), np.sum((ref - post) ** 2))
                                                                  if ref is not None else (np.nan, np.nan))])


def _activation_sqnr(sums: np.ndarray) -> tuple[float, float]:
    """Own-pair and vs-float SQNR of one tensor over the samples (our :func:`sqnr_of_sums`: ORT's
    ``compute_activation_error`` puts an identical all-zero tensor, an attention mask's, at 0 dB)."""
    return sqnr_of_sums(sums[0], sums[1]), sqnr_of_sums(sums[2], sums[3])


def _augmented(model: Path, folder: Path) -> Any:
    """A session (graph optimizations off, as qdq_loss_debug runs it) of ``model`` made to output every float
    tensor (qdq_loss_debug's ``modify_model_output_intermediate_tensors``)."""
    from onnxruntime.quantization.qdq_loss_debug import modify_model_output_intermediate_tensors

    from portable.quantization.speed import cpu_session

    augmented = folder / f"{model.stem}.augmented.onnx"
    modify_model_output_intermediate_tensors(str(model), str(augmented))
    return cpu_session(augmented, f"{model.stem} with its tensors as outputs", as_written=True)


def _collected(session: Any, feeds: dict[str, np.ndarray]) -> dict[str, list[np.ndarray]]:
    """One batch as qdq_loss_debug's ``collect_activations`` gives it (tensor name -> [value]). Its loop,
    hand-written: it runs every batch before it returns and holds every activation of all of them (9.5 GB for a
    110M-parameter encoder at 128 tokens and 8 samples); here one batch is reduced to sums before the next."""
    from onnxruntime.quantization.qdq_loss_debug import _TENSOR_SAVE_POSTFIX

    outputs = [o.name for o in session.get_outputs()]
    return {name.removesuffix(_TENSOR_SAVE_POSTFIX): [value] for name, value in zip(outputs, session.run(None, feeds))
            if name.endswith(_TENSOR_SAVE_POSTFIX)}


def _one_by_one(samples: Samples) -> Samples:
    """The samples a run at a time: one each for a dynamic batch (the least held at once), else the model's batch."""
    return samples if samples.static else Samples(samples.arrays, 1, samples.source)


def _sums(float_model: Path, int8_model: Path, samples: Samples) -> dict[str, np.ndarray]:
    """:func:`_activation_sums` of every matched tensor, over all samples."""
    from onnxruntime.quantization.qdq_loss_debug import create_activation_matching

    totals: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="portable-qdq-debug-") as tmp:
        int8_session, float_session = _augmented(int8_model, Path(tmp)), _augmented(float_model, Path(tmp))
        for feeds in _one_by_one(samples).batches():
            matched = create_activation_matching(_collected(int8_session, feeds), _collected(float_session, feeds))
            for name, match in matched.items():
                if match.get("pre_qdq") is not None and match.get("post_qdq") is not None:
                    totals[name] = totals.get(name, 0.0) + _activation_sums(match)
    return totals


@contextlib.contextmanager
def _silent() -> Iterator[None]:
    """qdq_loss_debug's ``logging.error`` lines (a tensor it cannot match) and prints: the table says it all."""
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(previous)


def worst_nodes(float_model: Path, int8_model: Path, samples: Samples, count: int = 10) -> tuple[NodeError, ...]:
    """The ``count`` quantized tensors whose own Q/DQ pair costs most (lowest ``qdq_sqnr_db``). ``float_model`` is
    the float model as the quantizer read it, before any pass that changes what it computes (the user's model,
    or its SmoothQuant form: see the module docstring)."""
    with _silent():
        return _worst(float_model, int8_model, samples, count)


def _worst(float_model: Path, int8_model: Path, samples: Samples, count: int) -> tuple[NodeError, ...]:
    from onnxruntime.quantization.quant_utils import QUANT_INPUT_SUFFIX  # "_QuantizeLinear_Input"

    sums = _sums(float_model, int8_model, samples)
    float_proto = onnx.load(str(float_model), load_external_data=False)
    int8_proto = onnx.load(str(int8_model), load_external_data=False)
    made, made_int8 = _producers(float_proto), _producers(int8_proto)
    rows = []
    for name, total in sums.items():
        if np.isnan(total[2]):
            continue
        node, op = made.get(name, ("", "(input)"))
        before = made_int8.get(name + QUANT_INPUT_SUFFIX) or made_int8.get(name) or ("", op)
        own, vs_float = _activation_sqnr(total)
        rows.append(NodeError(name, node, op, None if name in made and before[1] != op else own, vs_float))
    rows += _weights(float_proto, int8_proto)
    return tuple(sorted(rows, key=_rank)[:count])


def _rank(row: NodeError) -> tuple[bool, float, str]:
    return row.qdq_sqnr_db is None, row.qdq_sqnr_db if row.qdq_sqnr_db is not None else 0.0, row.tensor
