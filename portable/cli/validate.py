"""``portable validate``: check model files against the portability contract, for CI."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator, Sequence

import click

from portable.baseline import Baseline, BaselineEntry
from portable.cli.options import config_options, findings_format_option, output_option, policy_from_options
from portable.discovery import collect_models
from portable.errors import ExitCode, UsageError
from portable.formatters import FORMATS, get_formatter
from portable.formatters.text import TextFormatter
from portable.io import atomic_write_text, check_writable
from portable.policy import FAIL_ON_KINDS, Policy, merge_cli
from portable.report import ValidationReport, worst_exit_code

__all__ = ["emit", "validate"]


def use_color(output: str | None) -> bool:
    return output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ


def emit(reports: Sequence[ValidationReport], fmt: str, output: str | None) -> None:
    """Render reports and write them to ``output`` (atomically) or stdout."""
    text = get_formatter(fmt, color=use_color(output)).render(reports)
    if output:
        atomic_write_text(output, text)
    else:
        click.echo(text, nl=False)


def _run(paths: Sequence[str], policy: Policy, jobs: int, stream: TextFormatter | None,
         pairs: Sequence[tuple[str, str]] = (), context: int | None = None) -> list[ValidationReport]:
    from portable.parallel import validate_many

    if pairs:  # text-generation pairs (docs/llm.md): the pair rules' ids are not model rules'
        from portable.validators.pairs.engine import model_policy, pair_reports

        files = validate_many(list(collect_models(paths)), model_policy(policy), jobs) if paths else iter(())
        found: Iterator[ValidationReport] = itertools.chain(files, pair_reports(pairs, policy, context))
    else:
        found = validate_many(list(collect_models(paths)), policy, jobs)
    reports = []
    for report in found:
        reports.append(report)
        if stream is not None:
            click.echo(stream.render_report(report), nl=False)
    return reports


def _emit_statistics(reports: Sequence[ValidationReport], fmt: str, output: str | None) -> None:
    from portable.formatters.statistics import render_statistics

    text = render_statistics(reports, fmt)
    if output:
        atomic_write_text(output, text)
    else:
        click.echo(text, nl=False)


def _parse_reports(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    parsed = []
    for value in values:
        fmt, sep, path = value.partition("=")
        if not sep or fmt not in FORMATS or not path:
            raise click.BadParameter(f"{value!r}: expected FORMAT=FILE with FORMAT one of {', '.join(FORMATS)}",
                                     param_hint="--report")
        parsed.append((fmt, path))
    return tuple(parsed)


def _show_stale(stale: Sequence[BaselineEntry], baseline: str) -> None:
    if stale:
        click.echo(f"{len(stale)} baseline entr{'y' if len(stale) == 1 else 'ies'} no longer occur; "
                   f"remove them from {baseline} (or rewrite it with --write-baseline):", err=True)
    for e in stale:
        where = ", ".join(x for x in (e.graph, e.node and f"node {e.node!r}", e.value and f"value {e.value!r}") if x)
        click.echo(f"  stale: {e.model}: {e.rule} at {where}", err=True)


def _check_usage(anything: bool, baseline: str | None, write_baseline: str | None, statistics: bool, fmt: str) -> None:
    if baseline and write_baseline:
        raise UsageError("--baseline and --write-baseline exclude each other: write a baseline, then use it")
    if not anything:
        raise UsageError("nothing to validate: give model files or folders, or --pair PREFILL DECODE")
    if statistics and fmt not in ("text", "json"):
        raise UsageError(f"--statistics prints text or json, not {fmt}: drop --format {fmt} or --statistics")


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--pair", "pairs", nargs=2, multiple=True, type=click.Path(), metavar="PREFILL DECODE",
              help="A text-generation pair: each graph's rules, and the pair rules (PORT301+) over both. Repeatable.")
@click.option("--context", type=click.IntRange(min=1), default=None,
              help="--pair: the slots C the cache must hold. Default: the attention mask's length.")
@config_options
@click.option("--ort", is_flag=True, help="Also run PORT014: create an ONNX Runtime CPU session.")
@click.option("--target", "targets", multiple=True, metavar="NAMES",
              help="Check against these targets' own support tables (comma-separated, repeatable; `all`): "
                   "ort-cpu, ort-cuda, tensorrt, openvino, qnn, nnapi, coreml, tract, directml, webnn, webgpu, "
                   "migraphx, litert. Runs PORT201-PORT204.")
@click.option("--max-partitions", type=click.IntRange(min=1), default=None, metavar="N",
              help="Gate: fail (exit 1) when a target's estimate has more than N partitions.")
@click.option("--no-fallback", is_flag=True, help="Gate: fail (exit 1) when any node of a target falls back or stops the load.")
@click.option("--fail-on", type=click.Choice(FAIL_ON_KINDS), default=None,
              help="Gate: fail (exit 1) when a target's tables judge a node unsupported (unknown ops too), or with "
                   "partial also one they list with a restriction in words (the report's per-target counts).")
@click.option("--live", is_flag=True,
              help="With --target: also ask the runtimes installed here (ONNX Runtime CPU and CUDA, OpenVINO, tract, "
                   "Qualcomm's HTP simulator: pip install 'portable-onnx[qnn]').")
@findings_format_option("Report format.")
@output_option
@click.option("--report", "extra", multiple=True, metavar="FORMAT=FILE", callback=lambda c, p, v: _parse_reports(v),
              help="Also write the report in FORMAT to FILE (repeatable), e.g. sarif=portable.sarif.")
@click.option("--statistics", is_flag=True,
              help="Print how often each rule fired (text, or json with --format json) instead of the findings.")
@click.option("--exit-zero", is_flag=True,
              help="Exit 0 even when findings fail (the report's exit_code says 0 too); an unreadable model still exits 3.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes; results stay in input order.")
@click.option("--baseline", type=click.Path(dir_okay=False), default=None,
              help="Accept the findings recorded in this baseline file; fail only on new ones.")
@click.option("--write-baseline", type=click.Path(dir_okay=False), default=None,
              help="Record the current findings as the baseline and exit 0.")
def validate(paths: tuple[str, ...], pairs: tuple[tuple[str, str], ...], context: int | None, config: str | None,
             select: tuple[str, ...], ignore: tuple[str, ...], strict: bool, ort: bool, targets: tuple[str, ...],
             max_partitions: int | None, no_fallback: bool, fail_on: str | None, live: bool, fmt: str, output: str | None,
             extra: tuple[tuple[str, str], ...], statistics: bool, exit_zero: bool, jobs: int, baseline: str | None,
             write_baseline: str | None) -> None:
    """Validate ONNX models (files, or folders searched for *.onnx) against the contract.

    Exit 0 when no model has error findings (warnings too under --strict), 1 when one
    has (a failed --max-partitions, --no-fallback or --fail-on gate is one), 3 when a model cannot be read.
    """
    _check_usage(bool(paths or pairs), baseline, write_baseline, statistics, fmt)
    policy = merge_cli(policy_from_options(config, select, ignore, strict, ort), targets=targets,
                       max_partitions=max_partitions, no_fallback=no_fallback, fail_on=fail_on, targets_live=live,
                       exit_zero=exit_zero)
    if (policy.max_partitions is not None or policy.no_fallback or policy.fail_on or policy.targets_live) \
            and not policy.targets:
        raise UsageError("--max-partitions, --no-fallback, --fail-on and --live apply to targets: name them with --target")
    for path, what in ((output, "-o/--output"), *((p, f"--report {f}") for f, p in extra),
                       (write_baseline, "--write-baseline")):
        if path:
            check_writable(path, what=f"{what} file")  # before the models are read, not after
    accepted = Baseline.read(baseline) if baseline else None
    streaming = fmt == "text" and output is None and accepted is None and not write_baseline and not statistics
    stream = TextFormatter(color=use_color(output)) if streaming else None
    reports = _run(paths, policy, jobs, stream, pairs, context)
    if write_baseline:
        Baseline.from_reports(reports).write(write_baseline)
        click.echo(f"wrote {write_baseline}: {sum(len(r.findings) for r in reports)} finding(s) accepted", err=True)
        raise click.exceptions.Exit(int(ExitCode.ERROR if any(r.error for r in reports) else ExitCode.OK))
    stale: list[BaselineEntry] = []
    if accepted is not None:
        reports, stale = accepted.apply(reports)
    _emit_all(reports, stream, statistics, fmt, output, extra)
    _show_stale(stale, baseline or "")
    raise click.exceptions.Exit(int(worst_exit_code(reports)))


def _emit_all(reports: Sequence[ValidationReport], stream: TextFormatter | None, statistics: bool, fmt: str,
              output: str | None, extra: tuple[tuple[str, str], ...]) -> None:
    """The streamed run's summary, the statistics or the report; then every --report FORMAT=FILE."""
    if stream is not None:
        click.echo(stream.render_summary(reports), nl=False)
    elif statistics:
        _emit_statistics(reports, fmt, output)
    else:
        emit(reports, fmt, output)
    for extra_fmt, path in extra:
        emit(reports, extra_fmt, path)
