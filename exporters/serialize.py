"""The export's model as the file's bytes, without copying its weights.

Why not ``ir.to_proto(model).SerializeToString()``: that copies every weight twice (``tobytes``
into the proto, then the proto into the serialized bytes), 880 MB for BERT-base's 440 MB, and the
second copy touches fresh memory (page faults that cost 0.75-2.5 s on a VM). Neither protobuf nor
onnx-ir writes a field straight from memory it does not own (onnx-ir's ``tofile`` streams only
*external* data, which the contract forbids). So the model is serialized *hollow*: the large
initializers (the lean parse's criterion, ``validators.lean``) carry no ``raw_data``. Their
bytes, views of the tensors' own memory wherever they already lie there as the file stores them,
are spliced back in by :func:`~portable.validators.wire.splice_payloads`, the inverse of the
lean parse. The pieces join to the same bytes as protobuf's deterministic serialization (tested),
and the hollow proto is what validation reads, as it would read the lean parse of the file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from portable.validators.lean import LEAN_MIN_ELEMENTS
from portable.validators.wire import splice_payloads

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

__all__ = ["Serialized", "hollow", "payload_view", "serialize", "spliced"]


@dataclass(frozen=True)
class Serialized:
    """The model's file: ``proto`` without the payloads, ``payloads`` by initializer index,
    ``pieces`` the file's bytes in order (views of ``payloads`` among them)."""

    proto: onnx.ModelProto
    payloads: dict[int, memoryview]
    pieces: tuple[bytes | memoryview, ...]

    @property
    def size(self) -> int:
        return sum(memoryview(p).nbytes for p in self.pieces)

    def tobytes(self) -> bytes:
        return b"".join(self.pieces)


def serialize(model: ir.Model, stamp: Callable[[onnx.ModelProto], None] | None = None) -> Serialized:
    """The model's bytes as :class:`Serialized`; ``stamp`` adds metadata to the proto first."""
    proto, payloads = hollow(model)
    if stamp is not None:
        stamp(proto)
    return spliced(proto, payloads)


def hollow(model: ir.Model) -> tuple[onnx.ModelProto, dict[int, memoryview]]:
    """The model's proto without the large payloads, and those payloads by initializer index."""
    import onnx_ir as ir

    held = _held_initializers(model.graph)
    with _hollowed(held):
        proto = ir.to_proto(model)
    positions = {t.name: i for i, t in enumerate(proto.graph.initializer)}
    payloads = {positions[value.name]: view for value, view in held}
    for index in payloads:
        proto.graph.initializer[index].ClearField("raw_data")
    _metadata_once(model.graph, proto.graph, positions)
    return proto, payloads


def _metadata_once(graph: ir.Graph, out: onnx.GraphProto, positions: dict[str, int]) -> None:
    """Each tensor's ``metadata_props`` as the IR holds them, once. onnx-ir 1.1 serializes a
    ``TensorProtoTensor`` (a weight read from a file) as a copy of its proto plus the IR's entries again,
    so every entry came out twice, and twice more on each ``portable fix`` of the result."""
    import onnx
    import onnx_ir as ir

    for value in graph.initializers.values():
        tensor = value.const_value
        if isinstance(tensor, ir.TensorProtoTensor) and value.name in positions:
            entries = out.initializer[positions[value.name]].metadata_props
            del entries[:]
            entries.extend(onnx.StringStringEntryProto(key=k, value=v) for k, v in tensor.metadata_props.items())


def spliced(proto: onnx.ModelProto, payloads: dict[int, memoryview]) -> Serialized:
    """A hollow proto (metadata and all) with its payloads, as the file's pieces."""
    pieces = splice_payloads(proto.SerializeToString(deterministic=True), payloads)
    return Serialized(proto, payloads, tuple(pieces))


def _held_initializers(graph: ir.Graph) -> list[tuple[ir.Value, memoryview]]:
    """Each main-graph initializer the file holds as large ``raw_data``, with its bytes."""
    import onnx_ir as ir

    held = []
    for value in graph.initializers.values():
        tensor = value.const_value
        if tensor is None or isinstance(tensor, (ir.ExternalTensor, ir.StringTensor, ir.TensorProtoTensor)):
            continue  # serialized by onnx-ir as they are
        if tensor.size > LEAN_MIN_ELEMENTS:
            held.append((value, payload_view(tensor)))
    return held


class _Hollow:
    """A tensor's header without its data: onnx-ir serializes it with an empty ``raw_data``."""

    def __init__(self, tensor: Any) -> None:
        self.name, self.doc_string = tensor.name, tensor.doc_string
        self.dtype, self.shape, self.metadata_props = tensor.dtype, tensor.shape, tensor.metadata_props

    def tobytes(self) -> bytes:
        return b""


@contextmanager
def _hollowed(held: list[tuple[ir.Value, memoryview]]) -> Iterator[None]:
    """The held initializers' tensors replaced by :class:`_Hollow` ones meanwhile, then restored."""
    tensors = [(value, value.const_value) for value, _ in held]
    try:
        for value, tensor in tensors:
            value.const_value = _Hollow(tensor)  # type: ignore[assignment]
        yield
    finally:
        for value, tensor in tensors:
            value.const_value = tensor


def payload_view(tensor: Any) -> memoryview:
    """``tensor.tobytes()`` as a flat byte view, without a copy where the tensor's memory already
    holds those bytes: a C-contiguous numpy array or CPU torch tensor of a whole-byte type on a
    little-endian host (onnx-ir packs sub-byte types and byte-swaps on big-endian ones)."""
    raw = getattr(tensor, "raw", None)
    if sys.byteorder == "little" and tensor.dtype.bitwidth % 8 == 0:
        if (isinstance(raw, np.ndarray) and raw.flags.c_contiguous and raw.dtype.byteorder != ">"
                and raw.dtype.itemsize * 8 == tensor.dtype.bitwidth):
            return raw.reshape(-1).view(np.uint8).data
        view = _torch_view(raw)
        if view is not None:
            return view
    return memoryview(tensor.tobytes()).cast("B")


def _torch_view(raw: Any) -> memoryview | None:
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(raw, torch.Tensor):
        return None
    try:
        flat = raw.detach()
        if flat.device.type != "cpu" or not flat.is_contiguous():
            return None
        return flat.reshape(-1).view(torch.uint8).numpy().data
    except (RuntimeError, TypeError):  # a fake, quantized or sparse tensor: onnx-ir's tobytes says what it is
        return None
