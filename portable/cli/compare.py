"""``portable compare``, ``portable matrix`` and ``portable report merge``.

``compare`` is three modes, each a command function over its own frozen options: ONNX Runtime against
PyTorch (here: :func:`compare_against_pytorch`), the runtimes side by side (``--runtime``:
:mod:`portable.cli.runtimes`) and a text-generation pair (``--task text-generation``: :mod:`portable.cli.textgen`).
``COMPARE_MODES`` says which mode each option belongs to; one given in another mode is refused.

torch and onnxruntime are imported inside the commands, never at import time, so
``portable --help`` stays fast.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from portable.cli.options import (
    CompareCommon,
    ModeTable,
    check_outputs,
    emit,
    feed_options,
    format_option,
    load_reference,
    output_option,
    parse_batches,
    progress,
    quiet_option,
    timing_config,
    tolerance_options,
    trust_option,
)
from portable.cli.runtimes import RuntimesCompareOptions, compare_runtimes_command
from portable.cli.textgen import TextGenCompareOptions, compare_text_generation, task_option
from portable.errors import ExitCode, UsageError
from portable.io import atomic_write_text

if TYPE_CHECKING:
    from portable.runners.options import CompareOptions

__all__ = ["COMPARE_MODES", "PYTORCH", "RUNTIMES", "TEXT_GENERATION", "TorchCompareOptions", "compare",
           "compare_against_pytorch", "compare_mode", "matrix", "report"]

F = TypeVar("F", bound=Callable[..., Any])

# compare's modes: ONNX Runtime against PyTorch (the default), the runtimes side by side (--runtime), a
# text-generation pair's greedy tokens (--task text-generation)
PYTORCH, RUNTIMES, TEXT_GENERATION = "pytorch", "runtimes", "text-generation"
_EVERY = frozenset({PYTORCH, RUNTIMES, TEXT_GENERATION})
_P, _R, _G = frozenset({PYTORCH}), frozenset({RUNTIMES}), frozenset({TEXT_GENERATION})

# Each option of `portable compare` (its click parameter name) -> the modes it belongs to: one given in
# another mode is a usage error naming it and its modes. Each mode's dataclass has these fields
# (tests/cli/test_compare_modes.py holds the table, the dataclasses and the command's options together).
COMPARE_MODES = ModeTable(
    labels={PYTORCH: "compare (ONNX Runtime against PyTorch)", RUNTIMES: "compare --runtime",
            TEXT_GENERATION: "compare --task text-generation"},
    homes={
        "model": _EVERY, "reference": _EVERY, "weights": _EVERY, "atol": _EVERY, "rtol": _EVERY, "seed": _EVERY,
        "fmt": _EVERY, "output": _EVERY, "quiet": _EVERY, "trust_remote_code": _EVERY,
        "task": _EVERY,  # it picks the mode (with --runtime: a usage error of its own)
        "device": _P | _G, "providers": _P | _G, "compile_mode": _P, "inputs": _P, "tf32": _P, "localize": _P,
        "latency_budgets": _P, "error_budgets": _P, "min_cosine": _P | _R, "min_sqnr": _P | _R,
        "no_compile": _P | _G, "no_latency": _P | _G, "warmup_ms": _P | _G, "warmup_max_ms": _P | _G,
        "iterations": _P | _G, "duration_ms": _P | _G,
        "report_path": _P | _R, "batch": _P | _R, "dims": _P | _R, "int_range": _P | _R,
        "runtimes": _R, "golden": _R, "reference_cap": _R,
        "tokens": _G, "prompt_length": _G, "prompt": _P | _G, "text": _P | _G, "min_top1": _G, "max_ppl_ratio": _G,
        "max_logprob_diff": _G,
    },
)


def compare_mode(runtimes: str | None, task: str) -> str:
    """The mode that ``--runtime`` and ``--task`` pick."""
    if task == "text-generation":
        if runtimes is not None:
            raise UsageError("--runtime compares single-graph models; --task text-generation has its own proof")
        return TEXT_GENERATION
    return RUNTIMES if runtimes is not None else PYTORCH


def _shared(fn: F) -> F:
    """Options that ``compare`` and ``matrix`` share, defined once."""
    for option in reversed((
        click.option("--ep", "providers", default=None, metavar="EPS",
                     help="Execution providers, comma-separated (cpu,cuda,tensorrt,...; compare also takes "
                          "cuda-graph: CUDA with CUDA graphs, cuda-nhwc: CUDA preferring NHWC kernels, or "
                          "cuda-graph-nhwc). Default: compare, the CPU provider on a cpu "
                          "device and every available one on cuda (one that cannot load is skipped, with a note); "
                          "matrix, every available one. compare --task text-generation: one of cpu, cuda, "
                          "cuda-graph (the decode steps as CUDA graphs; the default on a cuda device)."),
        click.option("--batch", "batch", default=None, metavar="SIZES", help="Batch sizes, e.g. 1,8,32."),
        click.option("--dim", "dims", multiple=True, metavar="NAME=SIZE", help="Size of a symbolic input axis."),
        click.option("--int-range", "int_range", multiple=True, metavar="[NAME=]LOW:HIGH",
                     help="Range of random integer inputs (HIGH exclusive), for one input by name or for all; "
                          "repeatable. Default: each example input's own range, else 0:10."),
        click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs."),
        format_option("Print the report as text (matrix: Markdown) or as JSON (a versioned report)."),
        output_option,
        quiet_option,
    )):
        fn = option(fn)
    return fn


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


@click.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--reference", "reference", default=None, metavar="MODEL",
              help="The PyTorch model: a Hugging Face model folder (the task and shapes the file was exported for), "
                   "or a SPEC package.module:callable or path/to/file.py:callable (needed unless --runtime is given).")
@click.option("--runtime", "runtimes", default=None, metavar="RUNTIMES",
              help="Compare runtimes instead: ort,openvino,tract,reference (comma-separated), each with the "
                   "PyTorch SPEC when given, else with the first that runs; batch 1 and 3 by default.")
@click.option("--golden", "golden", default=None, type=click.Path(file_okay=False),
              help="With --runtime: write the inputs and the reference's outputs to this folder as ONNX "
                   "test_data_set_N/input_K.pb, output_K.pb.")
@click.option("--reference-cap", "reference_cap", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
              help="With --runtime: seconds the reference evaluator gets per batch before it is 'timed out'.")
@click.option("--weights", default=None, type=click.Path(dir_okay=False), help="State dict for the reference.")
@trust_option
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None,
              help="PyTorch device. Default: cuda when available, else cpu. text-generation: the pair runs there too "
                   "(cuda: ONNX Runtime's CUDA provider, and eager and compiled generate timed on the same GPU); "
                   "default cpu.")
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
@click.option("--min-cosine", "min_cosine", type=click.FloatRange(-1, 1), default=None,
              help="Judge float outputs by the mean cosine of their last-axis vectors instead of atol/rtol (an "
                   "embedding-like output; with --min-sqnr too, the others by SQNR). Default for a quantized file "
                   "(its manifest says int8): the budgets its manifest records.")
@click.option("--min-sqnr", "min_sqnr", type=float, default=None, metavar="DB",
              help="Judge float outputs by SQNR in dB instead of atol/rtol (the outputs --min-cosine does not judge). "
                   "Default for a quantized file: the budgets its manifest records.")
@task_option
@click.option("--tokens", default=32, show_default=True, type=click.IntRange(min=1),
              help="text-generation: greedy tokens generated from the seeded prompt.")
@click.option("--prompt-length", default=None, type=click.IntRange(min=1),
              help="text-generation: tokens of the seeded prompt. Default: 20, or fewer when the context needs it.")
@click.option("--prompt", default=None, metavar="TEXT",
              help="text-generation: generate from this text, tokenized by the model's own tokenizer (tokenizer() beside "
                   "the SPEC's callable, or the one beside the model); the report shows each side's text. A file "
                   "exported from a model folder: this text as its input, by the tokenizer recorded beside it.")
@click.option("--text", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
              help="text-generation: also score this text by teacher forcing (windows of the context): per-token "
                   "log-prob difference, top-1 agreement and perplexity, ONNX Runtime against PyTorch. A file exported "
                   "from a model folder: one input a line (or .jsonl's 'text'), by the tokenizer recorded beside it.")
@click.option("--min-top1", type=click.FloatRange(0, 1), default=None,
              help="text-generation, --text: budget: the share of positions whose top-1 token agrees. Default 0.99 "
                   "(a weight-only pair: 0.90).")
@click.option("--max-ppl-ratio", type=click.FloatRange(min=0), default=None,
              help="text-generation, --text: budget: ONNX Runtime's perplexity over PyTorch's. Default 1.01 "
                   "(a weight-only pair: 1.05).")
@click.option("--max-logprob-diff", type=click.FloatRange(min=0), default=None,
              help="text-generation, --text: budget: the largest |log-prob difference| of a token, in nats. Default "
                   "0.01 (a weight-only pair: none).")
@_shared
def compare(**params: Any) -> None:
    """Compare MODEL in ONNX Runtime with eager and compiled PyTorch: parity, then latency.

    Three modes, each with its own options (one of another mode is refused, exit 2): MODEL against
    PyTorch (--reference SPEC); the runtimes side by side (--runtime); a text-generation pair's greedy
    generation against the model's own (--task text-generation).

    Exit 0 when every output of every pair is within tolerance (and every budget is met), 1 on a parity
    failure (or NaN/Inf on either side) or an exceeded budget, 2 on bad options, 3 when something cannot run.
    With --task text-generation, MODEL is a pair (NAME.textgen.json or NAME.prefill.onnx) and the proof is
    greedy generation, token for token (docs/llm.md).
    """
    mode = compare_mode(params["runtimes"], params["task"])
    COMPARE_MODES.refuse_others(click.get_current_context(), mode)
    if mode == RUNTIMES:
        compare_runtimes_command(RuntimesCompareOptions.of(params))
    elif mode == TEXT_GENERATION:
        compare_text_generation(TextGenCompareOptions.of(params))
    else:
        compare_against_pytorch(TorchCompareOptions.of(params), task=params["task"])


@dataclass(frozen=True, kw_only=True)
class TorchCompareOptions(CompareCommon):
    """``portable compare MODEL --reference SPEC``: ONNX Runtime, one runner per provider, against eager and
    compiled PyTorch."""

    device: str | None
    providers: str | None
    compile_mode: str
    no_compile: bool
    inputs: str | None
    batch: str | None
    dims: tuple[str, ...]
    int_range: tuple[str, ...]
    tf32: bool
    localize: bool
    no_latency: bool
    warmup_ms: float
    warmup_max_ms: float
    iterations: int
    duration_ms: float
    latency_budgets: tuple[str, ...]
    error_budgets: tuple[str, ...]
    min_cosine: float | None
    min_sqnr: float | None
    report_path: str | None
    prompt: str | None = None
    text: str | None = None

    def _text_feeds(self) -> dict[str, Any] | None:
        """``--prompt``/``--text`` as the file's inputs, by the tokenizer its export recorded (``portable.hf``)."""
        if self.prompt is None and self.text is None:
            return None
        if self.inputs is not None or (self.prompt is not None and self.text is not None):
            raise UsageError("--prompt, --text and --inputs exclude each other: each gives the inputs")
        from portable.hf.assets import inputs_for
        from portable.quantization.data import read_texts

        return inputs_for(self.model, text=[self.prompt] if self.prompt is not None else read_texts(Path(self.text or "")))

    def compare_options(self, reference: str) -> CompareOptions:
        """Every option parsed and checked, before torch is imported."""
        from portable.runners.budgets import parse_error_budgets, parse_latency_budgets
        from portable.runners.options import CompareOptions

        timing = timing_config(self.no_latency, self.warmup_ms, self.warmup_max_ms, self.iterations, self.duration_ms)
        return CompareOptions(device=self.device, compile_mode=None if self.no_compile else self.compile_mode,
                              providers=self.providers, inputs=self._text_feeds() or self.inputs, tf32=self.tf32,
                              tolerances=self.tolerances(tf32=self.tf32), timing=timing, localize=self.localize,
                              reference_name=reference, latency_budgets=parse_latency_budgets(self.latency_budgets),
                              error_budgets=parse_error_budgets(self.error_budgets), min_cosine=self.min_cosine,
                              min_sqnr=self.min_sqnr, **feed_options(self.batch, self.dims, self.int_range, self.seed))


def compare_against_pytorch(o: TorchCompareOptions, task: str = "model") -> NoReturn:
    """Parity, then latency; the report as text or JSON (and Markdown with ``--report``); exit by the verdict.
    ``task``: a model folder's (``--task``; default: the one the file was exported for)."""
    from portable.runners.api import compare as run_compare

    check_outputs(("--report", o.report_path), ("-o/--output", o.output))
    reference = o.required_reference()
    options = o.compare_options(reference)
    loaded = load_reference(reference, o.weights, model=o.model, task=task, trust_remote_code=o.trust_remote_code)
    with progress(o.quiet) as say:
        result = run_compare(o.model, loaded.module, options, example_inputs=loaded.example_inputs, progress=say)
    if o.report_path:
        _write_markdown(result, o.report_path)
    if o.fmt == "json":
        emit(json.dumps(result.to_dict(), indent=2), o.output)
    else:
        _print_text(result, o.output)
    _show_budgets(result.budgets)
    raise click.exceptions.Exit(int(result.exit_code))


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

    check_outputs(("-o/--output", output), ("--markdown", markdown_path))
    with progress(quiet) as say:
        result = run_matrix(model, providers=providers, batches=parse_batches(batch), dims=parse_dims(dims),
                            int_ranges=parse_int_ranges(int_range), seed=seed, target=target, progress=say,
                            runtimes=_runtimes(runtimes))
    if markdown_path:
        atomic_write_text(markdown_path, render_matrix_markdown(result))
    emit(json.dumps(result.to_dict(), indent=2) if fmt == "json" else render_matrix_markdown(result), output)
    if not result.passed:
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))


def _runtimes(text: str | None) -> list[str]:
    from portable.runners.runtimes import parse_runtimes

    return parse_runtimes(text) if text else []


@click.group()
def report() -> None:
    """Work with saved reports (JSON from compare --format json and matrix --format json)."""


@report.command("merge")
@click.argument("reports", nargs=-1, required=True, type=click.Path())  # a fleet's results folder too
@output_option
def merge(reports: tuple[str, ...], output: str | None) -> None:
    """Merge JSON reports made on different machines into one table (Markdown; JSON when
    the output file ends in .json): matrix, compare and fleet reports, and fleet results folders."""
    from portable.runners.merge import merge_reports, render_merged_markdown

    merged = merge_reports([Path(p) for p in reports])
    if output and output.endswith(".json"):
        emit(json.dumps(merged.to_dict(), indent=2), output)
    else:
        emit(render_merged_markdown(merged), output)

