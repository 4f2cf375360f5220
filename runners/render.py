"""Rendering a :class:`CompareReport`: rich tables for the terminal, Markdown for files.

Both renderers read the same rows (``*_rows`` functions), so the terminal and the
Markdown report always show the same figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from portable.runners.report import CompareReport

__all__ = ["judged_lines", "latency_rows", "markdown_table", "options_rows", "parity_rows", "render_markdown",
           "render_rich", "speedup_table"]

PARITY_HEADER = ("pair", "batch", "output", "max abs", "max rel", "mean abs", "p99 abs", "cosine",
                 "beyond tol", "non-finite", "judged by (atol/rtol or figure)", "result")
LATENCY_HEADER = ("runner", "batch", "p50 ms", "p90 ms", "p99 ms", "mean ms", "stdev ms", "CV", "samples/s",
                  "back-to-back ms/call", "iters", "rounds", "warm-up", "peak mem", "memory measured as",
                  "first result s")


def _num(value: float | None, spec: str = ".3g") -> str:
    return "n/a" if value is None else format(value, spec)


def _bytes(value: int | None) -> str:
    if value is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024  # type: ignore[assignment]
    return str(value)


def parity_rows(report: CompareReport) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for pair in report.parity:
        label = f"{pair.actual} vs {pair.expected}"
        if pair.error:
            rows.append((label, str(pair.batch), "-", *("",) * 8, f"FAIL: {pair.error}"))
        for out in pair.outputs:
            s = out.stats
            rows.append((label, str(pair.batch), out.output, _num(s.max_abs), _num(s.max_rel), _num(s.mean_abs),
                         _num(s.p99_abs), _num(s.cosine, ".6f"), f"{s.beyond} ({s.share_beyond:.2%})",
                         f"{s.nonfinite_actual}/{s.nonfinite_expected}",
                         out.tolerance.describe(), _verdict(out)))
    return rows


def _verdict(out: Any) -> str:
    if not out.passed:
        return f"FAIL{': ' + out.stats.shape_mismatch if out.stats.shape_mismatch else ''}"
    return f"pass, degenerate (rms {_num(out.stats.rms_expected)})" if out.warning else "pass"


def judged_lines(report: CompareReport) -> list[str]:
    """Which figure judges each output and why (atol/rtol and its source, or cosine/SQNR and its budget), once
    per distinct judgement; then how each seeded input was drawn."""
    lines = list(dict.fromkeys(f"judged: {o.judgement()}" for pair in report.parity for o in pair.outputs))
    drawn = report.setup.get("drawn") or {}
    return lines + [f"input {name!r}: {how}" for name, how in drawn.items()]


def parity_warnings(report: CompareReport) -> list[str]:
    """Each distinct parity warning (a degenerate output, where parity proves nothing), once."""
    return list(dict.fromkeys(w for pair in report.parity for w in pair.warnings))


def latency_rows(report: CompareReport) -> list[tuple[str, ...]]:
    firsts = {r.name: r.first_result_seconds for r in report.runners}
    rows: list[tuple[str, ...]] = []
    for r in report.latency:
        s = r.stats
        rows.append((r.runner, str(r.batch), f"{s.p50_s * 1e3:.3f}", f"{s.p90_s * 1e3:.3f}", f"{s.p99_s * 1e3:.3f}",
                     f"{s.mean_s * 1e3:.3f}", f"{s.stdev_s * 1e3:.3f}", f"{s.cv:.3f}", f"{s.throughput:.1f}",
                     "-" if r.pipelined_s is None else f"{r.pipelined_s * 1e3:.3f}", str(s.iterations),
                     "-" if r.rounds is None else str(r.rounds), _warmup(r.warmup),
                     _bytes(r.peak_memory_bytes), r.memory_kind, _num(firsts.get(r.runner, {}).get(r.batch))))
    return rows


def _warmup(warm: Any) -> str:
    """``240 it, 1.2 s, steady`` (or ``capped``: the cap came before the blocks agreed)."""
    if warm is None:
        return "-"
    return f"{warm.iterations} it, {warm.seconds:.2g} s, {'steady' if warm.steady else 'capped'}"


OPTIONS_HEADER = ("runner", "provider options (as ONNX Runtime reports them)")


def options_rows(report: CompareReport) -> list[tuple[str, ...]]:
    options = report.setup.get("provider_options") or {}
    return [(name, ", ".join(f"{k}={v}" for k, v in opts.items()) or "(none)") for name, opts in options.items()]


def speedup_table(report: CompareReport) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """One row per batch size, runners side by side: p50 (speed-up over eager), peak memory."""
    rows = report.speedups()
    runners = list(dict.fromkeys(s.runner for s in rows))
    header = ("batch", *(f"{r} p50 ms (vs eager)" for r in runners), *(f"{r} peak mem" for r in runners))
    table = []
    for batch in sorted({s.batch for s in rows}):
        by = {s.runner: s for s in rows if s.batch == batch}
        cells = [f"{by[r].p50_s * 1e3:.3f} ({by[r].speedup:.2f}x)" if r in by else "-" for r in runners]
        table.append((str(batch), *cells, *(_bytes(by[r].peak_memory_bytes) if r in by else "-" for r in runners)))
    return header, table


def _setup_line(report: CompareReport) -> str:
    s = report.setup
    numerics = s.get("numerics") or ("tf32" if s.get("tf32") else "strict-fp32")
    compiled = f"compile mode {s.get('compile_mode')}" if s.get("compile_mode") else "no torch.compile"
    return (f"device {s.get('device')}, {compiled}, numerics {numerics} "
            f"(TF32 {'on' if s.get('tf32') else 'off'} in PyTorch and ONNX Runtime), "
            f"providers {', '.join(s.get('providers', []))}, batches {s.get('batches')}, inputs {s.get('inputs')}, "
            f"seed {s.get('seed')}")


def _loads_rows(report: CompareReport) -> list[tuple[str, ...]]:
    return [(r.name, r.kind, r.device, r.detail or "-", _num(r.load_seconds),
             f"FAIL: {r.error}" if r.error else ", ".join(f"b{b}: {t:.3g}" for b, t in r.first_result_seconds.items()))
            for r in report.runners]


LOADS_HEADER = ("runner", "kind", "device", "provider/mode", "load s", "first result s (compile)")


def render_rich(report: CompareReport, console: Any) -> None:
    """Print the report as rich tables on ``console``."""
    from rich.markup import escape
    from rich.table import Table

    def table(title: str, header: Sequence[str], rows: list[tuple[str, ...]]) -> Table:
        t = Table(title=title, title_justify="left")
        for h in header:
            t.add_column(h, overflow="fold")
        for row in rows:
            style = "red" if row and row[-1].startswith("FAIL") else None
            t.add_row(*row, style=style)
        return t

    console.print(f"[bold]{report.model}[/bold] against {report.reference or 'the reference module'}")
    console.print(_setup_line(report))
    console.print(table("Runners", LOADS_HEADER, _loads_rows(report)))
    if options_rows(report):
        console.print(table("ONNX Runtime provider options", OPTIONS_HEADER, options_rows(report)))
    console.print(table("Parity", PARITY_HEADER, parity_rows(report)))
    for line in judged_lines(report):
        console.print(escape(line))
    if report.latency:
        console.print(table("Latency", LATENCY_HEADER, latency_rows(report)))
        console.print(table("Eager vs compiled vs ONNX Runtime", *speedup_table(report)))
    _print_localization(report, console.print)
    for warning in (*parity_warnings(report), *report.timing_warnings):
        console.print(f"[yellow]warning: {escape(warning)}[/yellow]")
    for note in report.notes:
        console.print(f"note: {note}")
    console.print("[green]parity: PASS[/green]" if report.parity_passed else
                  "[red]parity: FAIL[/red] " + "; ".join(report.parity_failures))


def _print_localization(report: CompareReport, emit: Any) -> None:
    loc = report.localization
    if loc is None:
        return
    if loc.error:
        emit(f"localize: not available: {loc.error}")
    elif loc.node is None:
        emit(f"localize: no intermediate value diverges ({loc.compared} of {loc.candidates} PyTorch values compared)")
    else:
        emit(f"localize: first divergent node {loc.node} ({loc.op_type}), value {loc.value}, "
             f"max abs {_num(loc.max_abs)}, from PyTorch {loc.fx_node} at {loc.source or 'unknown source'} "
             f"({loc.compared} of {loc.candidates} PyTorch values compared up to it)")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(cell: str) -> str:
        return str(cell).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: CompareReport, plots: Sequence[tuple[str, str]] = ()) -> str:
    """The report as Markdown; ``plots`` are ``(title, relative path)`` images to link."""
    parts = [f"# Parity and latency: `{report.model}`", "",
             f"Reference: `{report.reference or 'module'}`. {_setup_line(report)}.", "",
             f"**Parity: {'PASS' if report.parity_passed else 'FAIL'}**" +
             ("" if report.parity_passed else " — " + "; ".join(report.parity_failures)), "",
             "## Runners", "", markdown_table(LOADS_HEADER, _loads_rows(report)), "",
             *(["## ONNX Runtime provider options", "", markdown_table(OPTIONS_HEADER, options_rows(report)), ""]
               if options_rows(report) else []),
             "## Parity", "", markdown_table(PARITY_HEADER, parity_rows(report)), "",
             *[f"- {line}" for line in judged_lines(report)], *([""] if judged_lines(report) else []),
             *[f"- warning: {w}" for w in parity_warnings(report)], *([""] if parity_warnings(report) else [])]
    parts += [f"- warning: {w}" for w in report.timing_warnings] + ([""] if report.timing_warnings else [])
    if report.latency:
        parts += ["## Latency", "", markdown_table(LATENCY_HEADER, latency_rows(report)), "",
                  "## Eager vs compiled vs ONNX Runtime", "", markdown_table(*speedup_table(report)), ""]
    lines: list[str] = []
    _print_localization(report, lines.append)
    if lines:
        parts += ["## Localization", "", *lines, ""]
    parts += [f"![{title}]({path})\n" for title, path in plots]
    parts += ["## Environment", "", markdown_table(("key", "value"),
                                                   [(k, str(v)) for k, v in report.environment.items()]), ""]
    parts += [f"- {note}" for note in report.notes]
    return "\n".join(parts) + "\n"
