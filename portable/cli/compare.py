"""``portable compare``, ``portable matrix`` and ``portable report merge``.

torch and onnxruntime are imported inside the commands, never at import time, so
``portable --help`` stays fast.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from portable.cli.options import output_option, quiet_option, tolerance_options
from portable.cli.textgen import task_option
from portable.errors import ExitCode, UsageError
from portable.io import atomic_write_text, check_writable

__all__ = ["compare", "matrix", "report"]

F = TypeVar("F", bound=Callable[..., Any])


def _batches(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        values = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise UsageError(f"--batch {text!r}: expected sizes like 1,8,32") from None
    if not values or any(b < 1 for b in values):
        raise UsageError(f"--batch {text!r}: sizes must be >= 1")
    return values


def _shared(fn: F) -> F:
    """Options that ``compare`` and ``matrix`` share, defined once."""
    for option in reversed((
        click.option("--ep", "providers", default=None, metavar="EPS",
                     help="Execution providers, comma-separated (cpu,cuda,tensorrt,...; compare also takes "
                          "cuda-graph: CUDA with CUDA graphs, cuda-nhwc: CUDA preferring NHWC kernels, or "
                          "cuda-graph-nhwc). Default: compare, the CPU provider on a cpu "
                          "device and every available one on cuda (one that cannot load is skipped, with a note); "
                          "matrix, every available one."),
        click.option("--batch", "batch", default=None, metavar="SIZES", help="Batch sizes, e.g. 1,8,32."),
        click.option("--dim", "dims", multiple=True, metavar="NAME=SIZE", help="Size of a symbolic input axis."),
        click.option("--int-range", "int_range", multiple=True, metavar="[NAME=]LOW:HIGH",
                     help="Range of random integer inputs (HIGH exclusive), for one input by name or for all; "
                          "repeatable. Default: each example input's own range, else 0:10."),
        click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs."),
        click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True),
        output_option,
        quiet_option,
    )):
        fn = option(fn)
    return fn


def _progress(quiet: bool) -> tuple[Callable[[str], None], Any]:
    """A progress callback (a rich status line on stderr) and the status to stop."""
    if quiet:
        return (lambda _msg: None), None
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        return (lambda msg: click.echo(f"portable: {msg}", err=True)), None
    status = console.status("starting")
    status.start()
    return (lambda msg: status.update(msg)), status


def _emit(text: str, output: str | None) -> None:
    if output:
        atomic_write_text(output, text)
    else:
        click.echo(text, nl=not text.endswith("\n"))


def _print_text(report: Any, output: str | None) -> None:
    from rich.console import Console

    from portable.runners.render import render_rich

    if output:
        buffer = io.StringIO()
        render_rich(report, Console(file=buffer, width=200, force_terminal=False))
        atomic_write_text(output, buffer.getvalue())
    else:
        render_rich(report, Console(width=max(160, Console().width)))


def _write_markdown(report: Any, path: str) -> None:
    from portable.runners.plots import write_plots
    from portable.runners.render import render_markdown

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, render_markdown(report, write_plots(report, target)))


def _timing(no_latency: bool, warmup_ms: float, warmup_max_ms: float, iterations: int, duration_ms: float) -> Any:
    from portable.runners.timing import TimingConfig

    if no_latency:
        return None
    try:
        return TimingConfig(warmup_seconds=warmup_ms / 1e3, min_iterations=iterations, min_seconds=duration_ms / 1e3,
                            warmup_max_seconds=max(warmup_max_ms, warmup_ms) / 1e3)
    except ValueError as exc:
        raise UsageError(f"latency options: {exc}") from None


def _load_reference(spec: str, weights: str | None) -> Any:
    from portable.spec import load_spec, load_weights

    loaded = load_spec(spec)
    if weights:
        load_weights(loaded.module, weights)
    return loaded


@click.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--reference", "reference", default=None, metavar="SPEC",
              help="The PyTorch model: package.module:callable or path/to/file.py:callable (needed unless "
                   "--runtime is given).")
@click.option("--runtime", "runtimes", default=None, metavar="RUNTIMES",
              help="Compare runtimes instead: ort,openvino,tract,reference (comma-separated), each with the "
                   "PyTorch SPEC when given, else with the first that runs; batch 1 and 3 by default.")
@click.option("--golden", "golden", default=None, type=click.Path(file_okay=False),
              help="With --runtime: write the inputs and the reference's outputs to this folder as ONNX "
                   "test_data_set_N/input_K.pb, output_K.pb.")
@click.option("--reference-cap", "reference_cap", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
              help="With --runtime: seconds the reference evaluator gets per batch before it is 'timed out'.")
@click.option("--weights", default=None, type=click.Path(dir_okay=False), help="State dict for the reference.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None,
              help="PyTorch device. Default: cuda when available, else cpu.")
@click.option("--compile-mode", default="default", show_default=True, metavar="MODES",
              help="torch.compile modes (inductor), comma-separated: default, reduce-overhead, max-autotune; "
                   "one compiled runner each.")
@click.option("--no-compile", is_flag=True, help="Skip the torch.compile runner.")
@click.option("--inputs", "inputs", default=None, type=click.Path(dir_okay=False),
              help="Inputs from a .npz (keys: input names) instead of seeded random ones.")
@click.option("--tf32", is_flag=True, help="Allow TF32 in PyTorch and in every ONNX Runtime provider (use_tf32=1), "
                                          "with wider float32 tolerances. Default: strict fp32 on both sides.")
@tolerance_options
@click.option("--report", "report_path", default=None, type=click.Path(dir_okay=False),
              help="Also write a Markdown report with PNG plots next to it.")
@click.option("--localize", is_flag=True, help="On a parity failure, find the first divergent ONNX node.")
@click.option("--no-latency", is_flag=True, help="Parity only.")
@click.option("--warmup-ms", default=200.0, show_default=True, type=float,
              help="Least warm-up per runner and batch; it goes on until the runner is steady.")
@click.option("--warmup-max-ms", default=10000.0, show_default=True, type=float,
              help="Most warm-up per runner and batch (the report says when it stopped unsteady).")
@click.option("--iterations", default=10, show_default=True, type=int, help="Minimum timed iterations.")
@click.option("--duration-ms", default=1000.0, show_default=True, type=float, help="Minimum timed duration.")
@click.option("--max-latency-ms", "latency_budgets", multiple=True, metavar="[RUNNER:]STAT=MS",
              help="Latency budget (STAT: p50, p90, p99, mean; RUNNER: default every ONNX Runtime runner); "
                   "exceeding it exits 1. Repeatable.")
@click.option("--max-error", "error_budgets", multiple=True, metavar="[OUTPUT=]V",
              help="Largest absolute error allowed between ONNX Runtime and eager PyTorch; exceeding it exits 1.")
@task_option
@click.option("--tokens", default=32, show_default=True, type=click.IntRange(min=1),
              help="text-generation: greedy tokens generated from the seeded prompt.")
@click.option("--prompt-length", default=None, type=click.IntRange(min=1),
              help="text-generation: tokens of the seeded prompt. Default: 20, or fewer when the context needs it.")
@_shared
def compare(model: str, reference: str | None, weights: str | None, report_path: str | None, fmt: str,
            output: str | None, quiet: bool, task: str, tokens: int, prompt_length: int | None, runtimes: str | None,
            golden: str | None, reference_cap: float, **flags: Any) -> None:
    """Compare MODEL in ONNX Runtime with eager and compiled PyTorch: parity, then latency.

    Exit 0 when every output of every pair is within tolerance (and every budget is met), 1 on a parity
    failure (or NaN/Inf on either side) or an exceeded budget, 2 on bad options, 3 when something cannot run.
    With --task text-generation, MODEL is a pair (NAME.textgen.json or NAME.prefill.onnx) and the proof is
    greedy generation, token for token (docs/llm.md).
    """
    from portable.runners.api import compare as run_compare

    for path, what in ((report_path, "--report"), (output, "-o/--output")):
        if path:
            check_writable(path, what=f"{what} file")  # before the run, not after it
    if golden:
        check_writable(golden, what="--golden folder", folder=True)
    if runtimes is not None or golden is not None:
        from portable.cli.runtimes import compare_runtimes_command

        compare_runtimes_command(model, runtimes, reference, weights, golden, reference_cap, fmt, output, quiet,
                                 report_path=report_path, task=task, flags=flags,
                                 helpers=(_batches, _emit, _load_reference, _progress))
    if reference is None:
        raise UsageError("compare needs --reference SPEC (or --runtime to compare runtimes with each other)")
    options = _options(reference, **flags)  # every flag parsed and checked before torch is imported
    loaded = _load_reference(reference, weights)
    say, status = _progress(quiet)
    if task == "text-generation":
        from portable.cli.textgen import compare_text_generation

        try:
            return compare_text_generation(model, loaded.module, tokens=tokens, prompt_length=prompt_length,
                                           seed=options.seed, no_compile=options.compile_mode is None,
                                           tolerances=options.table(), timing=options.timing, fmt=fmt,
                                           output=output, progress=say)
        finally:
            if status is not None:
                status.stop()
    try:
        result = run_compare(model, loaded.module, options, example_inputs=loaded.example_inputs, progress=say)
    finally:
        if status is not None:
            status.stop()
    if report_path:
        _write_markdown(result, report_path)
    if fmt == "json":
        _emit(json.dumps(result.to_dict(), indent=2), output)
    else:
        _print_text(result, output)
    _show_budgets(result.budgets)
    raise click.exceptions.Exit(int(result.exit_code))


def _options(reference: str, *, device: str | None, compile_mode: str, no_compile: bool, inputs: str | None,
             tf32: bool, atol: tuple[str, ...], rtol: tuple[str, ...], localize: bool, no_latency: bool,
             warmup_ms: float, warmup_max_ms: float, iterations: int, duration_ms: float,
             latency_budgets: tuple[str, ...], error_budgets: tuple[str, ...], providers: str | None,
             batch: str | None, dims: tuple[str, ...], int_range: tuple[str, ...], seed: int) -> Any:
    """compare's flags as one :class:`~portable.runners.options.CompareOptions`."""
    from portable.runners.budgets import parse_error_budgets, parse_latency_budgets
    from portable.runners.inputs import parse_dims, parse_int_ranges
    from portable.runners.options import CompareOptions
    from portable.runners.tolerances import parse_overrides

    ints, per_input = parse_int_ranges(int_range)
    return CompareOptions(device=device, compile_mode=None if no_compile else compile_mode, providers=providers,
                          batches=_batches(batch), inputs=inputs, dims=parse_dims(dims), int_range=ints,
                          int_ranges=per_input, seed=seed, tf32=tf32, tolerances=parse_overrides(atol, rtol, tf32=tf32),
                          timing=_timing(no_latency, warmup_ms, warmup_max_ms, iterations, duration_ms),
                          localize=localize, reference_name=reference,
                          latency_budgets=parse_latency_budgets(latency_budgets),
                          error_budgets=parse_error_budgets(error_budgets))


def _show_budgets(checks: Any) -> None:
    for check in checks:
        if not check.passed:
            click.echo(f"portable: budget exceeded: {check.budget}: {check.subject} measured {check.measured:.6g}",
                       err=True)
    if checks and all(c.passed for c in checks):
        click.echo(f"portable: {len(checks)} budget check(s) passed", err=True)


@click.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--target", default=None, help="Name of this hardware target in merged tables. Default: GPU or CPU name.")
@click.option("--markdown", "markdown_path", default=None, type=click.Path(dir_okay=False),
              help="Also write the matrix as Markdown.")
@click.option("--runtime", "runtimes", default=None, metavar="RUNTIMES",
              help="Also run these runtimes (openvino,tract,reference) against the CPU provider, a column each; "
                   "one not installed is a 'not installed' cell.")
@_shared
def matrix(model: str, target: str | None, markdown_path: str | None, providers: str | None, batch: str | None,
           dims: tuple[str, ...], int_range: tuple[str, ...], seed: int, fmt: str, output: str | None,
           quiet: bool, runtimes: str | None) -> None:
    """For each execution provider and batch size: does the session load, does a first run
    succeed, parity against the CPU provider, and how many nodes fall back off the provider.

    Exit 1 when a provider that is available fails to load, run or match the CPU provider.
    """
    from portable.runners.inputs import parse_dims, parse_int_ranges
    from portable.runners.matrix import render_matrix_markdown, run_matrix

    for path, what in ((output, "-o/--output"), (markdown_path, "--markdown")):
        if path:
            check_writable(path, what=f"{what} file")
    say, status = _progress(quiet)
    try:
        result = run_matrix(model, providers=providers, batches=_batches(batch), dims=parse_dims(dims),
                            int_ranges=parse_int_ranges(int_range), seed=seed, target=target, progress=say,
                            runtimes=_runtimes(runtimes))
    finally:
        if status is not None:
            status.stop()
    if markdown_path:
        atomic_write_text(markdown_path, render_matrix_markdown(result))
    _emit(json.dumps(result.to_dict(), indent=2) if fmt == "json" else render_matrix_markdown(result), output)
    if not result.passed:
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))


def _runtimes(text: str | None) -> list[str]:
    from portable.runners.runtimes import parse_runtimes

    return parse_runtimes(text) if text else []


@click.group()
def report() -> None:
    """Work with saved reports (JSON from compare --format json and matrix --format json)."""


@report.command("merge")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False))
@output_option
def merge(reports: tuple[str, ...], output: str | None) -> None:
    """Merge JSON reports made on different machines into one table (Markdown; JSON when
    the output file ends in .json)."""
    from portable.runners.merge import merge_reports, render_merged_markdown

    merged = merge_reports([Path(p) for p in reports])
    if output and output.endswith(".json"):
        _emit(json.dumps(merged.to_dict(), indent=2), output)
    else:
        _emit(render_merged_markdown(merged), output)

