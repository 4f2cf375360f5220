"""Reading a model file safely: one clear line for every way it can be unreadable.

We read the bytes ourselves instead of calling ``onnx.load``, because ``onnx.load``
follows external-data references; a validator must never open a path named inside
the file it is checking.

The file is memory-mapped and parsed lean (:mod:`portable.validators.lean`): large
weight payloads stay in the file until a rule asks for them, so validating a 1 GB model
does not hold it in memory twice. Whenever the lean scan does not understand a file, the
whole file is parsed the ordinary way, so every unreadable file fails with the same line.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from portable.errors import InputError
from portable.policy import GIB
from portable.validators.lean import LeanModel, MappedLean, Unscannable, parse_lean

__all__ = ["PROTOBUF_LIMIT", "LoadedModel", "load_model_file", "parse_model_bytes"]

# protobuf cannot parse (or serialize) a single message of 2 GiB or more.
PROTOBUF_LIMIT = 2 * GIB


@dataclass(frozen=True)
class LoadedModel:
    """A read model: its proto, and the lean parse it came from (None when it was parsed whole)."""

    path: str
    proto: onnx.ModelProto
    size: int
    lean: LeanModel | None = None

    def close(self) -> None:
        """Unmap the file of a lean parse (views of it still alive keep it mapped)."""
        if self.lean is not None:
            self.lean.close()


def _human(size: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{size} bytes"


def _stat(path: Path) -> os.stat_result:
    try:
        return path.stat()
    except FileNotFoundError:
        raise InputError("no such file", path=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None


# A large file checked into git but never fetched is a small text pointer in its place.
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"  # https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md
_ANNEX_POINTER = b"/annex/objects/"  # git-annex's pointer file (an unlocked, unfetched file)
_POINTER_MAX = 1024  # both specs keep pointers far below this


def _pointer_error(data: bytes | memoryview, path: str) -> InputError | None:
    """The error for a Git LFS / git-annex pointer standing where the model should be, if it is one."""
    if len(data) > _POINTER_MAX:
        return None
    head = bytes(data[:64])
    if head.startswith(_LFS_POINTER):
        size = next((line.split()[1] for line in bytes(data).decode("ascii", "replace").splitlines()
                     if line.startswith("size ") and len(line.split()) == 2), "?")
        return InputError(f"a Git LFS pointer ({len(data)} bytes), not the model ({size} bytes, never fetched): "
                          "run `git lfs pull` in its repository", path=path)
    if head.startswith(_ANNEX_POINTER):
        return InputError(f"a git-annex pointer ({len(data)} bytes), not the model (never fetched): "
                          "run `git annex get` on it", path=path)
    return None


def parse_model_bytes(data: bytes | memoryview, path: str) -> onnx.ModelProto:
    """Parse serialized bytes into a ModelProto, or raise :class:`InputError`."""
    if len(data) == 0:
        raise InputError("empty file (0 bytes): not an ONNX model", path=path)
    pointer = _pointer_error(data, path)
    if pointer is not None:
        raise pointer
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except DecodeError as exc:
        detail = str(exc) or "parse error"
        raise InputError(
            f"not a valid ONNX model: protobuf could not parse it ({detail}); "
            "the file is truncated, corrupt or not a model",
            path=path,
        ) from None
    except RecursionError:
        raise InputError("not readable: the model is nested too deeply for protobuf to parse", path=path) from None
    if proto.ir_version <= 0 or not proto.HasField("graph"):
        raise InputError(
            "parses as protobuf but is not an ONNX model (no ir_version or no graph): "
            "truncated, or another kind of protobuf file",
            path=path,
        )
    return proto


def load_model_file(path: str | Path, *, lean: bool = True) -> LoadedModel:
    """Read one ``.onnx`` file without following external data.

    ``lean=False`` reads and parses the whole file in memory (the reference the lean
    parse is tested against).
    """
    path = Path(path)
    info = _stat(path)
    if path.is_dir():
        raise InputError("is a directory, not a model file", path=str(path))
    if info.st_size >= PROTOBUF_LIMIT:
        raise InputError(
            f"file is {_human(info.st_size)}: protobuf cannot parse a model of 2 GiB or more "
            "(such models need external data, which the portability contract forbids)",
            path=str(path),
        )
    if info.st_size == 0:  # also a device or a pipe: never opened, a read might not end
        parse_model_bytes(b"", str(path))
    if lean and stat.S_ISREG(info.st_mode):
        parsed = _parse_lean_or_none(path)
        if parsed is not None:
            return LoadedModel(path=str(path), proto=parsed.proto, size=info.st_size, lean=parsed)
    data = _read(path, info.st_size)
    return LoadedModel(path=str(path), proto=parse_model_bytes(data, str(path)), size=len(data))


def _read(path: Path, size: int) -> bytes:
    """At most ``size`` bytes (the size stat gave): a file that grows, or a device, cannot
    make the read run on."""
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None


def _parse_lean_or_none(path: Path) -> MappedLean | None:
    """The lean parse, or None when the full parse must decide (and word the error)."""
    try:
        parsed = parse_lean(path)
    except (Unscannable, DecodeError, RecursionError, OSError, ValueError):
        return None
    if parsed.proto.ir_version <= 0 or not parsed.proto.HasField("graph"):
        parsed.close()
        return None
    return parsed
