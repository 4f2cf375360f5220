"""The protobuf wire format of an ONNX model, the few levels that lead to its weights.

Why a scan of our own: neither protobuf (upb), onnx nor onnx-ir can parse a message while skipping or
deferring one field (see :mod:`portable.validators.lean`), nor serialize a field from memory they do not
own (see :mod:`portable.exporters.serialize`). So :func:`scan_model` walks ``ModelProto.graph`` ->
``GraphProto.initializer`` -> ``TensorProto.raw_data``, and :func:`splice_payloads` is its inverse.
Everything is the encoding of https://protobuf.dev/programming-guides/encoding/ with onnx.proto's field
numbers; the encoders (:func:`encode_varint`, :func:`key`, :func:`len_field`) are shared with the
benchmarks, the tests and the fixture generator, which write layouts no serializer writes.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["GRAPH_INITIALIZER", "LEN", "MODEL_GRAPH", "TENSOR_DIMS", "TENSOR_RAW_DATA", "VARINT", "Buffer", "Field",
           "PayloadRef", "Piece", "Unscannable", "encode_varint", "fields", "key", "len_field", "scan_model",
           "splice_payloads"]

# Field numbers from onnx.proto, and wire types from the protobuf encoding.
MODEL_GRAPH, GRAPH_INITIALIZER, TENSOR_DIMS, TENSOR_RAW_DATA = 7, 5, 1, 9
VARINT, I64, LEN, I32 = 0, 1, 2, 5
_INT64_MASK = (1 << 64) - 1

Source = mmap.mmap | bytes
Piece = tuple[int, int] | bytes | memoryview  # a byte range of the source, new bytes (a length prefix), a payload
Buffer = bytes | memoryview


class Unscannable(Exception):
    """The scan met bytes it does not understand: the caller parses the whole message instead."""


@dataclass(frozen=True)
class PayloadRef:
    """Where a stripped tensor lives in the file: its ``raw_data`` payload and its whole message."""

    offset: int
    length: int
    message: tuple[int, int]  # [start, end) of the TensorProto's bytes


# -- encoding ---------------------------------------------------------------------------------

def encode_varint(value: int) -> bytes:
    """A non-negative integer as a base-128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire: int) -> bytes:
    """A field's tag."""
    return encode_varint(number << 3 | wire)


def len_field(number: int, payload: bytes | int) -> bytes:
    """A length-delimited field: tag, length and ``payload``; given a size instead, the tag and length
    alone (the payload is written after them)."""
    if isinstance(payload, int):
        return key(number, LEN) + encode_varint(payload)
    return key(number, LEN) + encode_varint(len(payload)) + payload


# -- decoding ---------------------------------------------------------------------------------

def _varint(buf: Source, pos: int, end: int) -> tuple[int, int]:
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


@dataclass(frozen=True)
class Field:
    number: int
    wire: int
    start: int  # first byte of the tag
    value: int  # first byte of the value (after the length prefix for LEN)
    end: int    # one past the value
    length_at: int = 0  # first byte of the length prefix (LEN only)


def _stop(buf: Source, wire: int, after_tag: int, end: int) -> tuple[int, int, int]:
    """(value start, one past the value, length prefix start) of a field's value."""
    if wire == VARINT:
        return after_tag, _varint(buf, after_tag, end)[1], 0
    if wire == LEN:
        length, value = _varint(buf, after_tag, end)
        return value, value + length, after_tag
    if wire in (I64, I32):
        return after_tag, after_tag + (8 if wire == I64 else 4), 0
    raise Unscannable(f"wire type {wire}")


def fields(buf: Source, start: int, end: int) -> Iterator[Field]:
    """Every field of the message in [start, end). Groups (never used by ONNX) are not handled."""
    pos = start
    while pos < end:
        tag, after_tag = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise Unscannable("field number 0")
        value, stop, length_at = _stop(buf, wire, after_tag, end)
        if stop > end:
            raise Unscannable("value past the end of the message")
        yield Field(number, wire, pos, value, stop, length_at)
        pos = stop


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _dims(buf: Source, f: Field) -> list[int]:
    """``TensorProto.dims`` values in one field occurrence (packed or not), as int64."""
    if f.wire == VARINT:
        return [_signed(_varint(buf, f.value, f.end)[0])]
    if f.wire != LEN:
        return []  # a wrong wire type: protobuf keeps it as an unknown field
    out, pos = [], f.value
    while pos < f.end:
        value, pos = _varint(buf, pos, f.end)
        out.append(_signed(value))
    return out


# -- the scan: a model's bytes without its large payloads ---------------------------------------

def _scan_tensor(buf: Source, start: int, end: int, min_elements: int) -> tuple[list[Piece], PayloadRef] | None:
    """The tensor's bytes without ``raw_data`` and where that payload is, or None to keep it whole."""
    elements, raw = 1, []
    found = list(fields(buf, start, end))
    for f in found:
        if f.number == TENSOR_DIMS:
            for d in _dims(buf, f):
                elements *= d
        elif f.number == TENSOR_RAW_DATA and f.wire == LEN:
            raw.append(f)
    if not raw or elements <= min_elements:
        return None
    last = raw[-1]  # protobuf keeps the last occurrence of a singular field
    kept: list[Piece] = [(f.start, f.end) for f in found if not (f.number == TENSOR_RAW_DATA and f.wire == LEN)]
    return kept, PayloadRef(offset=last.value, length=last.end - last.value, message=(start, end))


def _body_size(body: list[Piece]) -> int:
    return sum(p[1] - p[0] if isinstance(p, tuple) else len(p) if isinstance(p, bytes) else p.nbytes for p in body)


def _resized(f: Field, body: list[Piece]) -> list[Piece]:
    """The field re-encoded around a new body: its own tag bytes, a new length, the body."""
    return [(f.start, f.length_at), encode_varint(_body_size(body)), *body]


class _ModelWalk:
    """One pass over a ModelProto's fields: each ``graph`` through :meth:`graph`, every other field as it is."""

    buf: Source

    def model(self) -> list[Piece]:
        pieces: list[Piece] = []
        for f in fields(self.buf, 0, len(self.buf)):
            pieces += self.graph(f) if f.number == MODEL_GRAPH and f.wire == LEN else [(f.start, f.end)]
        return pieces

    def graph(self, f: Field) -> list[Piece]:
        raise NotImplementedError


class _ModelScan(_ModelWalk):
    """ModelProto -> graph -> initializer, collecting the lean bytes as pieces."""

    def __init__(self, buf: Source, min_elements: int) -> None:
        self.buf, self.min_elements = buf, min_elements
        self.stripped: dict[int, PayloadRef] = {}
        self.initializers = 0  # index across every ``graph`` occurrence (protobuf merges them)

    def graph(self, f: Field) -> list[Piece]:
        body: list[Piece] = []
        changed = False
        for g in fields(self.buf, f.value, f.end):
            found = None
            if g.number == GRAPH_INITIALIZER and g.wire == LEN:
                found = _scan_tensor(self.buf, g.value, g.end, self.min_elements)
                if found is not None:
                    self.stripped[self.initializers] = found[1]
                self.initializers += 1
            body += _resized(g, found[0]) if found else [(g.start, g.end)]
            changed = changed or found is not None
        return _resized(f, body) if changed else [(f.start, f.end)]


def scan_model(buf: Source, min_elements: int) -> tuple[bytes, dict[int, PayloadRef]]:
    """The model's bytes without the ``raw_data`` of main-graph initializers of more than ``min_elements``
    elements, and where each of those payloads is (by initializer index). Raises :class:`Unscannable`."""
    scan = _ModelScan(buf, min_elements)
    pieces = scan.model()
    with memoryview(buf) as view:
        lean = b"".join([view[p[0]:p[1]] if isinstance(p, tuple) else p for p in pieces])
    return lean, scan.stripped


# -- the inverse: payloads spliced back into a lean serialization ------------------------------

_RAW_DATA_TAG = key(TENSOR_RAW_DATA, LEN)


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


class _Splice(_ModelWalk):
    """ModelProto -> graph -> initializer, each payload put back where protobuf would write it."""

    def __init__(self, buf: bytes, payloads: Mapping[int, memoryview]) -> None:
        self.buf, self.payloads = buf, payloads
        self.index = 0
        self.done: set[int] = set()

    def graph(self, f: Field) -> list[Piece]:
        body: list[Piece] = []
        for g in fields(self.buf, f.value, f.end):
            payload = None
            if g.number == GRAPH_INITIALIZER and g.wire == LEN:
                payload = self.payloads.get(self.index)
                if payload is not None:
                    self.done.add(self.index)
                self.index += 1
            body += [(g.start, g.end)] if payload is None else _resized(g, self.tensor(g, payload))
        return _resized(f, body)

    def tensor(self, g: Field, payload: memoryview) -> list[Piece]:
        found = list(fields(self.buf, g.value, g.end))
        if any(t.number == TENSOR_RAW_DATA for t in found):
            raise ValueError(f"initializer {self.index} already has raw_data")
        at = next((i for i, t in enumerate(found) if t.number > TENSOR_RAW_DATA), len(found))
        body: list[Piece] = [(t.start, t.end) for t in found]
        body[at:at] = [_RAW_DATA_TAG + encode_varint(payload.nbytes), payload]
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
