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
the float one, ``create_weight_matching``), named by the node that reads the weight.
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

from portable.quantization.data import Reader, Samples

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


def _weights(float_model: Path, int8_model: Path, float_proto: onnx.ModelProto) -> list[NodeError]:
    from onnxruntime.quantization.qdq_loss_debug import (
        compute_signal_to_quantization_noice_ratio,
        create_weight_matching,
    )

    readers = _readers(float_proto)
    rows = []
    for name, match in create_weight_matching(str(float_model), str(int8_model)).items():
        # as compute_weight_error, which fails on a scalar weight: its dequantized value is a NumPy scalar
        pair = [np.atleast_1d(np.asarray(match[k])) for k in ("float", "dequantized")]
        sqnr = compute_signal_to_quantization_noice_ratio(*pair)
        rows.append(NodeError(name, *readers.get(name, ("", "")), sqnr, None, "weight"))
    return rows


def _activations(model: Path, samples: Samples, folder: Path) -> dict[str, Any]:
    from onnxruntime.quantization.qdq_loss_debug import collect_activations, modify_model_output_intermediate_tensors

    augmented = folder / f"{model.stem}.augmented.onnx"
    modify_model_output_intermediate_tensors(str(model), str(augmented))
    return collect_activations(str(augmented), Reader(samples))


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
    """The ``count`` quantized tensors whose own Q/DQ pair costs most (lowest ``qdq_sqnr_db``)."""
    with _silent():
        return _worst(float_model, int8_model, samples, count)


def _worst(float_model: Path, int8_model: Path, samples: Samples, count: int) -> tuple[NodeError, ...]:
    from onnxruntime.quantization.qdq_loss_debug import compute_activation_error, create_activation_matching
    from onnxruntime.quantization.quant_utils import QUANT_INPUT_SUFFIX  # "_QuantizeLinear_Input"

    with tempfile.TemporaryDirectory(prefix="portable-qdq-debug-") as tmp:
        folder = Path(tmp)
        matched = create_activation_matching(_activations(int8_model, samples, folder),
                                             _activations(float_model, samples, folder))
    errors = compute_activation_error({k: v for k, v in matched.items() if "float" in v})  # it reads ["float"]
    float_proto = onnx.load(str(float_model), load_external_data=False)
    made = _producers(float_proto)
    made_int8 = _producers(onnx.load(str(int8_model), load_external_data=False))
    rows = []
    for name, err in errors.items():
        node, op = made.get(name, ("", "(input)"))
        before = made_int8.get(name + QUANT_INPUT_SUFFIX) or made_int8.get(name) or ("", op)
        folded = name in made and before[1] != op
        rows.append(NodeError(name, node, op, None if folded else err["qdq_err"], err.get("xmodel_err")))
    rows += _weights(float_model, int8_model, float_proto)
    return tuple(sorted(rows, key=_rank)[:count])


def _rank(row: NodeError) -> tuple[bool, float, str]:
    return row.qdq_sqnr_db is None, row.qdq_sqnr_db if row.qdq_sqnr_db is not None else 0.0, row.tensor
