"""The export run, phase by phase: torch.export, translate, optimize, validate, verify, write."""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from portable.errors import InternalError
from portable.exporters.capture import CaptureFailed
from portable.exporters.fingerprint import fingerprint
from portable.exporters.job import ExportFailed, ExportJob, ExportResult, capture_or_fail, specialized_inputs
from portable.exporters.manifest import build_manifest, stamp
from portable.exporters.passes import portable_passes
from portable.exporters.progress import Phases
from portable.exporters.quiet import quiet_torch
from portable.exporters.serialize import Serialized, serialize
from portable.exporters.translate import translate_program
from portable.exporters.verify import Parity, verify_parity
from portable.exporters.writer import check_size, check_target, write_json
from portable.io import StagedWrite, terminate_as_interrupt
from portable.report import ValidationReport

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

    from portable.runners.tolerances import ToleranceTable

__all__ = ["run", "translate"]


def run(job: ExportJob, phases: Phases, *, verify: bool, force: bool,
        tolerances: ToleranceTable | None = None) -> ExportResult:
    check_target(job.path, force)
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
    with phases.phase("torch.export"), quiet_torch():
        captured = capture_or_fail(job)
    with phases.phase("translate"), quiet_torch():
        model = translate(captured.program, job)
    with phases.phase("optimize"), quiet_torch():  # the constant folder's numpy warnings are not the user's
        portable_passes(captured.batch_symbol, job.root)(model)
        specialized_inputs(model, job)
    existed = job.path.exists()
    done = _check_and_write(model, job, phases, verify, force, tolerances)
    report, parity = done.report, done.parity
    manifest = build_manifest(done.proto, file=job.path.name, fingerprint=done.fingerprint, size=done.size,
                              precision=job.precision, batch=job.batch, policy=job.policy, report=report.to_dict(),
                              parity=parity.to_dict() if parity else None, timings=phases.timings, spec=job.spec)
    try:
        write_json(job.path.with_name(job.path.name + ".json"), manifest)
    except BaseException:
        if not existed:  # no new model without its manifest
            job.path.unlink(missing_ok=True)
        raise
    return ExportResult(job.path, done.fingerprint, report, dict(phases.timings), parity, manifest)


@dataclass(frozen=True)
class _Written:
    proto: onnx.ModelProto
    fingerprint: str
    size: int
    report: ValidationReport
    parity: Parity | None


def _check_and_write(model: ir.Model, job: ExportJob, phases: Phases, verify: bool, force: bool,
                     tolerances: ToleranceTable | None) -> _Written:
    """Serialize (the weights stay where they are: ``exporters.serialize``), then validate and verify
    while a background thread writes the bytes to a temporary file (the fsync of a large model
    overlaps the checks); renamed onto the target only when every check passed, removed otherwise."""
    with terminate_as_interrupt(), contextlib.ExitStack() as stack:
        with phases.phase("validate"), quiet_torch():
            held = _serialize(model, job)
            check_target(job.path, force)
            staged = stack.enter_context(StagedWrite(job.path, held.pieces, tail=True))
            print_, report = _validate_and_fingerprint(held, job)
            tail = _stamp_fingerprint(held.proto, print_)
            staged.append(tail)
            size = held.size + len(tail)
            report = replace(report, model={**report.model, "fingerprint": print_, "size_bytes": size})
        parity = None
        if verify:
            with phases.phase("verify"):  # onnxruntime reads the file itself, as a user's would
                parity = _verify(job, str(staged.readable()), report, held.proto, tolerances)
        with phases.phase("write"):
            staged.commit()
    return _Written(held.proto, print_, size, report, parity)


def _validate_and_fingerprint(held: Serialized, job: ExportJob) -> tuple[str, ValidationReport]:
    """Validate the model, and hash its fingerprint in a thread meanwhile, from the weights' bytes in
    place (hashlib releases the GIL), so the 0.4 s of a 440 MB model's sha256 overlaps the rules
    instead of coming before them."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="portable-fingerprint")
    hashing: list[Future[str]] = []

    def start(proto: onnx.ModelProto, payloads: Mapping[int, memoryview]) -> None:
        hashing.append(pool.submit(fingerprint, proto, payloads))
    try:
        report = _validate(held, job, start)
        return hashing[0].result(), report
    finally:
        pool.shutdown(wait=False)  # a failed check does not wait for the hash


def _stamp_fingerprint(proto: onnx.ModelProto, print_: str) -> bytes:
    """Add the fingerprint to ``proto`` and return it serialized as a ModelProto of that one
    ``metadata_props`` entry: appended to the bytes already written, it parses as the same model
    with the entry last (protobuf merges a concatenated message's repeated fields), so the weights
    need not be serialized again. The fingerprint covers no metadata, so the validated bytes differ
    from the file by that entry alone."""
    import onnx

    entry = onnx.StringStringEntryProto(key="portable.fingerprint", value=print_)
    proto.metadata_props.append(entry)
    tail = onnx.ModelProto()
    tail.metadata_props.append(entry)
    return tail.SerializeToString(deterministic=True)


def translate(program: Any, job: ExportJob) -> ir.Model:
    """torch's ONNX translation at the policy's opset (:func:`translate_program`); a failure is the
    model's finding (:class:`ExportFailed`, exit 1), with what torch printed kept for ``--debug``."""
    try:
        return translate_program(program, job.module, job.args, job.root, job.policy.opset, job.names)
    except CaptureFailed as exc:
        raise ExportFailed(exc.message, ValidationReport(str(job.path), job.policy, exc.findings),
                           detail=exc.detail) from None


def _serialize(model: ir.Model, job: ExportJob) -> Serialized:
    """Refuse oversized weights, then the file's bytes with portable's metadata (the fingerprint
    comes later: :func:`_stamp_fingerprint`)."""
    check_size(model, job.policy.max_size_bytes)
    return serialize(model, lambda proto: stamp(proto, job.policy, job.precision, job.batch))


def _validate(held: Serialized, job: ExportJob,
              parsed: Callable[[onnx.ModelProto, Mapping[int, memoryview]], None]) -> ValidationReport:
    """The rules over the model about to be written, read as ``portable validate`` reads the file."""
    from portable.validators import validate_held

    report = validate_held(held.proto, held.payloads, held.pieces, str(job.path), job.policy, parsed=parsed)
    if report.error is not None:  # a rule crashed: portable's failure, not the model's (exit 3)
        raise InternalError(f"validating the export failed: {report.error}", path=str(job.path))
    if not report.ok:
        failing = report.failing()
        first = failing[0].message if failing else (report.error or "validation failed")
        raise ExportFailed(f"{len(failing)} error finding(s), first: {first}", report)
    return report


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
