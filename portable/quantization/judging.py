"""Which figure judges each output of a quantized model, and why: logits by top-1 agreement (split by the float
model's confidence), embeddings by cosine, any other tensor by SQNR.

Why: one figure for every output misleads. Top-1 agreement on a ``[batch, 768]`` sentence embedding is the
argmax of a vector's coordinates, which nothing reads (a trained MPNet's read 81.5 % at a mean cosine above
0.99), yet the default floor and the default search goal used it: a 1 h 44 min search toward a goal that means
nothing for that output. SQNR on a classifier's logits refuses a model for noise on inputs it cannot classify.

The kind is decided once per output, from what is known, in this order, and the reason is kept for the report:

1. ``--judge NAME=KIND`` (the user's word);
2. the task the source's manifest records (``task``: text-classification, image-classification... give logits;
   feature-extraction, sentence-similarity give embeddings), for its float outputs of rank 2 or more;
3. the output's name (``logits``; ``embedding``, ``embeds``, ``hidden_state``, ``pooler_output``);
4. the float model's outputs on the held-out samples: rows of unit length are a normalized embedding;
5. the graph: a ``[batch, classes]`` output made by a linear layer (Gemm, or MatMul with a constant weight, and
   its bias Add) or a Softmax is a classifier head's logits; one made by a Sigmoid holds independent
   probabilities (a tensor); any other ``[batch, N]`` output (a pooling's Div, a Tanh) is a vector judged by its
   direction; a rank-3 output made by a LayerNormalization is a transformer's token embeddings;
6. anything else is a tensor.

Token embeddings ``[batch, seq, hidden]`` of a model with a mask input ``[batch, seq]`` (``attention_mask``) are
judged on the positions it marks real: a padding position's vector is never read (mean pooling masks it), and
on all-MiniLM-L6-v2 padding positions read a cosine of 0.982 where the real tokens read 0.992.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from portable.errors import UsageError

__all__ = ["KINDS", "TASK_KINDS", "OutputKind", "mask_inputs", "output_kinds", "parse_judge", "recorded_task"]

KINDS = ("logits", "embedding", "tensor")
TASK_KINDS = {"text-classification": "logits", "token-classification": "logits", "image-classification": "logits",
              "audio-classification": "logits", "zero-shot-image-classification": "logits", "fill-mask": "logits",
              "question-answering": "logits", "multiple-choice": "logits", "feature-extraction": "embedding",
              "sentence-similarity": "embedding", "image-feature-extraction": "embedding"}
_EMBEDDING_NAMES = ("embedding", "embeds", "hidden_state", "pooler_output")
_PASS_THROUGH = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"})
UNIT_TOLERANCE = 1e-3  # |norm - 1| of every row: a normalized embedding (F.normalize gives 1 within 1e-6)


@dataclass(frozen=True)
class OutputKind:
    """What judges one output (``kind``: logits, embedding or tensor), why, and the mask input whose non-zero
    positions its rows are judged on (None: every row)."""

    kind: str
    why: str
    positions: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "why": self.why, "positions": self.positions}


def parse_judge(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--judge NAME=KIND`` values (KIND one of :data:`KINDS`)."""
    found = {}
    for text in values:
        name, sep, kind = text.partition("=")
        if not sep or not name or kind not in KINDS:
            raise UsageError(f"--judge {text!r}: expected OUTPUT=KIND, KIND one of {', '.join(KINDS)}")
        found[name] = kind
    return found


def recorded_task(source: Path) -> str | None:
    """The task the source's manifest (``MODEL.json`` beside it, as export writes it) records, if any."""
    manifest = source.with_name(source.name + ".json")
    try:
        task = json.loads(manifest.read_text(encoding="utf-8")).get("task") if manifest.is_file() else None
    except (OSError, ValueError, AttributeError):
        return None
    return task if isinstance(task, str) else None


def mask_inputs(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The integer or bool inputs ``[batch, seq]`` named as a mask (``attention_mask``), by name."""
    return {name: a for name, a in arrays.items() if "mask" in name.lower() and a.ndim == 2 and a.dtype.kind in "biu"}


def _producer(proto: onnx.ModelProto, name: str) -> onnx.NodeProto | None:
    """The node that makes ``name``, looking through ops that only reshape or pass it on."""
    made = {o: n for n in proto.graph.node for o in n.output}
    node = made.get(name)
    while node is not None and node.op_type in _PASS_THROUGH and node.input and node.input[0] in made:
        node = made[node.input[0]]
    return node


def _linear(proto: onnx.ModelProto, node: onnx.NodeProto) -> bool:
    """A Gemm, a MatMul with a constant weight, or the bias Add after one."""
    constants = {t.name for t in proto.graph.initializer} | {o for n in proto.graph.node if n.op_type == "Constant"
                                                            for o in n.output}
    if node.op_type == "Add" and any(i in constants for i in node.input):
        inner = next((_producer(proto, i) for i in node.input if i not in constants), None)
        return inner is not None and inner.op_type != "Add" and _linear(proto, inner)
    return node.op_type == "Gemm" or (node.op_type == "MatMul" and len(node.input) > 1 and node.input[1] in constants)


def _by_graph(proto: onnx.ModelProto, name: str, value: np.ndarray) -> OutputKind:
    node = _producer(proto, name)
    op = node.op_type if node is not None else "(an input)"
    if value.ndim == 2:
        if node is not None and op in ("Softmax", "LogSoftmax"):
            return OutputKind("logits", f"[batch, {value.shape[1]}] made by a {op}: class scores")
        if node is not None and _linear(proto, node):
            return OutputKind("logits", f"[batch, {value.shape[1]}] made by a linear layer ({op}): a classifier head")
        if op == "Sigmoid":
            return OutputKind("tensor", "made by a Sigmoid: independent probabilities, no single top-1")
        return OutputKind("embedding", f"[batch, {value.shape[1]}] made by {op}, not by a classifier head: a vector, "
                                       "judged by its direction")
    if value.ndim == 3 and op == "LayerNormalization":
        return OutputKind("embedding", "[batch, seq, hidden] made by a LayerNormalization: a transformer's token "
                                       "embeddings")
    return OutputKind("tensor", f"rank {value.ndim}, made by {op}: no rule makes it logits or an embedding")


def _by_name(name: str) -> OutputKind | None:
    lowered = name.lower()
    if "logit" in lowered:
        return OutputKind("logits", f"named {name!r}")
    if any(word in lowered for word in _EMBEDDING_NAMES):
        return OutputKind("embedding", f"named {name!r}")
    return None


def _unit_rows(value: np.ndarray) -> bool:
    norms = np.linalg.norm(np.asarray(value, dtype=np.float64).reshape(-1, value.shape[-1]), axis=1)
    return bool(norms.size) and bool(np.all(np.abs(norms - 1.0) < UNIT_TOLERANCE))


def _kind(proto: onnx.ModelProto, name: str, value: np.ndarray, task: str | None,
          overrides: Mapping[str, str]) -> OutputKind:
    if name in overrides:
        return OutputKind(overrides[name], f"--judge {name}={overrides[name]}")
    vectors = value.dtype.kind == "f" and value.ndim >= 2 and value.shape[-1] >= 2
    if not vectors:
        return OutputKind("tensor", f"shape {list(value.shape)[1:]} after the batch, {value.dtype}: not a vector")
    if task in TASK_KINDS:
        return OutputKind(TASK_KINDS[task], f"the source's manifest records task {task!r}")
    named = _by_name(name)
    if named is not None:
        return named
    if value.ndim == 2 and _unit_rows(value):
        return OutputKind("embedding", "every row has unit length on the held-out samples: a normalized embedding")
    return _by_graph(proto, name, value)


def output_kinds(proto: onnx.ModelProto, outputs: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray], *,
                 task: str | None = None, overrides: Mapping[str, str] | None = None) -> dict[str, OutputKind]:
    """Each output's kind (the module docstring), from the float model's graph, its ``outputs`` on the held-out
    samples (the batch axis first) and those samples' ``inputs``."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(outputs))
    if unknown:
        raise UsageError(f"--judge {', '.join(unknown)}: not an output of the model (its outputs: "
                         f"{', '.join(outputs)})")
    masks = mask_inputs(inputs)
    kinds = {}
    for name, value in outputs.items():
        found = _kind(proto, name, value, task, overrides)
        mask = next((m for m, a in masks.items() if value.ndim >= 3 and a.shape == value.shape[:2]), None)
        kinds[name] = OutputKind(found.kind, found.why, mask if found.kind != "tensor" else None)
    return kinds
