"""``portable.export``: a PyTorch module in, one portable, deterministic, validated ONNX file out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.exporters.job import (
    PRECISIONS,
    ExportFailed,
    ExportResult,
    capture_or_fail,
    convert_precision,
    eval_mode,
    make_job,
)
from portable.exporters.pipeline import run
from portable.policy import Policy
from portable.progress import Phases

if TYPE_CHECKING:
    import torch

    from portable.runners.tolerances import ToleranceTable

__all__ = ["PRECISIONS", "ExportFailed", "ExportResult", "capture_or_fail", "convert_precision", "eval_mode",
           "export"]


def export(module: torch.nn.Module, example_inputs: Any, path: str | Path, batch: str | int = "dynamic",
           precision: str = "fp32", policy: Policy | None = None, *, input_names: Sequence[str] | None = None,
           root: str | Path | None = None, verify: bool = True, force: bool = False, quiet: bool = True,
           phases: Phases | None = None, spec: str | None = None,
           tolerances: ToleranceTable | None = None, sidecar: Any = None) -> ExportResult:
    """Export ``module`` to ``path``; raise :class:`ExportFailed` (nothing written) on error findings.

    ``batch``: ``"dynamic"`` (dim 0 of every input and output is the symbol ``batch``) or an
    integer (fully static). ``precision``: ``fp32``, ``fp16`` or ``bf16`` (the module is converted
    on a copy). Source locations are made relative to ``root`` (default: the project of the
    module's class). ``tolerances``: verify's bounds (default: ``portable compare``'s for each
    output's dtype; ``parse_overrides(["4e-4"], [])`` is ``--atol 4e-4``). ``sidecar``: what an export from a
    model folder writes beside the file and records (:class:`portable.hf.assets.Sidecar`).
    """
    job = make_job(module, example_inputs, path, batch, precision, policy, input_names, root, spec, sidecar)
    with eval_mode(job.module):
        return run(job, phases or Phases(quiet), verify=verify, force=force, tolerances=tolerances)
