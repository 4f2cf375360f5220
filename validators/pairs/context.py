"""A prefill/decode pair as the pair rules see it: each graph's cache I/O, step inputs and weights, read once.

Cache inputs and outputs are recognised by name in the three conventions in use:

* portable's: ``past_key_0`` / ``present_key_0`` (docs/llm.md);
* Hugging Face Optimum's: ``past_key_values.0.key`` / ``present.0.key``;
* Qualcomm AI Hub's: ``past_key_0_in`` / ``past_key_0_out``.

The weights are the floating-point initializers of at least :data:`WEIGHT_MIN_ELEMENTS` elements,
each identified by its dtype, dims and the sha256 of its bytes, not by its name: an exporter's
constant folding names a transposed weight after the node that made it, which differs between
two graphs of the same weights. Smaller floating-point constants (scales, a rotary frequency
table, epsilons) may differ with the token count and are not weights here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property

import onnx
from onnx import numpy_helper

from portable.policy import Policy, dtype_name
from portable.validators.context import ModelContext
from portable.validators.graphs import GraphScope

__all__ = ["ROLES", "WEIGHT_MIN_ELEMENTS", "CacheValue", "GraphSide", "PairContext", "Weight", "cache_slot"]

ROLES = ("prefill", "decode")
WEIGHT_MIN_ELEMENTS = 16
_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                     onnx.TensorProto.DOUBLE})
_KV = r"(?:(?P<kind>key|value)[._](?P<layer>\d+)|(?P<layer2>\d+)[._](?P<kind2>key|value))"
_INPUT = (re.compile(rf"^past(?:_key_values)?[._]{_KV}(?:_in)?$"),)
_OUTPUT = (re.compile(rf"^present(?:_key_values)?[._]{_KV}$"), re.compile(rf"^past[._]{_KV}_out$"))


def cache_slot(name: str, output: bool) -> tuple[int, str] | None:
    """(layer, "key"/"value") of a cache input (``output=False``) or output name; None for another value."""
    for pattern in _OUTPUT if output else _INPUT:
        match = pattern.match(name)
        if match:
            layer = match.group("layer") or match.group("layer2")
            return int(layer), match.group("kind") or match.group("kind2")
    return None


@dataclass(frozen=True)
class CacheValue:
    """One cache input or output: its name, dtype (ONNX enum) and dims (ints or symbols)."""

    name: str
    dtype: int
    dims: tuple[int | str, ...]

    def describe(self) -> str:
        return f"'{self.name}' {dtype_name(self.dtype)}[{', '.join(str(d) for d in self.dims)}]"


@dataclass(frozen=True)
class Weight:
    name: str
    dtype: int
    dims: tuple[int, ...]
    digest: str

    @property
    def key(self) -> tuple[int, tuple[int, ...], str]:
        return (self.dtype, self.dims, self.digest)

    def describe(self) -> str:
        return f"'{self.name}' {dtype_name(self.dtype)}{list(self.dims)}"


def _value(info: onnx.ValueInfoProto) -> CacheValue:
    tensor = info.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim)
    return CacheValue(info.name, tensor.elem_type, dims)


class GraphSide:
    """One graph of the pair: ``role`` is ``prefill`` or ``decode``."""

    def __init__(self, role: str, ctx: ModelContext) -> None:
        self.role, self.ctx = role, ctx

    @property
    def path(self) -> str:
        return self.ctx.path

    @cached_property
    def inputs(self) -> dict[str, CacheValue]:
        return {v.name: _value(v) for v in self.ctx.proto.graph.input}

    @cached_property
    def outputs(self) -> dict[str, CacheValue]:
        return {v.name: _value(v) for v in self.ctx.proto.graph.output}

    @cached_property
    def cache_inputs(self) -> dict[tuple[int, str], CacheValue]:
        return {slot: v for name, v in self.inputs.items() if (slot := cache_slot(name, False)) is not None}

    @cached_property
    def cache_outputs(self) -> dict[tuple[int, str], CacheValue]:
        return {slot: v for name, v in self.outputs.items() if (slot := cache_slot(name, True)) is not None}

    @property
    def step_inputs(self) -> dict[str, CacheValue]:
        """The inputs that are not the cache (token ids, positions, mask)."""
        cached = {v.name for v in self.cache_inputs.values()}
        return {n: v for n, v in self.inputs.items() if n not in cached}

    @property
    def tokens(self) -> int | None:
        """Tokens per call: dim 1 of ``input_ids`` (None when absent or symbolic)."""
        ids = self.inputs.get("input_ids")
        dim = ids.dims[1] if ids is not None and len(ids.dims) > 1 else None
        return dim if isinstance(dim, int) else None

    @cached_property
    def weights(self) -> tuple[Weight, ...]:
        return tuple(_weights(self.ctx))


def _weights(ctx: ModelContext) -> list[Weight]:
    graph, main = ctx.proto.graph, ctx.scopes[0]
    found = []
    for index, tensor in enumerate(graph.initializer):
        elements = 1
        for d in tensor.dims:
            elements *= d
        if tensor.data_type in _FLOATS and elements >= WEIGHT_MIN_ELEMENTS:
            found.append(Weight(tensor.name, tensor.data_type, tuple(tensor.dims), _digest(ctx, main, index, tensor)))
    return found


def _digest(ctx: ModelContext, scope: GraphScope, index: int, tensor: onnx.TensorProto) -> str:
    """sha256 of the tensor's values as little-endian bytes, read in place for a lean parse's payload."""
    digest = hashlib.sha256()
    if ctx.lean is not None and ctx.stripped(scope, index):
        payload = ctx.lean.payload(index)
        try:
            digest.update(payload)
        finally:
            payload.release()
    elif tensor.HasField("raw_data"):
        digest.update(tensor.raw_data)
    else:  # typed fields (float_data...): the bytes raw_data would hold, little-endian
        values = numpy_helper.to_array(tensor)
        bits = values.view(f"u{values.dtype.itemsize}")  # bfloat16 (ml_dtypes) has no byte order of its own
        digest.update(bits.astype(bits.dtype.newbyteorder("<")).tobytes())
    return digest.hexdigest()


class PairContext:
    """The two graphs, the context length they are checked against, and the policy."""

    def __init__(self, prefill: ModelContext, decode: ModelContext, policy: Policy, context: int | None = None) -> None:
        self.prefill, self.decode = GraphSide("prefill", prefill), GraphSide("decode", decode)
        self.policy = policy
        self.declared = context

    @property
    def sides(self) -> tuple[GraphSide, GraphSide]:
        return (self.prefill, self.decode)

    def other(self, side: GraphSide) -> GraphSide:
        return self.decode if side is self.prefill else self.prefill

    def side(self, role: str) -> GraphSide:
        return self.prefill if role == "prefill" else self.decode

    @cached_property
    def context(self) -> int | None:
        """The declared context (manifest, ``--context``), else the prefill graph's attention mask length."""
        if self.declared is not None:
            return self.declared
        mask = self.prefill.inputs.get("attention_mask")
        last = mask.dims[-1] if mask is not None and mask.dims else None
        return last if isinstance(last, int) else None
