"""Size limits and atomic writes: a target file is either complete or absent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import onnx_ir as ir

from portable.errors import FindingsError, UsageError
from portable.io import atomic_write_bytes, check_writable
from portable.validators.loading import PROTOBUF_LIMIT as MESSAGE_LIMIT

__all__ = ["PROTOBUF_LIMIT", "check_size", "check_target", "weights_bytes", "write_atomic", "write_json"]

# protobuf refuses to serialize a message of 2 GiB or more ("Failed to serialize proto").
PROTOBUF_LIMIT = MESSAGE_LIMIT - 64 * 1024**2  # room for the graph itself beside the weights


def weights_bytes(model: ir.Model) -> int:
    """Bytes of every initializer (the bulk of the serialized file)."""
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def check_size(model: ir.Model, limit: int) -> int:
    """Refuse, before serializing, weights that cannot be one inline file under ``limit``."""
    size = weights_bytes(model)
    cap = min(limit, PROTOBUF_LIMIT)
    if size > cap:
        why = "the policy's max-size" if cap == limit else "protobuf's 2 GiB limit for one inline file"
        raise FindingsError(f"weights are {size:,} bytes, above {why} ({cap:,} bytes): refusing to serialize",
                            hint="reduce the model, export at fp16/bf16, or raise max-size in [tool.portable]")
    return size


def check_target(path: Path, force: bool, *, folder: bool = False) -> None:
    """The target folder exists and the file (``folder``: the folder written whole) is not there (unless ``force``)."""
    if path.exists() and not force:
        raise UsageError(f"{'folder' if folder else 'file'} exists; pass --force to overwrite", path=str(path))
    if not path.parent.is_dir():
        raise UsageError("output folder does not exist", path=str(path.parent))
    if folder:
        check_writable(path.parent, what="output folder", folder=True)
        if path.exists() and not path.is_dir():
            raise UsageError("the folder to write is a file", path=str(path))
    else:
        check_writable(path)


def write_atomic(path: Path, data: bytes | Sequence[bytes | memoryview], force: bool = False) -> None:
    """Refuse an existing target unless ``force``, then write it atomically (see portable.io)."""
    check_target(path, force)
    atomic_write_bytes(path, data)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically write ``data`` as stable, indented JSON."""
    write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), force=True)
