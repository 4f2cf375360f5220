"""The fix run, phase by phase: load, remedies, validate (the artefact step), verify (the proof), write.

The fixed model goes through the artefact step every model file goes through
(:mod:`portable.exporters.artefact`): serialized hollow, written to a temporary file beside the target while
it is validated and fingerprinted; the proof's ONNX Runtime reads that file. Nothing reaches the target
until :func:`~portable.exporters.artefact.commit`: a failed proof, or ``--strict`` with findings, leaves
no file. The upper folders are imported inside the functions (this package is on the ground floor).
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import onnx_ir as ir

from portable.errors import InputError, one_line
from portable.io import terminate_as_interrupt
from portable.progress import Phases
from portable.quiet import quiet_libraries
from portable.repair.proof import Proof, prove
from portable.repair.records import FixFailed, FixResult, Plan, RemedyReport
from portable.repair.remedies import REMEDIES, apply, check_dims, describe, partitions, sort_nodes

if TYPE_CHECKING:
    from pathlib import Path

    import onnx

    from portable.exporters.artefact import Staged
    from portable.validators.lean import LeanModel

__all__ = ["precision", "proof_batches", "run"]

_Record = TypeVar("_Record", "FixResult", "RemedyReport", "Proof")  # the frozen records a run builds


def run(plan: Plan, phases: Phases, *, verify: bool, force: bool) -> FixResult:
    from portable.exporters.writer import check_target

    check_target(plan.output, force)
    with phases.phase("load"):
        original = _load(plan)
    check_dims(plan, original)
    feeds = _feeds(plan)
    with phases.phase("remedies"), quiet_libraries():  # library warnings and log lines are noise here
        model, reports = _remedies(plan, original)
    with terminate_as_interrupt(), contextlib.ExitStack() as stages:
        with phases.phase("validate"):
            staged = _stage(stages, model, plan, force)
        result = _with(_result(plan, original, model, reports, phases), fingerprint=staged.fingerprint,
                       report=staged.report)
        if verify:
            staged, result = _proven(stages, staged, result, plan, original, feeds, phases, force)
        if plan.policy.strict and staged.report.failing():
            return result  # --strict: nothing written while findings remain
        return _write(staged, result, plan, phases)


def _stage(stages: contextlib.ExitStack, model: ir.Model, plan: Plan, force: bool) -> Staged:
    """The fixed model through the artefact step (its temporary file removed when ``stages`` closes)."""
    from portable.exporters.artefact import stage
    from portable.exporters.manifest import stamp

    with quiet_libraries():
        return stages.enter_context(stage(model, plan.output, plan.policy, lambda proto: stamp(
            proto, plan.policy, precision(proto), plan.batch), force=force, what="the fixed model"))


def _proven(stages: contextlib.ExitStack, staged: Staged, result: FixResult, plan: Plan, original: ir.Model,
            feeds: dict[str, Any] | None, phases: Phases, force: bool) -> tuple[Staged, FixResult]:
    """The proof on the staged file; after a failure, the remedies one at a time (:func:`_isolate`) and the
    model without the one that changed what it computes staged anew. :class:`FixFailed` when no proof holds."""
    with phases.phase("verify"), quiet_libraries():
        proof = _proof(plan, original, staged.readable(), feeds)
        if not proof.ok and not proof.unavailable and not proof.random:  # a random original: no remedy to blame
            isolated = _isolate(plan, original, feeds)
            if isolated is None:
                proof = _baseless(proof)
            else:
                model, reports = isolated
                stages.close()  # the first file goes; the model without the refused remedy takes its place
                staged = _stage(stages, model, plan, force)
                result = _with(_result(plan, original, model, reports, phases), fingerprint=staged.fingerprint,
                               report=staged.report)
                proof = _proof(plan, original, staged.readable(), feeds)
    result = _with(result, proof=proof)
    if not proof.ok:
        raise FixFailed(_proof_message(proof, result.unrunnable_ops), result)
    return staged, result


def _write(staged: Staged, result: FixResult, plan: Plan, phases: Phases) -> FixResult:
    from portable.exporters.artefact import commit

    with phases.phase("write"):
        written = commit([staged])
    manifest = _manifest(staged, plan, result, phases)
    written.write_manifest(manifest)
    return _with(result, written=True, manifest=manifest, timings=dict(phases.timings))


def _load(plan: Plan) -> ir.Model:
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


def _remedies(plan: Plan, model: ir.Model) -> tuple[ir.Model, list[RemedyReport]]:
    reports = [sort_nodes(model)]  # in place, first: the others run on clones, which need a sorted graph
    for remedy in REMEDIES:
        model, report = apply(remedy, plan, model)
        reports.append(report)
        if remedy.fatal and report.status == "refused":
            result = FixResult(plan.source, plan.output, False, None, None, tuple(reports), None, None)
            raise FixFailed(f"{remedy.name} refused: {report.detail}; nothing written", result)
    return model, reports


def _feeds(plan: Plan) -> dict[str, Any] | None:
    """The user's inputs for the proof, checked against the original's signature (InputError: exit 3)."""
    if plan.inputs is None:
        return None
    from portable.runners.inputs import graph_io, load_npz

    return load_npz(plan.inputs, graph_io(plan.source, every_type=True)[0])


def _proof(plan: Plan, original: ir.Model, fixed: Path | bytes, feeds: dict[str, Any] | None) -> Proof:
    return prove(plan.source, fixed, proof_batches(plan, original), plan.dims, feeds=feeds,
                 approximate=plan.approximate_gelu)


def _baseless(proof: Proof) -> Proof:
    why = f"an unchanged copy of the original does not reproduce its outputs ({proof.message}): no proof is possible"
    return _with(proof, unavailable=why, message=why)


def _isolate(plan: Plan, original: ir.Model,
             feeds: dict[str, Any] | None) -> tuple[ir.Model, list[RemedyReport]] | None:
    """After a failed proof: the remedies again, one at a time, proving after each that changed the
    model. One whose proof fails changes what the model computes (an adapter of the opset converter
    that gets an old semantics wrong, say): it is refused and the others go on without it. None when
    the proof cannot tell the original from an unchanged copy of itself (then no remedy is to blame)."""
    unchanged = _proof(plan, original, ir.to_proto(original).SerializeToString(), feeds)
    if not unchanged.ok:
        return None
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
    return model, reports


def _result(plan: Plan, original: ir.Model, model: ir.Model, reports: list[RemedyReport],
            phases: Phases) -> FixResult:
    from portable.exporters.remedies import batch_symbol, external_bytes

    described = tuple(describe(plan, original, model, reports))
    applied = {r.name for r in described if r.status == "applied"}
    symbol = batch_symbol(original)
    fixed: dict[str, int | str] = dict(plan.dims)
    if "batch" in applied and symbol is not None:
        fixed[symbol] = plan.batch if isinstance(plan.batch, int) else "batch"
    return FixResult(plan.source, plan.output, False, original.opset_imports.get(""), model.opset_imports.get(""),
                     described, None, None, external_bytes(original) if "internalize" in applied else 0, fixed,
                     timings=phases.timings, partitions=_partitions(plan, original, model))


def _partitions(plan: Plan, original: ir.Model, model: ir.Model) -> dict[str, dict[str, int | None]]:
    """Per ``--target``, the partition estimate before the fix and after it (and with the batch fixed)."""
    if not plan.policy.targets:
        return {}
    before, after = partitions(original, plan.policy.targets), partitions(model, plan.policy.targets)
    return {t: {"before": before[t][0], "after": after[t][0], "before_batch_fixed": before[t][1],
                "after_batch_fixed": after[t][1]} for t in plan.policy.targets}


def _with(result: _Record, **changes: Any) -> _Record:
    return replace(result, **changes)


def proof_batches(plan: Plan, original: ir.Model) -> tuple[int, ...]:
    """The fixed batch; 1 and 3 when the original's batch is symbolic; for a static original, the batch
    its inputs have (dim 0 of the first that has one: what the proof feeds, and so what it reports)."""
    if isinstance(plan.batch, int):
        return (plan.batch,)
    inputs = [v for v in original.graph.inputs if not v.is_initializer() and v.shape is not None and v.shape.rank()]
    if any(not isinstance(v.shape[0], int) or v.shape[0] < 0 for v in inputs):  # type: ignore[index]
        return (1, 3)  # a symbolic, unnamed or negative (-1: unknown) dim 0
    static = [int(v.shape[0]) for v in inputs if int(v.shape[0]) > 0]  # type: ignore[index, arg-type]
    return (static[0],) if static else (1,)


def precision(proto: onnx.ModelProto) -> str:
    """fp16/bf16 when the floating inputs are in that type; fp32 otherwise (the manifest's ``precision``)."""
    import onnx

    types = {i.type.tensor_type.elem_type for i in proto.graph.input}
    if onnx.TensorProto.FLOAT16 in types:
        return "fp16"
    return "bf16" if onnx.TensorProto.BFLOAT16 in types else "fp32"


def _proof_message(proof: Proof, unrunnable: tuple[str, ...] = ()) -> str:
    if unrunnable:
        return (f"the model uses ops ONNX Runtime has no kernel for here ({', '.join(sorted(set(unrunnable)))}: "
                "PORT002, not fixable automatically), so no proof can run; nothing written (a runtime that has "
                "them, such as onnxruntime-extensions for ai.onnx.contrib, is needed; --no-verify writes unproven)")
    if proof.random:
        return f"{proof.random}; nothing written (PORT012: export in eval() mode, or --no-verify to write unproven)"
    if proof.unavailable:
        return (f"the proof cannot run: {proof.unavailable}; nothing written (--inputs FILE.npz proves on your "
                "inputs, --batch N at that batch only, --dim NAME=SIZE sizes symbolic dims; --no-verify writes "
                "without the proof)")
    return f"the proof failed: {proof.message}; nothing written"


def _manifest(staged: Staged, plan: Plan, result: FixResult, phases: Phases) -> dict[str, Any]:
    from portable.exporters.manifest import build_manifest

    assert result.report is not None
    manifest = build_manifest(staged.proto, file=plan.output.name, fingerprint=staged.fingerprint, size=staged.size,
                              precision=precision(staged.proto), batch=plan.batch, policy=plan.policy,
                              report=result.report.to_dict(),
                              parity=result.proof.to_dict() if result.proof is not None else None,
                              timings=dict(phases.timings), spec=None)
    manifest["fix"] = {"source": str(plan.source), "remedies": [r.to_dict() for r in result.remedies],
                       "bytes_internalized": result.bytes_internalized, "dims_fixed": dict(result.dims_fixed)}
    return manifest
