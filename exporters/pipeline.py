"""The export run, phase by phase: torch.export, translate, optimize, validate, verify, write."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from portable.errors import InternalError
from portable.exporters.capture import failure_findings
from portable.exporters.failures import debug_text
from portable.exporters.fingerprint import fingerprint
from portable.exporters.job import ExportFailed, ExportJob, ExportResult, capture_or_fail, specialized_inputs
from portable.exporters.manifest import build_manifest, stamp
from portable.exporters.passes import portable_passes
from portable.exporters.progress import Phases
from portable.exporters.quiet import quiet_torch
from portable.exporters.verify import Parity, verify_parity
from portable.exporters.writer import check_size, check_target, write_atomic, write_json
from portable.report import ValidationReport

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

__all__ = ["output_names", "run", "translate"]


def run(job: ExportJob, phases: Phases, *, verify: bool, force: bool) -> ExportResult:
    check_target(job.path, force)
    with phases.phase("torch.export"), quiet_torch():
        captured = capture_or_fail(job)
    with phases.phase("translate"), quiet_torch():
        model = translate(captured.program, job)
    with phases.phase("optimize"), quiet_torch():  # the constant folder's numpy warnings are not the user's
        portable_passes(captured.batch_symbol, job.root)(model)
        specialized_inputs(model, job)
    with phases.phase("validate"), quiet_torch():
        proto, print_ = _serialize(model, job)
        data = proto.SerializeToString(deterministic=True)
        report = _validate(proto, job, len(data))
    parity = None
    if verify:
        with phases.phase("verify"):
            parity = _verify(job, data, report, proto)
    existed = job.path.exists()
    with phases.phase("write"):
        write_atomic(job.path, data, force)
    manifest = build_manifest(proto, file=job.path.name, fingerprint=print_, size=len(data), precision=job.precision,
                              batch=job.batch, policy=job.policy, report=report.to_dict(),
                              parity=parity.to_dict() if parity else None, timings=phases.timings, spec=job.spec)
    try:
        write_json(job.path.with_name(job.path.name + ".json"), manifest)
    except BaseException:
        if not existed:  # no new model without its manifest
            job.path.unlink(missing_ok=True)
        raise
    return ExportResult(job.path, print_, report, dict(phases.timings), parity, manifest)


def translate(program: Any, job: ExportJob) -> ir.Model:
    """torch's ONNX translation at the policy's opset, inline weights, no optimization (ours follows).

    A failure here (decomposition, an op torch cannot translate) is the model's: bare
    ``torch.onnx.export`` fails the same way. It becomes a finding at the model's line
    (:class:`ExportFailed`, exit 1); what torch printed is kept for ``--debug``.
    """
    import torch

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            onnx_program = torch.onnx.export(program, job.args, dynamo=True, opset_version=job.policy.opset,
                                             external_data=False, optimize=False, verbose=False,
                                             input_names=list(job.names) if job.names else None,
                                             output_names=output_names(program))
    except Exception as exc:  # noqa: BLE001 - every torch.onnx failure is reported as a finding
        findings = failure_findings(exc, job.module, job.args, job.root, job.names, "torch.onnx", printed.getvalue())
        raise ExportFailed(findings[0].message, ValidationReport(str(job.path), job.policy, tuple(findings)),
                           detail=debug_text(exc, printed.getvalue())) from None
    if onnx_program is None:  # only without a program (never here): torch.onnx's Optional return
        raise InternalError("torch.onnx.export returned no program", path=str(job.path))
    return onnx_program.model


def output_names(program: Any) -> list[str] | None:
    """Graph outputs named after the keys of a dict (or transformers ``ModelOutput``) result, joined by
    ``_`` along nested keys (``logits``, ``last_hidden_state``, ``boxes_0``); None (torch's names) for a
    tensor or a plain tuple, or when the keys do not map one to one onto the outputs."""
    spec = getattr(getattr(program, "call_spec", None), "out_spec", None)
    if spec is None:
        return None
    paths = list(_leaf_paths(spec, ()))
    if len(paths) != len(program.graph_signature.user_outputs) or not any(keyed for _, keyed in paths):
        return None
    names = [re.sub(r"\W", "_", "_".join(path)) or "output" for path, _ in paths]
    return names if len(set(names)) == len(names) else None


def _leaf_paths(spec: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(key path, whether a mapping key is on it) of every leaf of a pytree ``TreeSpec``."""
    children = list(spec.children_specs)
    if not children:
        if spec.num_leaves == 1:
            yield path, False
        return
    context = spec.context
    keyed = isinstance(context, (list, tuple)) and len(context) == len(children) and all(
        isinstance(k, str) for k in context)
    keys = [str(k) for k in context] if keyed else [str(i) for i in range(len(children))]
    for key, child in zip(keys, children):
        for sub, deeper in _leaf_paths(child, (*path, key)):
            yield sub, keyed or deeper


def _serialize(model: ir.Model, job: ExportJob) -> tuple[onnx.ModelProto, str]:
    """Refuse oversized weights, then build the proto with portable's metadata and fingerprint."""
    import onnx_ir as ir

    check_size(model, job.policy.max_size_bytes)
    proto = ir.to_proto(model)
    stamp(proto, job.policy, job.precision, job.batch)
    print_ = fingerprint(proto)
    proto.metadata_props.add(key="portable.fingerprint", value=print_)
    return proto, print_


def _validate(proto: onnx.ModelProto, job: ExportJob, size: int | None) -> ValidationReport:
    from portable.validators import validate_proto

    report = validate_proto(proto, str(job.path), job.policy, size=size)
    if report.error is not None:  # a rule crashed: portable's failure, not the model's (exit 3)
        raise InternalError(f"validating the export failed: {report.error}", path=str(job.path))
    if not report.ok:
        failing = report.failing()
        first = failing[0].message if failing else (report.error or "validation failed")
        raise ExportFailed(f"{len(failing)} error finding(s), first: {first}", report)
    return report


def _verify(job: ExportJob, data: bytes, report: ValidationReport, proto: onnx.ModelProto) -> Parity:
    batches = (1, 3) if job.batch == "dynamic" else (int(job.batch),)
    parity = verify_parity(job.module, job.args, data, batches, job.precision, proto=proto)
    if not parity.ok:
        raise ExportFailed(f"parity check failed: {parity.message}", report, parity)
    return parity
