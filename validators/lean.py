"""Memory-lean parsing: the model's structure in memory, large weight payloads left in the file.

Why a wire-format scan of our own: neither protobuf (upb), onnx nor onnx-ir can parse a
message while skipping or deferring one field. upb's ``ParseFromString`` copies every
``bytes`` field (and copies a ``memoryview`` argument whole first); protobuf's ``lazy``
option applies to sub-messages in C++ only; ``onnx.load(load_external_data=False)`` and
``onnx_ir`` (``ExternalTensor`` is lazy, inline tensors are not) are lazy for *external*
data only. So :mod:`portable.validators.wire` scans the few levels of the wire format that
lead to the weights (``ModelProto.graph`` -> ``GraphProto.initializer`` -> ``TensorProto.raw_data``),
copies every other byte verbatim, re-encodes the two enclosing length prefixes, and lets
protobuf parse the (small) result. Everything else, including every error, is protobuf's
own: whenever the scan meets something it does not expect, the whole file is parsed the
ordinary way instead, so an unreadable file fails exactly as before.

What is stripped: the ``raw_data`` of a main-graph initializer of more than
:data:`LEAN_MIN_ELEMENTS` elements (by its dims). That is the same limit below which the
shape analysis (``shapes.skeleton``) and onnxscript's constant folder read a tensor's
values, so no rule that reads small constants ever meets a stripped tensor. Rules that do
need a stripped payload (PORT015's NaN scan, PORT011's checker) get it from the
memory-mapped file through :class:`LeanModel`; PORT014 hands onnxruntime the file itself. Not stripped (kept in memory as
before): tensors in ``float_data``/``int64_data``... fields, ``Constant`` node attributes,
subgraph and sparse initializers.

The lean model travels with its proto: :func:`portable.validators.loading.load_model_file` returns
both, and the engine hands it to the rules' :class:`~portable.validators.context.ModelContext`.
:class:`HeldLean` is an exporter's model before it is written (its payloads are views of the
tensors' memory, spliced into the file by :func:`portable.validators.wire.splice_payloads`),
which the rules read as they read a lean parse.
"""

from __future__ import annotations

import mmap
from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from portable.validators.limits import SMALL_TENSOR
from portable.validators.wire import PayloadRef, Unscannable, scan_model

__all__ = ["LEAN_MIN_ELEMENTS", "HeldLean", "LeanModel", "MappedLean", "PayloadRef", "Unscannable",
           "parse_lean", "parse_lean_bytes"]

# Only tensors above this many elements are stripped (see the module docstring).
LEAN_MIN_ELEMENTS = SMALL_TENSOR


class LeanModel(ABC):
    """A parsed model whose large main-graph initializer payloads are not in :attr:`proto`: their
    ``raw_data`` is absent there and reached by initializer index instead."""

    proto: onnx.ModelProto
    path: str

    @property
    @abstractmethod
    def stripped(self) -> Collection[int]:
        """The main-graph initializer indices whose payload is held outside :attr:`proto`."""

    @abstractmethod
    def payload(self, index: int) -> memoryview:
        """Initializer ``index``'s ``raw_data`` bytes, zero-copy (a new view the caller may release)."""

    def payload_size(self, index: int) -> int:
        with self.payload(index) as raw:
            return raw.nbytes

    def payload_views(self) -> dict[int, memoryview]:
        """Every stripped payload by initializer index (zero-copy views)."""
        return {index: self.payload(index) for index in self.stripped}

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the model holds outside memory (a mapped file), once no view of it is alive."""

    def release(self, index: int, start: int, end: int) -> None:
        """Drop [start, end) of ``index``'s payload from resident memory, where that means something
        (a mapped file); memory an exporter holds stays."""
        return None

    def tensor(self, index: int) -> onnx.TensorProto:
        """The full tensor: exactly what a full parse would hold."""
        tensor = onnx.TensorProto()
        tensor.CopyFrom(self.proto.graph.initializer[index])
        with self.payload(index) as raw:
            tensor.raw_data = bytes(raw)
        return tensor

    @abstractmethod
    def source(self) -> str | bytes:
        """The whole model for a library that parses it itself (a file, or serialized bytes)."""


@dataclass
class MappedLean(LeanModel):
    """A lean parse: the payloads stayed in the (memory-mapped) file or the serialized bytes."""

    proto: onnx.ModelProto
    path: str
    buffer: mmap.mmap | bytes  # the mapped file, or serialized bytes in memory
    refs: dict[int, PayloadRef] = field(default_factory=dict)  # main-graph initializer index -> ref

    @property
    def stripped(self) -> Collection[int]:
        return self.refs.keys()

    def payload(self, index: int) -> memoryview:
        """Pages are read as they are touched; see :meth:`release`."""
        ref = self.refs[index]
        return memoryview(self.buffer)[ref.offset:ref.offset + ref.length]

    def payload_size(self, index: int) -> int:
        return self.refs[index].length

    def release(self, index: int, start: int, end: int) -> None:
        """Drop those pages from this process (they stay in the page cache), so a scan over every
        weight never holds more than a chunk of them in resident memory."""
        offset = self.refs[index].offset
        self._release(offset + start, offset + end)

    def _release(self, start: int, end: int) -> None:
        if not isinstance(self.buffer, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
            return  # bytes in memory, or a platform without it: then the kernel decides
        page = mmap.PAGESIZE
        first = -(-start // page) * page  # only whole pages inside the range
        if end - first >= page:
            self.buffer.madvise(mmap.MADV_DONTNEED, first, (end - first) // page * page)

    def source(self) -> str | bytes:
        return self.path if isinstance(self.buffer, mmap.mmap) else self.buffer

    def close(self) -> None:
        """Unmap the file; a view of it still alive (an array over a weight) keeps the mapping open."""
        if isinstance(self.buffer, mmap.mmap):
            try:
                self.buffer.close()
            except BufferError:  # exported views: the mapping goes with the last of them
                pass

    def tensor(self, index: int) -> onnx.TensorProto:
        """Parsed from the tensor's own bytes in the file."""
        start, end = self.refs[index].message
        tensor = onnx.TensorProto()
        tensor.ParseFromString(memoryview(self.buffer)[start:end])
        self._release(start, end)
        return tensor


@dataclass
class HeldLean(LeanModel):
    """An exporter's model before it is written: the payloads are views of its tensors' memory, and
    ``pieces`` (:func:`splice_payloads`) are the file's bytes in order."""

    proto: onnx.ModelProto
    path: str
    payloads: dict[int, memoryview]
    pieces: tuple[bytes | memoryview, ...]

    @property
    def stripped(self) -> Collection[int]:
        return self.payloads.keys()

    def payload(self, index: int) -> memoryview:
        return memoryview(self.payloads[index])

    def source(self) -> str | bytes:
        return b"".join(self.pieces)


def parse_lean(path: str | Path) -> MappedLean:
    """Map the file and parse it with large initializer payloads left in place.

    Raises :class:`Unscannable` when the file is not laid out as the scan expects, or
    ``DecodeError``/``RecursionError`` from protobuf: the caller then parses the whole file.
    """
    with open(path, "rb") as handle:
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _parse(buffer, str(path))
    except BaseException:
        buffer.close()
        raise


def parse_lean_bytes(data: bytes, path: str) -> MappedLean:
    """The same lean parse over a serialized model in memory (an export about to be written:
    ``path`` names it in findings), so it is validated exactly as the file will be."""
    return _parse(data, path)


def _parse(buffer: mmap.mmap | bytes, path: str) -> MappedLean:
    lean_bytes, stripped = scan_model(buffer, LEAN_MIN_ELEMENTS)
    proto = onnx.ModelProto()
    proto.ParseFromString(lean_bytes)
    return MappedLean(proto=proto, path=path, buffer=buffer, refs=stripped)
