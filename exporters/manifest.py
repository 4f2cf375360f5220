"""The sidecar ``model.onnx.json``: how the file was made and what it was checked against."""

from __future__ import annotations

import json
import platform
from importlib import metadata
from typing import Any

import onnx

from portable._version import __version__
from portable.policy import Policy, dtype_name

__all__ = ["METADATA_KEYS", "build_manifest", "io_signature", "stamp", "versions"]

METADATA_KEYS = ("portable.version", "portable.policy", "portable.precision", "portable.batch", "portable.fingerprint")
_PACKAGES = ("torch", "onnx", "onnxscript", "onnx-ir", "onnxruntime")


def versions() -> dict[str, str]:
    """Versions of the libraries that shaped the file."""
    found = {"python": platform.python_version(), "portable": __version__}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def stamp(proto: onnx.ModelProto, policy: Policy, precision: str, batch: str | int) -> None:
    """Write portable's model-level metadata_props (the fingerprint is added once computed)."""
    values = {
        "portable.version": __version__,
        "portable.policy": json.dumps(policy.to_dict(), sort_keys=True),
        "portable.precision": precision,
        "portable.batch": str(batch),
    }
    kept = [p for p in proto.metadata_props if p.key not in METADATA_KEYS]
    del proto.metadata_props[:]
    proto.metadata_props.extend(kept)
    for key, value in values.items():
        proto.metadata_props.add(key=key, value=value)


def io_signature(values: Any) -> list[dict[str, Any]]:
    """Name, dtype and shape (ints and symbols) of graph inputs or outputs."""
    out = []
    for v in values:
        tt = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim]
        out.append({"name": v.name, "dtype": dtype_name(tt.elem_type), "shape": dims})
    return out


def build_manifest(proto: onnx.ModelProto, *, file: str, fingerprint: str, size: int, precision: str,
                   batch: str | int, policy: Policy, report: dict[str, Any], parity: dict[str, Any] | None,
                   timings: dict[str, float], spec: str | None) -> dict[str, Any]:
    return {
        "schema": "portable.export/1",
        "file": file,
        "fingerprint": fingerprint,
        "size_bytes": size,
        "precision": precision,
        "batch": batch,
        "opset": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
        "spec": spec,
        "versions": versions(),
        "policy": policy.to_dict(),
        "inputs": io_signature(proto.graph.input),
        "outputs": io_signature(proto.graph.output),
        "validation": {"ok": report["ok"], "counts": report["counts"], "findings": report["findings"]},
        "parity": parity,
        "timings": timings,
    }
