"""Per-node quantization error, by ONNX Runtime's ``qdq_loss_debug``: both models are made to
output every float tensor, run on the same held-out samples, and matched tensor by tensor.

For each quantized tensor: ``qdq_sqnr_db`` compares it just before and just after its own Q/DQ
pair in the int8 model (the error that pair adds), ``vs_float_sqnr_db`` compares the int8
model's value with the float model's (the error accumulated up to there). The worst by the
first are where ``--exclude`` helps most; the report lists them with the node that makes the
tensor in the float model. Where the quantizer folded that node into the Q/DQ pair (a Relu
after a Conv: the uint8 range does its clamp), the tensor before the pair is the Conv's, so the
pair's own error is not measurable: ``qdq_sqnr_db`` is None there and the row ranks last.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "node": self.node, "op_type": self.op_type,
                "qdq_sqnr_db": _round(self.qdq_sqnr_db), "vs_float_sqnr_db": _round(self.vs_float_sqnr_db)}


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None and math.isfinite(value) else None


def _producers(proto: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    return {out: (n.name, n.op_type) for n in proto.graph.node for out in n.output}


def _activations(model: Path, samples: Samples, folder: Path) -> dict[str, Any]:
    from onnxruntime.quantization.qdq_loss_debug import collect_activations, modify_model_output_intermediate_tensors

    augmented = folder / f"{model.stem}.augmented.onnx"
    modify_model_output_intermediate_tensors(str(model), str(augmented))
    return collect_activations(str(augmented), Reader(samples))


def worst_nodes(float_model: Path, int8_model: Path, samples: Samples, count: int = 10) -> tuple[NodeError, ...]:
    """The ``count`` quantized tensors whose own Q/DQ pair costs most (lowest ``qdq_sqnr_db``)."""
    from onnxruntime.quantization.qdq_loss_debug import compute_activation_error, create_activation_matching
    from onnxruntime.quantization.quant_utils import QUANT_INPUT_SUFFIX  # "_QuantizeLinear_Input"

    with tempfile.TemporaryDirectory(prefix="portable-qdq-debug-") as tmp:
        folder = Path(tmp)
        matched = create_activation_matching(_activations(int8_model, samples, folder),
                                             _activations(float_model, samples, folder))
    errors = compute_activation_error({k: v for k, v in matched.items() if "float" in v})  # it reads ["float"]
    made = _producers(onnx.load(str(float_model), load_external_data=False))
    made_int8 = _producers(onnx.load(str(int8_model), load_external_data=False))
    rows = []
    for name, err in errors.items():
        node, op = made.get(name, ("", "(input)"))
        before = made_int8.get(name + QUANT_INPUT_SUFFIX) or made_int8.get(name) or ("", op)
        folded = name in made and before[1] != op
        rows.append(NodeError(name, node, op, None if folded else err["qdq_err"], err.get("xmodel_err")))
    return tuple(sorted(rows, key=_rank)[:count])


def _rank(row: NodeError) -> tuple[bool, float, str]:
    return row.qdq_sqnr_db is None, row.qdq_sqnr_db if row.qdq_sqnr_db is not None else 0.0, row.tensor
