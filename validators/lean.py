"""Memory-lean parsing: the model's structure in memory, large weight payloads left in the file.

Why a wire-format scan of our own: neither protobuf (upb), onnx nor onnx-ir can parse a
message while skipping or deferring one field. upb's ``ParseFromString`` copies every
``bytes`` field (and copies a ``memoryview`` argument whole first); protobuf's ``lazy``
option applies to sub-messages in C++ only; ``onnx.load(load_external_data=False)`` and
``onnx_ir`` (``ExternalTensor`` is lazy, inline tensors are not) are lazy for *external*
data only. So this module scans the few levels of the wire format that lead to the
weights (``ModelProto.graph`` -> ``GraphProto.initializer`` -> ``TensorProto.raw_data``),
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

The inverse lives here too, beside the scan it mirrors: :func:`splice_payloads` puts payloads
back into a serialized model that lacks them, so an exporter writes the file from its tensors'
memory, and :class:`HeldLean` lets the rules read that model as they read a lean parse.
"""

from __future__ import annotations

import mmap
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import onnx

from portable.validators.limits import SMALL_TENSOR

__all__ = ["LEAN_MIN_ELEMENTS", "HeldLean", "LeanModel", "MappedLean", "PayloadRef", "Unscannable", "hold_lean", "lean_of",
           "parse_lean", "parse_lean_bytes", "splice_payloads", "stripped_payloads"]

# Only tensors above this many elements are stripped (see the module docstring).
LEAN_MIN_ELEMENTS = SMALL_TENSOR

# Field numbers from onnx.proto (and wire types from the protobuf encoding spec).
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_DIMS, _TENSOR_RAW_DATA = 7, 5, 1, 9
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_INT64_MASK = (1 << 64) - 1
_REGISTRY_SIZE = 32  # lean models remembered at once (see lean_of)
_RAW_DATA_TAG = bytes([_TENSOR_RAW_DATA << 3 | _LEN])


class Unscannable(Exception):
    """The scan met bytes it does not understand: fall back to a full parse."""


@dataclass(frozen=True)
class PayloadRef:
    """Where a stripped tensor lives in the file: its ``raw_data`` payload and its whole message."""

    offset: int
    length: int
    message: tuple[int, int]  # [start, end) of the TensorProto's bytes


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


# Lean models by id(proto). upb messages take no attributes and no weak references, and the
# engine hands rules only the proto; the entry holds the proto itself, so its id cannot be
# reused while the entry lives. Bounded: the engine validates right after loading.
_REGISTRY: OrderedDict[int, LeanModel] = OrderedDict()
_L = TypeVar("_L", bound=LeanModel)


def lean_of(proto: onnx.ModelProto) -> LeanModel | None:
    """The lean model behind ``proto``, if ``proto`` came from :func:`parse_lean`."""
    lean = _REGISTRY.get(id(proto))
    return lean if lean is not None and lean.proto is proto else None


def stripped_payloads(proto: onnx.ModelProto) -> dict[int, memoryview]:
    """Main-graph initializer index -> the ``raw_data`` a lean parse left in the bytes (zero-copy);
    empty for a proto parsed whole."""
    lean = lean_of(proto)
    return {} if lean is None else {index: lean.payload(index) for index in lean.stripped}


def release(proto: onnx.ModelProto) -> None:
    """Forget ``proto``'s lean state and unmap its file (once its validation is done)."""
    lean = _REGISTRY.pop(id(proto), None)
    if isinstance(lean, MappedLean) and lean.proto is proto and isinstance(lean.buffer, mmap.mmap):
        lean.buffer.close()


def _remember(lean: _L) -> _L:
    _REGISTRY[id(lean.proto)] = lean
    while len(_REGISTRY) > _REGISTRY_SIZE:
        _REGISTRY.popitem(last=False)
    return lean


def hold_lean(proto: onnx.ModelProto, path: str, payloads: dict[int, memoryview],
              pieces: Sequence[bytes | memoryview]) -> LeanModel:
    """Register an exporter's lean ``proto`` (no ``raw_data`` at ``payloads``' indices) so the rules
    read it as they read a lean parse of the file ``pieces`` make."""
    return _remember(HeldLean(proto, path, payloads, tuple(pieces)))


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
    pieces, stripped = _scan_model(buffer)
    with memoryview(buffer) as view:
        lean_bytes = b"".join([view[p[0]:p[1]] if isinstance(p, tuple) else p for p in pieces])
    proto = onnx.ModelProto()
    proto.ParseFromString(lean_bytes)
    return _remember(MappedLean(proto=proto, path=path, buffer=buffer, refs=stripped))


# -- the wire-format scan ---------------------------------------------------------------------

_Buffer = mmap.mmap | bytes
Piece = tuple[int, int] | bytes | memoryview  # a byte range of the buffer, new bytes (a length prefix), a payload


def _varint(buf: _Buffer, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise Unscannable("bad varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _INT64_MASK, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True)
class _Field:
    number: int
    wire: int
    start: int  # first byte of the tag
    value: int  # first byte of the value (after the length prefix for LEN)
    end: int    # one past the value
    length_at: int = 0  # first byte of the length prefix (LEN only)


def _fields(buf: _Buffer, start: int, end: int) -> Iterator[_Field]:
    """Every field of the message in [start, end). Groups (never used by ONNX) are not handled."""
    pos = start
    while pos < end:
        tag, after_tag = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise Unscannable("field number 0")
        length_at = 0
        if wire == _VARINT:
            value, (_, stop) = after_tag, _varint(buf, after_tag, end)
        elif wire == _LEN:
            length_at = after_tag
            length, value = _varint(buf, after_tag, end)
            stop = value + length
        elif wire in (_I64, _I32):
            value, stop = after_tag, after_tag + (8 if wire == _I64 else 4)
        else:
            raise Unscannable(f"wire type {wire}")
        if stop > end:
            raise Unscannable("value past the end of the message")
        yield _Field(number, wire, pos, value, stop, length_at)
        pos = stop


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _dims(buf: _Buffer, f: _Field) -> list[int]:
    """``TensorProto.dims`` values in one field occurrence (packed or not), as int64."""
    if f.wire == _VARINT:
        return [_signed(_varint(buf, f.value, f.end)[0])]
    if f.wire != _LEN:
        return []  # a wrong wire type: protobuf keeps it as an unknown field
    out, pos = [], f.value
    while pos < f.end:
        value, pos = _varint(buf, pos, f.end)
        out.append(_signed(value))
    return out


def _scan_tensor(buf: _Buffer, start: int, end: int) -> tuple[list[Piece], PayloadRef] | None:
    """The tensor's bytes without ``raw_data`` and where that payload is, or None to keep it whole."""
    elements, raw = 1, []
    fields = list(_fields(buf, start, end))
    for f in fields:
        if f.number == _TENSOR_DIMS:
            for d in _dims(buf, f):
                elements *= d
        elif f.number == _TENSOR_RAW_DATA and f.wire == _LEN:
            raw.append(f)
    if not raw or elements <= LEAN_MIN_ELEMENTS:
        return None
    last = raw[-1]  # protobuf keeps the last occurrence of a singular field
    kept: list[Piece] = [(f.start, f.end) for f in fields if not (f.number == _TENSOR_RAW_DATA and f.wire == _LEN)]
    return kept, PayloadRef(offset=last.value, length=last.end - last.value, message=(start, end))


def _body_size(body: list[Piece]) -> int:
    return sum(p[1] - p[0] if isinstance(p, tuple) else len(p) if isinstance(p, bytes) else p.nbytes for p in body)


def _resized(f: _Field, body: list[Piece]) -> list[Piece]:
    """The field re-encoded around a new body: its own tag bytes, a new length, the body."""
    return [(f.start, f.length_at), _encode_varint(_body_size(body)), *body]


class _ModelScan:
    """One pass over ModelProto -> graph -> initializer, collecting the lean bytes as pieces."""

    def __init__(self, buf: _Buffer) -> None:
        self.buf = buf
        self.stripped: dict[int, PayloadRef] = {}
        self.initializers = 0  # index across every ``graph`` occurrence (protobuf merges them)

    def model(self) -> list[Piece]:
        pieces: list[Piece] = []
        for f in _fields(self.buf, 0, len(self.buf)):
            if f.number == _MODEL_GRAPH and f.wire == _LEN:
                pieces += self.graph(f)
            else:
                pieces.append((f.start, f.end))
        return pieces

    def graph(self, f: _Field) -> list[Piece]:
        body: list[Piece] = []
        changed = False
        for g in _fields(self.buf, f.value, f.end):
            found = None
            if g.number == _GRAPH_INITIALIZER and g.wire == _LEN:
                found = _scan_tensor(self.buf, g.value, g.end)
                if found is not None:
                    self.stripped[self.initializers] = found[1]
                self.initializers += 1
            body += _resized(g, found[0]) if found else [(g.start, g.end)]
            changed = changed or found is not None
        return _resized(f, body) if changed else [(f.start, f.end)]


def _scan_model(buf: _Buffer) -> tuple[list[Piece], dict[int, PayloadRef]]:
    scan = _ModelScan(buf)
    return scan.model(), scan.stripped


# -- the inverse: payloads spliced back into a lean serialization ------------------------------

Buffer = bytes | memoryview


def splice_payloads(lean: bytes, payloads: Mapping[int, memoryview]) -> list[Buffer]:
    """The file's bytes, in order, for a serialized model whose main-graph initializers at
    ``payloads``' indices carry no ``raw_data``: each payload goes back in as that field, where
    protobuf's own serialization puts it (fields in number order), and the two enclosing length
    prefixes are re-encoded. Joined, the pieces are the full model's
    ``SerializeToString(deterministic=True)``; the payloads themselves are never copied.
    ``payloads``: flat byte views (``memoryview.cast("B")``)."""
    splice = _Splice(lean, payloads)
    pieces = splice.model()
    if splice.done != set(payloads):
        raise ValueError(f"no initializer at index(es) {sorted(set(payloads) - splice.done)}")
    return _buffers(lean, pieces)


class _Splice:
    def __init__(self, buf: bytes, payloads: Mapping[int, memoryview]) -> None:
        self.buf, self.payloads = buf, payloads
        self.index = 0
        self.done: set[int] = set()

    def model(self) -> list[Piece]:
        pieces: list[Piece] = []
        for f in _fields(self.buf, 0, len(self.buf)):
            pieces += self.graph(f) if f.number == _MODEL_GRAPH and f.wire == _LEN else [(f.start, f.end)]
        return pieces

    def graph(self, f: _Field) -> list[Piece]:
        body: list[Piece] = []
        for g in _fields(self.buf, f.value, f.end):
            payload = None
            if g.number == _GRAPH_INITIALIZER and g.wire == _LEN:
                payload = self.payloads.get(self.index)
                if payload is not None:
                    self.done.add(self.index)
                self.index += 1
            body += [(g.start, g.end)] if payload is None else _resized(g, self.tensor(g, payload))
        return _resized(f, body)

    def tensor(self, g: _Field, payload: memoryview) -> list[Piece]:
        fields = list(_fields(self.buf, g.value, g.end))
        if any(t.number == _TENSOR_RAW_DATA for t in fields):
            raise ValueError(f"initializer {self.index} already has raw_data")
        at = next((i for i, t in enumerate(fields) if t.number > _TENSOR_RAW_DATA), len(fields))
        body: list[Piece] = [(t.start, t.end) for t in fields]
        body[at:at] = [_RAW_DATA_TAG + _encode_varint(payload.nbytes), payload]
        return body


def _buffers(buf: bytes, pieces: list[Piece]) -> list[Buffer]:
    """Byte ranges of ``buf`` as views (adjacent ones merged), new bytes and payloads as they are."""
    out: list[Buffer] = []
    start = end = 0
    view = memoryview(buf)
    for piece in pieces:
        if isinstance(piece, tuple) and piece[0] == end and end > start:
            end = piece[1]
            continue
        if end > start:
            out.append(view[start:end])
        start, end = piece if isinstance(piece, tuple) else (0, 0)
        if not isinstance(piece, tuple):
            out.append(piece)
    if end > start:
        out.append(view[start:end])
    return out
