"""The fix run, phase by phase: load, remedies, serialize, verify (the proof), validate, write."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import onnx_ir as ir

from portable.errors import InputError, one_line
from portable.exporters.fix import (
    REMEDIES,
    FixFailed,
    FixResult,
    RemedyReport,
    _Plan,
    apply,
    check_dims,
    describe,
    precision,
    serialize,
    validate,
    write,
)
from portable.exporters.fix_proof import Proof, prove
from portable.exporters.progress import Phases
from portable.exporters.quiet import quiet_torch
from portable.exporters.remedies import batch_symbol, external_bytes
from portable.exporters.serialize import Serialized
from portable.exporters.writer import check_target

if TYPE_CHECKING:
    import onnx

    from portable.validators.lean import LeanModel

__all__ = ["proof_batches", "run"]

_Record = TypeVar("_Record", "FixResult", "RemedyReport", "Proof")  # the frozen records a run builds


def run(plan: _Plan, phases: Phases, *, verify: bool, force: bool) -> FixResult:
    check_target(plan.output, force)
    with phases.phase("load"):
        original = _load(plan)
    check_dims(plan, original)
    feeds = _feeds(plan)
    with phases.phase("remedies"), quiet_torch():  # library warnings and log lines are noise here
        model, reports = _remedies(plan, original)
    with phases.phase("serialize"):
        result, held = _built(plan, original, model, reports, phases)
    if verify:
        with phases.phase("verify"), quiet_torch():
            proof = _proof(plan, original, held.tobytes(), feeds)
            if not proof.ok and not proof.unavailable:
                model, reports, proof = _isolate(plan, original, feeds) or (model, reports, _baseless(proof))
                result, held = _built(plan, original, model, reports, phases)
        result = _with(result, proof=proof)
        if not proof.ok:
            raise FixFailed(_proof_message(proof), result)
    with phases.phase("validate"):
        report = validate(held, plan)
    result = _with(result, report=report)
    if plan.policy.strict and report.failing():
        return result
    with phases.phase("write"):
        manifest = _manifest(held.proto, plan, result, held.size, phases)
        write(plan, held.pieces, manifest, force)
    return _with(result, written=True, manifest=manifest, timings=dict(phases.timings))


def _load(plan: _Plan) -> ir.Model:
    """The validators' reader (it never follows an external path; lean: the large weights stay in the
    mapped file), then onnx-ir, each large weight a numpy array over its bytes in the file."""
    from portable.validators.loading import load_model_file

    loaded = load_model_file(plan.source)  # its mapping stays open while the model's arrays view it
    proto = loaded.proto
    try:
        model = ir.from_proto(proto)
    except Exception as exc:  # noqa: BLE001 - onnx-ir's deserializer on a malformed graph
        while exc.__cause__ is not None:  # onnx-ir wraps the reason in SerdeErrors naming its helpers
            exc = exc.__cause__  # type: ignore[assignment]
        raise InputError(f"onnx-ir cannot read this graph, so fix cannot change it: {one_line(exc, limit=160)}",
                         path=str(plan.source)) from None
    lean = loaded.lean
    if lean is not None:
        for index in lean.stripped:
            tensor = proto.graph.initializer[index]
            model.graph.initializers[tensor.name].const_value = _mapped(lean, index, tensor)
    return model


def _mapped(lean: LeanModel, index: int, tensor: onnx.TensorProto) -> ir.TensorProtocol:
    """Initializer ``index`` as a read-only numpy array over its payload in the mapped file (no copy;
    the serializer writes it from there too), or parsed whole where its bytes are not one numpy
    array's: a sub-byte or string type, a big-endian host, a length that does not match its dims."""
    dtype = ir.DataType(tensor.data_type)
    shape = tuple(tensor.dims)
    if (sys.byteorder == "little" and dtype.bitwidth % 8 == 0 and dtype != ir.DataType.STRING
            and lean.payload_size(index) == math.prod(shape) * dtype.itemsize):
        array = np.frombuffer(lean.payload(index), dtype=dtype.numpy()).reshape(shape)
        return ir.Tensor(array, dtype=dtype, name=tensor.name, doc_string=tensor.doc_string or None,
                         metadata_props={e.key: e.value for e in tensor.metadata_props})
    return ir.serde.deserialize_tensor(lean.tensor(index))


def _remedies(plan: _Plan, model: ir.Model) -> tuple[ir.Model, list[RemedyReport]]:
    reports = []
    for remedy in REMEDIES:
        model, report = apply(remedy, plan, model)
        reports.append(report)
        if remedy.fatal and report.status == "refused":
            result = FixResult(plan.source, plan.output, False, None, None, tuple(reports), None, None)
            raise FixFailed(f"{remedy.name} refused: {report.detail}; nothing written", result)
    return model, reports


def _built(plan: _Plan, original: ir.Model, model: ir.Model, reports: list[RemedyReport],
           phases: Phases) -> tuple[FixResult, Serialized]:
    """The result so far, and the fixed model's file."""
    held, print_ = serialize(model, plan)
    return _with(_result(plan, original, model, reports, phases), fingerprint=print_), held


def _feeds(plan: _Plan) -> dict[str, Any] | None:
    """The user's inputs for the proof, checked against the original's signature (InputError: exit 3)."""
    if plan.inputs is None:
        return None
    from portable.runners.inputs import graph_io, load_npz

    return load_npz(plan.inputs, graph_io(plan.source, every_type=True)[0])


def _proof(plan: _Plan, original: ir.Model, data: bytes, feeds: dict[str, Any] | None) -> Proof:
    return prove(plan.source, data, proof_batches(plan, original), plan.dims, feeds=feeds)


def _baseless(proof: Proof) -> Proof:
    why = f"an unchanged copy of the original does not reproduce its outputs ({proof.message}): no proof is possible"
    return _with(proof, unavailable=why, message=why)


def _isolate(plan: _Plan, original: ir.Model,
             feeds: dict[str, Any] | None) -> tuple[ir.Model, list[RemedyReport], Proof] | None:
    """After a failed proof: the remedies again, one at a time, proving after each that changed the
    model. One whose proof fails changes what the model computes (an adapter of the opset converter
    that gets an old semantics wrong, say): it is refused and the others go on without it."""
    unchanged = _proof(plan, original, ir.to_proto(original).SerializeToString(), feeds)
    if not unchanged.ok:
        return None  # the proof cannot tell the original from itself: no remedy is to blame
    model, reports = original, []
    for remedy in REMEDIES:
        candidate, report = apply(remedy, plan, model)
        if report.status == "applied":
            proof = _proof(plan, original, ir.to_proto(candidate).SerializeToString(), feeds)
            if not proof.ok and not proof.unavailable:
                report = _with(report, status="refused", nodes_after=report.nodes_before,
                               detail=f"changes what the model computes: {proof.message}")
                candidate = model
        model = candidate
        reports.append(report)
    return model, reports, _proof(plan, original, serialize(model, plan)[0].tobytes(), feeds)


def _result(plan: _Plan, original: ir.Model, model: ir.Model, reports: list[RemedyReport],
            phases: Phases) -> FixResult:
    described = tuple(describe(plan, original, model, reports))
    applied = {r.name for r in described if r.status == "applied"}
    symbol = batch_symbol(original)
    fixed: dict[str, int | str] = dict(plan.dims)
    if "batch" in applied and symbol is not None:
        fixed[symbol] = plan.batch if isinstance(plan.batch, int) else "batch"
    return FixResult(plan.source, plan.output, False, original.opset_imports.get(""), model.opset_imports.get(""),
                     described, None, None, external_bytes(original) if "internalize" in applied else 0, fixed,
                     timings=phases.timings)


def _with(result: _Record, **changes: Any) -> _Record:
    from dataclasses import replace

    return replace(result, **changes)


def proof_batches(plan: _Plan, original: ir.Model) -> tuple[int, ...]:
    """The fixed batch; 1 and 3 when the original's batch is symbolic; 1 for a static original."""
    if isinstance(plan.batch, int):
        return (plan.batch,)
    dynamic = any(v.shape is not None and v.shape.rank() and not isinstance(v.shape[0], int)
                  for v in original.graph.inputs if not v.is_initializer())
    return (1, 3) if dynamic else (1,)


def _proof_message(proof: Proof) -> str:
    if proof.unavailable:
        return (f"the proof cannot run: {proof.unavailable}; nothing written (--inputs FILE.npz proves on your "
                "inputs, --batch N at that batch only, --dim NAME=SIZE sizes symbolic dims; --no-verify writes "
                "without the proof)")
    return f"the proof failed: {proof.message}; nothing written"


def _manifest(proto: Any, plan: _Plan, result: FixResult, size: int, phases: Phases) -> dict[str, Any]:
    from portable.exporters.manifest import build_manifest

    assert result.report is not None and result.fingerprint is not None
    manifest = build_manifest(proto, file=plan.output.name, fingerprint=result.fingerprint, size=size,
                              precision=precision(proto), batch=plan.batch, policy=plan.policy,
                              report=result.report.to_dict(),
                              parity=result.proof.to_dict() if result.proof is not None else None,
                              timings=dict(phases.timings), spec=None)
    manifest["fix"] = {"source": str(plan.source), "remedies": [r.to_dict() for r in result.remedies],
                       "bytes_internalized": result.bytes_internalized, "dims_fixed": dict(result.dims_fixed)}
    return manifest
