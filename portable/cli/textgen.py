"""``--task text-generation`` of ``portable export`` and ``portable compare``: each command makes one call here.

torch, onnxruntime and transformers are imported inside the functions only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import click

from portable.cli.options import (
    EXPORT_SCHEMA_VERSION,
    CompareCommon,
    ModeTable,
    check_outputs,
    emit,
    load_reference,
    progress,
    timing_config,
)
from portable.errors import UsageError
from portable.hf.tasks import TASK_NAMES

__all__ = ["EXPORT_MODES", "TASKS", "TextGenCompareOptions", "compare_text_generation", "export_mode",
           "export_text_generation", "task_option"]

# "model": a SPEC's forward, or the task a model folder names; the others are optimum's task names for a folder
# (portable.hf.tasks), text-generation for a SPEC too
TASKS = ("model", *TASK_NAMES)
task_option = click.option("--task", type=click.Choice(TASKS), default="model", show_default=True,
                           help="model: one graph of the SPEC's forward, or the task a model folder's config.json (or "
                                "modules.json) names; text-generation: a causal LM as a prefill and a decode graph over a "
                                "static KV cache (docs/llm.md); the others: a model folder's task, by optimum's names "
                                "(docs/exporter.md).")


def _given(*names: str) -> list[str]:
    """The options of the current command that the user set (not left at their defaults)."""
    ctx = click.get_current_context()
    return [n for n in names if ctx.get_parameter_source(n) not in (None, click.core.ParameterSource.DEFAULT)]


# export's modes (``--task``): each option that belongs to one is refused in the other, not ignored
EXPORT_MODES = ModeTable(
    labels={"model": "export", "text-generation": "export --task text-generation"},
    homes={"context": frozenset({"text-generation"}), "prefill": frozenset({"text-generation"}),
           "tokens": frozenset({"text-generation"}), "prompt": frozenset({"text-generation"}),
           "inputs": frozenset({"model"}),  # the graphs' inputs are the step's
           "shapes": frozenset({"model"})},  # text-generation's lengths are --context and --prefill
)


def export_mode(task: str) -> str:
    """export's mode for a task: text-generation's pair, else one graph."""
    return "text-generation" if task == "text-generation" else "model"


def export_text_generation(spec: str, output: str, *, inputs: tuple[str, ...], batch: str, precision: str,
                           weights: str | None, force: bool, verify: bool, tolerances: Any, fmt: str, policy: Any,
                           quiet: bool, context: int, prefill: int, tokens: int, debug: bool,
                           prompt: str | None = None, trust_remote_code: bool = False) -> None:
    """``portable export SPEC --task text-generation -o NAME``: the pair, its manifest, the proof; exit 0 or 1."""
    from portable.exporters.inputs import parse_batch
    from portable.exporters.job import ExportFailed
    from portable.exporters.textgen import export_text_generation_spec
    from portable.progress import Phases

    size = parse_batch(batch) if _given("batch") else 1  # a fixed batch of 1 unless asked
    try:
        result = export_text_generation_spec(spec, output, weights=weights, phases=Phases(quiet or fmt != "text"),
                                             context=context, prefill=prefill, batch=size, precision=precision,
                                             policy=policy, verify=verify, tokens=tokens, force=force,
                                             tolerances=tolerances, prompt=prompt, trust_remote_code=trust_remote_code)
    except ExportFailed as exc:  # a graph's findings, the refusal (PORT107), the pair rules, the proof
        _failed(exc, fmt, getattr(exc, "proof", None), debug)
    for warning in result.proof.warnings if result.proof else ():
        click.echo(f"portable: warning: generation proof: {warning}", err=True)
    if fmt == "json":
        click.echo(json.dumps({**_head(0, None), **result.to_dict()}, indent=2))
    elif not quiet:
        proof = result.proof.message() if result.proof else "not run (--no-verify)"
        beside = (result.manifest.get("preprocessing") or {}).get("folder")
        click.echo(f"wrote {result.prefill.path} and {result.decode.path} (weights {result.weights_fingerprint[:19]}…), "
                   f"manifest {result.manifest_path}{f', its tokenizer beside them: {beside}/' if beside else ''}; "
                   f"proof: {proof}")


def _head(exit_code: int, message: str | None) -> dict[str, Any]:
    """What every export JSON opens with, written or refused (``portable.cli.export.export_json``'s keys)."""
    from portable._version import __version__

    return {"schema_version": EXPORT_SCHEMA_VERSION, "tool": {"name": "portable", "version": __version__},
            "ok": exit_code == 0, "exit_code": exit_code, "message": message}


def _failed(exc: Any, fmt: str, proof: Any, debug: bool) -> None:
    from portable.formatters import get_formatter

    if fmt == "json":
        click.echo(json.dumps({**_head(int(exc.exit_code), exc.message), "validation": exc.report.to_dict(),
                               "proof": proof.to_dict() if proof else None}, indent=2))
    else:
        click.echo(get_formatter(fmt).render([exc.report]))
    if exc.detail and debug:
        click.echo(exc.detail, err=True)
    click.echo(f"portable: export failed: {exc.message}; nothing written", err=True)
    raise click.exceptions.Exit(int(exc.exit_code))


@dataclass(frozen=True, kw_only=True)
class TextGenCompareOptions(CompareCommon):
    """``portable compare PAIR --reference SPEC --task text-generation``: ``tokens`` greedy tokens from a seeded
    prompt of ``prompt_length`` tokens, and the generation latency unless ``no_latency``."""

    tokens: int
    prompt_length: int | None
    prompt: str | None
    text: str | None
    min_top1: float | None
    max_ppl_ratio: float | None
    max_logprob_diff: float | None
    device: str | None
    providers: str | None
    no_compile: bool
    no_latency: bool
    warmup_ms: float
    warmup_max_ms: float
    iterations: int
    duration_ms: float


    def cuda_graph(self) -> bool:
        """``--ep``: cpu on a cpu device; on cuda, cuda-graph (the default) or cuda."""
        device, ep = self.device or "cpu", self.providers
        wanted = {"cpu": ("cpu",), "cuda": ("cuda-graph", "cuda")}[device]
        if ep is not None and ep not in wanted:
            raise UsageError(f"--ep {ep}: --task text-generation on a {device} device runs on {' or '.join(wanted)}")
        return device == "cuda" and (ep or "cuda-graph") == "cuda-graph"

    def budgets(self) -> tuple[float | None, float | None, float | None]:
        return self.min_top1, self.max_ppl_ratio, self.max_logprob_diff


def _check_weight_only(o: TextGenCompareOptions) -> None:
    """A weight-only pair without --text: refused before the reference is loaded."""
    from portable.runners.generation import PairFiles

    if o.text is None and PairFiles.find(o.model).quantization:
        raise UsageError("a weight-only pair is judged by budgets on real text: give --text FILE (docs/llm.md)")


def _at_pair_precision(module: Any, pair: str) -> Any:
    """The reference at the pair's precision (its manifest's), as the export's proof held it: an fp16 pair
    against the fp32 model differs by fp16's own rounding at every step, which is not a fault of the pair."""
    from portable.exporters.job import convert_precision
    from portable.runners.generation import PairFiles

    converted, _ = convert_precision(module, (), PairFiles.find(pair).precision)
    return converted


def compare_text_generation(o: TextGenCompareOptions) -> None:
    """Greedy tokens and logits, ORT CPU against the model's own generate (eager and compiled), and the
    generation latency; exit 0 or 1."""
    from portable.runners.generation_report import render_text
    from portable.runners.textgen import compare_text_generation as run

    check_outputs(("-o/--output", o.output))
    reference = o.required_reference()
    tolerances = o.tolerances()
    timing = timing_config(o.no_latency, o.warmup_ms, o.warmup_max_ms, o.iterations, o.duration_ms)
    if o.prompt is not None and o.prompt_length is not None:
        raise UsageError("--prompt and --prompt-length exclude each other: the text's tokens are the prompt")
    _check_weight_only(o)
    cuda_graph = o.cuda_graph()  # --ep checked before the reference is loaded
    loaded = load_reference(reference, o.weights, trust_remote_code=o.trust_remote_code)
    from portable.runners.textgen import text_for

    text = text_for(loaded, loaded.module, o.prompt, o.text, o.budgets())
    module = _at_pair_precision(loaded.module, o.model)
    with progress(o.quiet) as say:
        report = run(o.model, module, tokens=o.tokens, prompt_length=o.prompt_length, seed=o.seed,
                     compile=not o.no_compile, tolerances=tolerances, timing=timing, progress=say, text=text,
                     device=o.device or "cpu", cuda_graph=cuda_graph)
    emit(json.dumps(report.to_dict(), indent=2) + "\n" if o.fmt == "json" else render_text(report), o.output)
    for warning in report.warnings:
        click.echo(f"portable: warning: {warning}", err=True)
    if not report.passed:
        raise click.exceptions.Exit(int(report.exit_code))
