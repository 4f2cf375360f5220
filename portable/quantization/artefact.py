"""The quantized model as an artefact: stamped, fingerprinted, validated as the file it will be,
then written atomically with its manifest (``MODEL.json`` beside it), or not at all.

lead: swap :func:`stage` and :func:`write` for the shared artefact step (exporters/artefact.py:
size check, hollow serialize, stamp, validate held, fingerprint, staged write of the model and
its manifest) once issue 22 lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from portable.errors import InternalError
from portable.policy import Policy
from portable.report import ValidationReport

__all__ = ["PRECISION", "Staged", "stage", "write"]

PRECISION = "int8-qdq"  # the manifest's and metadata's ``portable.precision`` of a quantized file


@dataclass(frozen=True)
class Staged:
    """The file's bytes, its fingerprint and its validation, before anything is written."""

    proto: onnx.ModelProto
    data: bytes
    fingerprint: str
    report: ValidationReport


def stage(proto: onnx.ModelProto, output: Path, policy: Policy, batch: str | int) -> Staged:
    """Refuse oversized weights, stamp portable's metadata and the fingerprint, and validate the
    bytes as ``portable validate`` reads the file (every rule the policy turns on, the QDQ
    profile among them). A rule that crashes is portable's failure (exit 3)."""
    import onnx_ir as ir

    from portable.exporters.fingerprint import fingerprint
    from portable.exporters.manifest import stamp
    from portable.exporters.writer import check_size
    from portable.validators import validate_bytes

    check_size(ir.from_proto(proto), policy.max_size_bytes)
    stamp(proto, policy, PRECISION, batch)
    print_ = fingerprint(proto)
    proto.metadata_props.add(key="portable.fingerprint", value=print_)
    data = proto.SerializeToString()
    report = validate_bytes(data, str(output), policy)
    if report.error is not None:
        raise InternalError(f"validating the quantized model failed: {report.error}", path=str(output))
    return Staged(proto, data, print_, report)


def write(staged: Staged, output: Path, manifest: dict[str, Any], force: bool) -> Path:
    """The model, then its manifest; a new model is removed again if its manifest cannot be
    written. Returns the manifest's path."""
    from portable.exporters.writer import write_atomic, write_json

    existed = output.exists()
    manifest_path = output.with_name(output.name + ".json")
    write_atomic(output, staged.data, force)
    try:
        write_json(manifest_path, manifest)
    except BaseException:
        if not existed:
            output.unlink(missing_ok=True)
        raise
    return manifest_path
