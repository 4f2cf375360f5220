"""The step inputs of a text-generation pair's graphs, computed on the host (both the host loop of
``runners/generation.py`` and the CUDA-graph decode of ``runners/graph_decode.py`` feed them)."""

from __future__ import annotations

import numpy as np

__all__ = ["NUMPY_TYPES", "step_feeds"]

# ONNX Runtime's element type names of the floats a pair's cache and logits may have, as numpy types (numpy has
# no bfloat16)
NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}


def step_feeds(context: int, ids: np.ndarray, position: int, tokens: int) -> dict[str, np.ndarray]:
    """Either graph's step inputs for ``ids`` ``[batch, n]`` written from slot ``position``: the ids padded to
    ``tokens``, their positions, the first slot (``cache_position``) and the mask over the context's slots
    (1: filled, the new tokens included; the padded slots stay 0, so the causal mask hides them)."""
    batch, count = ids.shape
    padded = np.zeros((batch, tokens), np.int64)
    padded[:, :count] = ids
    return {"input_ids": padded,
            "position_ids": np.broadcast_to(np.arange(position, position + tokens, dtype=np.int64), (batch, tokens)),
            "cache_position": np.full((batch, 1), position, np.int64),
            "attention_mask": np.broadcast_to((np.arange(context) < position + count).astype(np.int64), (batch, context))}
