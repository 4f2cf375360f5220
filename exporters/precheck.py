"""``portable precheck``: the model's Python constructs that will not export portably.

* PORT101 data-dependent branch, PORT103 specialized batch, PORT104 other torch.export
  failure: from ``torch.export`` itself (the same capture ``portable export`` starts with);
  PORT104 also when torch.onnx cannot decompose or translate the captured program (the
  translation ``portable export`` runs next; ``translate=False`` skips it).
* PORT105 ``torch.cond``/``while_loop`` (they become ``If``/``Loop``), PORT106 ops whose
  output size depends on values (``nonzero``): read from the captured program.
* PORT102 graph breaks: from ``torch._dynamo.explain``, with dynamo's reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import one_line
from portable.exporters.capture import CaptureFailed, capture
from portable.exporters.failures import DATA_DEPENDENT_HINT
from portable.exporters.job import eval_mode
from portable.exporters.provenance import relative_file, user_frame
from portable.exporters.rules import precheck_finding
from portable.exporters.translate import translate_program
from portable.findings import Finding, Severity, SourceLocation
from portable.policy import Policy
from portable.quiet import quiet_libraries
from portable.report import ValidationReport

if TYPE_CHECKING:
    import torch

__all__ = ["graph_break_findings", "precheck", "program_findings"]

_CONTROL_FLOW = ("cond", "while_loop", "map_impl", "scan")


def precheck(module: torch.nn.Module, example_inputs: Any, batch: str | int = "dynamic", *, root: str | Path | None = None,
             names: Sequence[str] | None = None, policy: Policy | None = None, graph_breaks: bool = True,
             path: str = "<module>", translate: bool = True) -> ValidationReport:
    """Findings about ``module``'s Python code, as a report the formatters render."""
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    base = Path(root or Path.cwd()).resolve()
    opset = (policy or Policy()).opset if translate else None
    with eval_mode(module), quiet_libraries():
        findings = _capture_findings(module, args, batch, base, names, opset)
        if graph_breaks:
            findings += _new_breaks(findings, graph_break_findings(module, args, base))
    return ValidationReport(path, policy or Policy(), tuple(findings), model={"checked": "python"})


def _capture_findings(module: Any, args: tuple[Any, ...], batch: str | int, base: Path,
                      names: Sequence[str] | None, opset: int | None) -> list[Finding]:
    """torch.export's findings; then, when it captured a program without errors and ``opset`` is
    given, torch.onnx's (a decomposition that fails, as transformers' sdpa attention can)."""
    try:
        program = capture(module, args, batch, base, names).program
        findings = list(program_findings(program, base))
        if opset is not None and not any(f.severity is Severity.ERROR for f in findings):
            translate_program(program, module, args, base, opset, names)
        return findings
    except CaptureFailed as exc:
        return list(exc.findings)


def _new_breaks(findings: list[Finding], breaks: list[Finding]) -> list[Finding]:
    """Graph breaks not already reported at the same line (a data-dependent branch is both)."""
    seen = {(f.location.source.file, f.location.source.line) for f in findings if f.location.source}
    return [f for f in breaks if not f.location.source or (f.location.source.file, f.location.source.line) not in seen]


def program_findings(program: Any, root: Path) -> Iterator[Finding]:
    """Control-flow operators and data-dependent output sizes in a captured program."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    seen: set[Any] = set()
    for node in program.graph.nodes:
        source = user_frame(node.meta.get("stack_trace") or "", root)
        name = getattr(node.target, "__name__", str(node.target))
        if node.op == "call_function" and name in _CONTROL_FLOW:
            yield precheck_finding("PORT105", f"torch.{name} exports to an ONNX control-flow op (If/Loop)", source)
        if node.op != "call_function" or "val" not in node.meta:
            continue
        fresh = free_unbacked_symbols(node.meta["val"]) - seen
        if fresh and name not in _CONTROL_FLOW:
            seen |= fresh
            yield precheck_finding("PORT106", f"'{name}' gives an output whose size depends on tensor values "
                                   f"({', '.join(sorted(map(str, fresh)))})", source, hint=DATA_DEPENDENT_HINT)


def graph_break_findings(module: Any, args: tuple[Any, ...], root: Path) -> list[Finding]:
    """One PORT102 finding per dynamo graph break, at the user's line."""
    import torch

    try:
        explanation = torch._dynamo.explain(module)(*args)
    except Exception as exc:  # noqa: BLE001 - dynamo failing outright is itself worth reporting
        return [precheck_finding("PORT102", f"torch._dynamo could not trace the model: {one_line(exc, typed=False)}")]
    finally:
        torch._dynamo.reset()
    base = str(root)
    return [precheck_finding("PORT102", f"graph break: {_reason(b.reason)}", _frame(b.user_stack, base))
            for b in explanation.break_reasons]


def _reason(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return " ".join(lines[:2])[:300] if lines else "unknown reason"


def _frame(stack: Any, base: str) -> SourceLocation | None:
    frames = list(stack or ())
    if not frames:
        return None
    last = frames[-1]
    return SourceLocation(relative_file(last.filename, base), int(last.lineno or 0), None)
