"""The first phase: ``torch.export`` with the batch as one symbol, and its failures as findings."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable.errors import FindingsError, one_line
from portable.exporters.provenance import user_frame
from portable.exporters.rules import precheck_finding
from portable.findings import Finding

__all__ = ["CaptureFailed", "Captured", "capture", "dynamic_shapes", "failure_findings"]

BATCH = "batch"
_RAISED_AT = re.compile(r"The following call raised this error:\n(.*?)(?:\n\n|\Z)", re.S)
_SPECIALIZED = re.compile(r"specialized it to be a constant \((\d+)\)")


class CaptureFailed(FindingsError):
    """torch.export refused the model; ``findings`` say where and why."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__(findings[0].message if findings else "torch.export failed")
        self.findings = tuple(findings)


@dataclass(frozen=True)
class Captured:
    program: Any  # torch.export.ExportedProgram
    batch_symbol: str | None  # torch's name for the batch symbol (e.g. "s77"), None when static


def dynamic_shapes(args: Sequence[Any], batch: str | int) -> tuple[Any, ...] | None:
    """dim 0 of every tensor argument is one shared ``Dim("batch")``; None for a static batch."""
    import torch

    if batch != "dynamic":
        return None
    dim = torch.export.Dim(BATCH)
    return tuple({0: dim} if isinstance(a, torch.Tensor) and a.dim() > 0 else None for a in args)


def capture(module: Any, args: tuple[Any, ...], batch: str | int, root: Path,
            names: Sequence[str] | None = None) -> Captured:
    """``torch.export.export`` (non-strict); any failure becomes :class:`CaptureFailed`."""
    import torch

    shapes = dynamic_shapes(args, batch)
    try:
        # on failure torch.export prints the partial graph to stderr; the finding says what matters
        with contextlib.redirect_stderr(io.StringIO()):
            program = torch.export.export(module, args, dynamic_shapes=shapes, strict=False)
    except Exception as exc:  # noqa: BLE001 - every torch.export failure is reported as a finding
        raise CaptureFailed(failure_findings(exc, module, args, root, names)) from None
    return Captured(program, _batch_symbol(program) if shapes else None)


def _batch_symbol(program: Any) -> str | None:
    for spec in program.graph_signature.input_specs:
        if spec.kind.name != "USER_INPUT":
            continue
        node = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == spec.arg.name)
        val = node.meta.get("val")
        if getattr(val, "dim", lambda: 0)() > 0 and not isinstance(val.shape[0], int):
            return str(val.shape[0])
    return None


def failure_findings(exc: BaseException, module: Any, args: tuple[Any, ...], root: Path,
                     names: Sequence[str] | None = None) -> list[Finding]:
    """The findings for one torch.export exception: data-dependent branch, specialized batch, other."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    text = str(exc)
    where = _raised_at(text, root)
    if isinstance(exc, GuardOnDataDependentSymNode):
        code = _code_line(text)
        first = one_line(exc, typed=False, limit=300)
        what = f"`{code}` " if code else ""
        return [precheck_finding("PORT101", f"data-dependent branch: {what}decides Python control flow from "
                                 f"tensor values, which torch.export cannot trace ({first})", where)]
    match = _SPECIALIZED.search(text)
    if match:
        return [_specialized(module, args, int(match.group(1)), names)]
    first = next((line for line in text.strip().splitlines() if line.strip()), type(exc).__name__)
    return [precheck_finding("PORT104", f"torch.export failed: {type(exc).__name__}: {first[:300]}", where)]


def _raised_at(text: str, root: Path):
    match = _RAISED_AT.search(text)
    return user_frame(match.group(1), root) if match else None


def _code_line(text: str) -> str | None:
    match = _RAISED_AT.search(text)
    lines = [line.strip() for line in match.group(1).splitlines()] if match else []
    code = [line for line in lines if line and not line.startswith("File ")]
    return code[-1] if code else None


def _specialized(module: Any, args: tuple[Any, ...], value: int, names: Sequence[str] | None) -> Finding:
    import torch

    names = list(names) if names else _arg_names(module, len(args))
    inputs = [n for n, a in zip(names, args) if isinstance(a, torch.Tensor) and a.dim() and a.shape[0] == value]
    culprits = [f"{kind} '{name}' {tuple(t.shape)}" for kind, name, t in _tensors(module) if t.dim() and t.shape[0] == value]
    why = f"; dim 0 of {', '.join(culprits)} equals it and fixes the batch" if culprits else ""
    message = (f"input(s) {', '.join(repr(n) for n in inputs) or '?'}: dim 0 was asked dynamic but the model's code "
               f"specializes the batch to {value}{why}")
    return precheck_finding("PORT103", message, None, value=inputs[0] if inputs else None)


def _tensors(module: Any):
    for name, buf in module.named_buffers():
        yield "buffer", name, buf
    for name, param in module.named_parameters():
        yield "parameter", name, param


def _arg_names(module: Any, count: int) -> list[str]:
    import inspect

    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        params = []
    return (params + [f"input_{i}" for i in range(len(params), count)])[:count]
