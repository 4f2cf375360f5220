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
from portable.exporters.failures import (
    DATA_DEPENDENT_HINT,
    DataDependentSize,
    ModelFrame,
    attention_hint,
    data_dependent_size,
    debug_text,
    model_frame,
    root_cause,
)
from portable.exporters.rules import precheck_finding
from portable.findings import Finding

__all__ = ["CaptureFailed", "Captured", "capture", "dynamic_shapes", "failure_findings"]

BATCH = "batch"
_SPECIALIZED = re.compile(r"specialized it to be a constant \((\d+)\)")
_TORCH_ONNX_HINT = ("torch.export traced the model but torch.onnx cannot decompose or translate this line (bare "
                    "torch.onnx.export fails the same way): rewrite it; `portable --debug export ...` prints torch's report")


class CaptureFailed(FindingsError):
    """torch.export refused the model; ``findings`` say where and why."""

    def __init__(self, findings: Sequence[Finding], detail: str = "") -> None:
        super().__init__(findings[0].message if findings else "torch.export failed")
        self.findings = tuple(findings)
        self.detail = detail  # torch's own report, shown under --debug


@dataclass(frozen=True)
class Captured:
    program: Any  # torch.export.ExportedProgram
    batch_symbol: str | None  # torch's name for the batch symbol (e.g. "s77"), None when static


def dynamic_shapes(args: Sequence[Any], batch: str | int) -> tuple[Any, ...] | None:
    """dim 0 of every tensor leaf is one shared ``Dim("batch")``; None for a static batch.

    The result follows the pytree structure of ``args`` (lists, tuples, dicts, nested), as
    ``torch.export`` wants it: ``([image],)`` gives ``([{0: batch}],)``.
    """
    import torch
    from torch.utils import _pytree

    if batch != "dynamic":
        return None
    dim = torch.export.Dim(BATCH)
    return tuple(_pytree.tree_map(lambda a: {0: dim} if isinstance(a, torch.Tensor) and a.dim() > 0 else None, arg)
                 for arg in args)


def capture(module: Any, args: tuple[Any, ...], batch: str | int, root: Path,
            names: Sequence[str] | None = None) -> Captured:
    """``torch.export.export`` (non-strict); any failure becomes :class:`CaptureFailed`."""
    import torch

    shapes = dynamic_shapes(args, batch)
    printed = io.StringIO()
    try:
        # on failure torch.export prints the partial graph to stderr; the finding says what matters
        with contextlib.redirect_stderr(printed):
            program = torch.export.export(module, args, dynamic_shapes=shapes, strict=False)
    except Exception as exc:  # noqa: BLE001 - every torch.export failure is reported as a finding
        text = printed.getvalue()
        raise CaptureFailed(failure_findings(exc, module, args, root, names, printed=text),
                            debug_text(exc, text)) from None
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
                     names: Sequence[str] | None = None, stage: str = "torch.export", printed: str = "") -> list[Finding]:
    """The findings for one torch failure: data-dependent shape or branch, specialized batch, other
    (PORT104), at the innermost line of the model's code, with the known remedy where there is one.
    ``printed``: what torch wrote to stderr meanwhile (its partial graph)."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    frame = model_frame(exc, root)
    where = frame.source if frame else None
    if any(isinstance(e, GuardOnDataDependentSymNode) for e in (exc, root_cause(exc))):
        size = data_dependent_size(exc, root, printed)
        if size is not None:
            return [_data_dependent_size(size, frame)]
        first = one_line(exc, typed=False, limit=300)
        what = f"`{frame.code}` " if frame and frame.code else ""
        return [precheck_finding("PORT101", f"data-dependent branch: {what}decides Python control flow from "
                                 f"tensor values, which torch.export cannot trace ({first})", where)]
    match = _SPECIALIZED.search(str(exc))
    if match:
        return [_specialized(module, args, int(match.group(1)), names)]
    cause = root_cause(exc)
    first = next((line for line in str(cause).strip().splitlines() if line.strip()), type(cause).__name__)
    hint = attention_hint(module, frame) or (_TORCH_ONNX_HINT if stage == "torch.onnx" else None)
    return [precheck_finding("PORT104", f"{stage} failed: {type(cause).__name__}: {first[:300]}", where, hint=hint)]


def _data_dependent_size(size: DataDependentSize, guard: ModelFrame | None) -> Finding:
    """PORT106 at the line that made the data-dependent size, naming the line that then needed it."""
    origin = size.frame or guard
    made = f"`{origin.code}` gives" if origin and origin.code else "an op gives"
    then = f"; `{guard.code}` ({guard.source}) then needs its value" if guard and guard.code and guard != origin else ""
    message = (f"data-dependent shape: {made} an output whose size depends on tensor values "
               f"({', '.join(size.symbols)}){then}, which a static graph cannot express")
    return precheck_finding("PORT106", message, origin.source if origin else None, hint=DATA_DEPENDENT_HINT)


_NESTED_HINT = ("dim 0 of every tensor in a list or dict input is taken as the batch; when it is not one (a list of "
                "C x H x W images, say), export with --batch N")


def _specialized(module: Any, args: tuple[Any, ...], value: int, names: Sequence[str] | None) -> Finding:
    leaves = _named_leaves(args, list(names) if names else _arg_names(module, len(args)))
    inputs = [(n, nested) for n, nested, t in leaves if t.dim() and t.shape[0] == value]
    culprits = [f"{kind} '{name}' {tuple(t.shape)}" for kind, name, t in _tensors(module) if t.dim() and t.shape[0] == value]
    why = f"; dim 0 of {', '.join(culprits)} equals it and fixes the batch" if culprits else ""
    message = (f"input(s) {', '.join(repr(n) for n, _ in inputs) or '?'}: dim 0 was asked dynamic but the model's code "
               f"specializes the batch to {value}{why}")
    hint = _NESTED_HINT if any(nested for _, nested in inputs) else None
    return precheck_finding("PORT103", message, None, value=inputs[0][0] if inputs else None, hint=hint)


def _named_leaves(args: tuple[Any, ...], names: list[str]) -> list[tuple[str, bool, Any]]:
    """(name as the graph input will have it, inside a list/dict?, tensor) of every tensor leaf: ``images_0``."""
    import torch
    from torch.utils import _pytree

    out = []
    for name, arg in zip(names, args):
        for path, leaf in _pytree.tree_flatten_with_path(arg)[0]:
            if isinstance(leaf, torch.Tensor):
                keys = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
                out.append(("_".join([name, *keys]), bool(keys), leaf))
    return out


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
