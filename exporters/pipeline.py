"""The export run, phase by phase: torch.export, translate, optimize, validate, verify, write."""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from portable.exporters.artefact import Staged, StagedFolder, commit, stage, stage_folder
from portable.exporters.capture import CaptureFailed
from portable.exporters.job import ExportFailed, ExportJob, ExportResult, capture_or_fail, specialized_inputs
from portable.exporters.manifest import build_manifest, stamp
from portable.exporters.passes import portable_passes
from portable.exporters.translate import translate_program
from portable.exporters.verify import Parity, verify_parity
from portable.exporters.writer import check_target
from portable.io import terminate_as_interrupt
from portable.progress import Phases
from portable.quiet import quiet_libraries
from portable.report import ValidationReport

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

    from portable.runners.tolerances import ToleranceTable

__all__ = ["run", "translate"]


def run(job: ExportJob, phases: Phases, *, verify: bool, force: bool,
        tolerances: ToleranceTable | None = None) -> ExportResult:
    check_target(job.path, force)
    if job.sidecar is not None and job.sidecar.path is not None:
        check_target(job.sidecar.path, force, folder=True)  # before the export, not after it
    with _older_objects_frozen():
        return _run(job, phases, verify, force, tolerances)


@contextlib.contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """The objects alive before the export (the user's model, torch's modules: 660,000 in a BERT-base
    process) are kept out of the garbage collector's full collections while it runs (``gc.freeze``):
    those collections, two or three an export, then walk only what the export allocated. BERT-base:
    0.8 s in the collector before, against 0.4 s for bare torch.onnx.export. Left as it is when the
    caller froze objects itself, since ``gc.unfreeze`` would undo theirs."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run(job: ExportJob, phases: Phases, verify: bool, force: bool,
         tolerances: ToleranceTable | None) -> ExportResult:
    with phases.phase("torch.export"), quiet_libraries():
        captured = capture_or_fail(job)
        _refuse_data_dependent_sizes(captured, job)
    with phases.phase("translate"), quiet_libraries():
        model = translate(captured.program, job)
    with phases.phase("optimize"), quiet_libraries():  # the constant folder's numpy warnings are not the user's
        portable_passes(captured.batch_symbol, job.root)(model)
        specialized_inputs(model, job)
    with terminate_as_interrupt(), contextlib.ExitStack() as stack:
        with phases.phase("validate"), quiet_libraries():
            stamp_ = lambda proto: stamp(proto, job.policy, job.precision, job.batch)  # noqa: E731
            staged = stack.enter_context(stage(model, job.path, job.policy, stamp_, force=force, what="the export"))
            _refuse_findings(staged.report)
            folders = _sidecar(stack, job, force)
        parity = None
        if verify:
            with phases.phase("verify"):  # onnxruntime reads the file itself, as a user's would
                parity = _verify(job, str(staged.readable()), staged.report, staged.proto, tolerances)
        with phases.phase("write"):
            written = commit([staged], folders)
    manifest = _manifest(staged, job, parity, phases, folders)
    written.write_manifest(manifest)
    return ExportResult(job.path, staged.fingerprint, staged.report, dict(phases.timings), parity, manifest)


def _sidecar(stack: contextlib.ExitStack, job: ExportJob, force: bool) -> list[StagedFolder]:
    """The files that travel with the model (a folder's tokenizer), staged to be committed with it."""
    if job.sidecar is None or job.sidecar.path is None:
        return []
    return [stack.enter_context(stage_folder(job.sidecar.path, job.sidecar.write, force=force))]


def _manifest(staged: Staged, job: ExportJob, parity: Parity | None, phases: Phases,
              folders: list[StagedFolder]) -> dict[str, Any]:
    manifest = build_manifest(staged.proto, file=job.path.name, fingerprint=staged.fingerprint, size=staged.size,
                              precision=job.precision, batch=job.batch, policy=job.policy, report=staged.report.to_dict(),
                              parity=parity.to_dict() if parity else None, timings=phases.timings, spec=job.spec)
    if job.sidecar is not None:  # an export from a model folder: where each setting came from, the files beside it
        manifest["source"] = job.sidecar.source
        manifest["preprocessing"] = folders[0].record if folders else None
    return manifest


def translate(program: Any, job: ExportJob) -> ir.Model:
    """torch's ONNX translation at the policy's opset (:func:`translate_program`); a failure is the
    model's finding (:class:`ExportFailed`, exit 1), with what torch printed kept for ``--debug``."""
    try:
        return translate_program(program, job.module, job.args, job.root, job.policy.opset, job.names)
    except CaptureFailed as exc:
        raise ExportFailed(exc.message, ValidationReport(str(job.path), job.policy, exc.findings),
                           detail=exc.detail) from None


def _refuse_data_dependent_sizes(captured: Any, job: ExportJob) -> None:
    """A captured program with an op whose output size depends on values (``nonzero``) is refused with
    precheck's finding, PORT106 at the line and with the hint, as ``portable precheck`` gives it; translated,
    it would surface as PORT006/PORT008/PORT009 naming torch's internal symbol (``u0``)."""
    from portable.exporters.precheck import program_findings

    found = [f for f in program_findings(captured.program, job.root) if f.rule_id == "PORT106"]
    if found:
        raise ExportFailed(found[0].message, ValidationReport(str(job.path), job.policy, tuple(found)))


def _refuse_findings(report: ValidationReport) -> None:
    """Error findings stop the export (exit 1, nothing written)."""
    if not report.ok:
        failing = report.failing()
        first = failing[0].message if failing else (report.error or "validation failed")
        raise ExportFailed(f"{len(failing)} error finding(s), first: {first}", report)


def _verify(job: ExportJob, model: str, report: ValidationReport, proto: onnx.ModelProto,
            tolerances: ToleranceTable | None) -> Parity:
    batches = (1, 3) if job.batch == "dynamic" else (int(job.batch),)
    parity = verify_parity(job.module, job.args, model, batches, job.precision, proto=proto, tolerances=tolerances)
    if not parity.ok:
        raise ExportFailed(f"parity check failed: {parity.message}{_accept_hint(parity)}", report, parity)
    return parity


def _accept_hint(parity: Parity) -> str:
    """What to do about a finite difference over the bound: find where it starts, then accept it if it is
    arithmetic (an interpolation or a reduction computed another way), with the bound it needs."""
    if not 0 < parity.max_abs_diff < float("inf"):
        return ""
    needed = _one_digit_up(parity.max_abs_diff * 1.5)
    return (f". To see where ONNX Runtime and PyTorch part, export with --no-verify and run `portable compare` on "
            f"the file with --localize; if it is the runtimes' arithmetic, not a wrong op, accept it with "
            f"--atol {needed:g}")


def _one_digit_up(value: float) -> float:
    """The smallest number of one significant digit at or above ``value`` (3.1e-4 -> 4e-4)."""
    scale = 10.0 ** math.floor(math.log10(value))
    return float(f"{math.ceil(round(value / scale, 9)) * scale:.0e}")
