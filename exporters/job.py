"""The export job: what one export run needs, resolved once, and what it gives (a result or a failure).

:mod:`portable.exporters.api` builds an :class:`ExportJob` and hands it to
:mod:`portable.exporters.pipeline`; both import from here, neither from the other's internals.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import FindingsError, UsageError
from portable.exporters.capture import Captured, CaptureFailed, capture
from portable.exporters.inputs import TRACE_BATCH, parse_batch, tree_map_tensors, with_batch
from portable.exporters.provenance import project_root
from portable.exporters.rules import precheck_finding
from portable.exporters.verify import Parity
from portable.policy import Policy, load_policy
from portable.report import ValidationReport

if TYPE_CHECKING:
    import torch

__all__ = ["PRECISIONS", "ExportFailed", "ExportJob", "ExportResult", "capture_or_fail", "convert_precision",
           "eval_mode", "make_job", "specialized_inputs"]

PRECISIONS = ("fp32", "fp16", "bf16")


class ExportFailed(FindingsError):
    """Findings (or a parity failure) stopped the export; nothing was written. ``report`` says why."""

    def __init__(self, message: str, report: ValidationReport, parity: Parity | None = None,
                 detail: str = "") -> None:
        super().__init__(message)
        self.report = report
        self.parity = parity
        self.detail = detail  # torch's own report of a failure, for --debug


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export` wrote and found."""

    path: Path
    fingerprint: str
    report: ValidationReport
    timings: dict[str, float]
    parity: Parity | None = None
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def manifest_path(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "manifest": str(self.manifest_path), "fingerprint": self.fingerprint,
                "validation": self.report.to_dict(), "parity": self.parity.to_dict() if self.parity else None,
                "timings": self.timings}


@dataclass(frozen=True)
class ExportJob:
    """Everything an export run needs, resolved once."""

    module: Any
    args: tuple[Any, ...]
    path: Path
    batch: str | int
    precision: str
    policy: Policy
    names: tuple[str, ...] | None
    root: Path
    spec: str | None
    sidecar: Any = None  # portable.hf.assets.Sidecar: the files written beside the model, and its source record


@contextlib.contextmanager
def eval_mode(module: torch.nn.Module) -> Iterator[None]:
    """``module.eval()`` for the duration, then each submodule's own mode back (a frozen
    eval-mode child of a training model stays in eval)."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for sub, training in modes:
            sub.training = training


def make_job(module: Any, example_inputs: Any, path: str | Path, batch: str | int, precision: str,
         policy: Policy | None, input_names: Sequence[str] | None, root: str | Path | None, spec: str | None,
         sidecar: Any = None) -> ExportJob:
    """Check the arguments and resolve them: precision applied, inputs at the trace batch, policy, root."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"export() needs a torch.nn.Module, got {type(module).__name__}")
    if precision not in PRECISIONS:
        raise UsageError(f"bad precision {precision!r} (choose from {', '.join(PRECISIONS)})")
    batch = parse_batch(batch)
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if input_names is not None and len(input_names) != len(args):
        raise UsageError(f"{len(input_names)} input name(s) for {len(args)} example input(s)")
    module, args = convert_precision(module, args, precision)
    size = TRACE_BATCH if batch == "dynamic" else int(batch)
    # dynamic: dim 0 of every tensor leaf is the batch (traced at 2); --batch N sets dim 0 of the top-level
    # tensors, and tensors inside lists/dicts are traced as given (their dim 0 may not be a batch: C x H x W images)
    resize = lambda a: _resize(a, size, batch)  # noqa: E731 - one expression, used twice below
    args = tree_map_tensors(resize, args) if batch == "dynamic" else tuple(resize(a) for a in args)
    policy = (policy or load_policy()).with_(batch="dynamic" if batch == "dynamic" else "static")
    base = Path(root) if root is not None else _module_root(module)
    return ExportJob(module, args, Path(path), batch, precision, policy,
                tuple(input_names) if input_names else None, base.resolve(), spec, sidecar)


def _resize(arg: Any, size: int, batch: str | int) -> Any:
    import torch

    if not isinstance(arg, torch.Tensor) or arg.dim() == 0:
        return arg
    if batch == "dynamic" and arg.shape[0] >= TRACE_BATCH:
        return arg
    return with_batch(arg, size)


def convert_precision(module: torch.nn.Module, args: tuple[Any, ...], precision: str,
                      ) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """fp16/bf16: a converted copy of the module, and floating inputs in that dtype."""
    import torch

    if precision == "fp32":
        return module, args
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    converted = copy.deepcopy(module).to(dtype)
    return converted, tree_map_tensors(lambda a: a.to(dtype) if a.is_floating_point() else a, args)


def _module_root(module: Any) -> Path:
    try:
        return project_root(Path(inspect.getfile(type(module))).parent)
    except (TypeError, OSError):
        return project_root(Path.cwd())


def capture_or_fail(job: ExportJob) -> Captured:
    """torch.export, with its failures as a report (exit 1) rather than a traceback."""
    try:
        return capture(job.module, job.args, job.batch, job.root, job.names)
    except CaptureFailed as exc:
        raise ExportFailed(exc.message, ValidationReport(str(job.path), job.policy, exc.findings),
                           detail=exc.detail) from None


def specialized_inputs(model: Any, job: ExportJob) -> None:
    """After export, dim 0 of every input and output must still be ``batch`` when it was asked dynamic."""
    if job.batch != "dynamic":
        return
    findings = []
    for kind, values in (("input", model.graph.inputs), ("output", model.graph.outputs)):
        for value in values:
            dim = value.shape[0] if value.shape is not None and value.shape.rank() else "batch"
            if isinstance(dim, int):
                findings.append(precheck_finding(
                    "PORT103", f"{kind} '{value.name}': dim 0 was asked dynamic but the exported graph fixes it "
                    f"to {dim}: the model's code specialized the batch", value=value.name))
    if findings:
        raise ExportFailed(findings[0].message, ValidationReport(str(job.path), job.policy, tuple(findings)))
