"""``portable export`` and ``portable precheck``. torch is imported inside the commands only."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import click

from portable.cli.options import (
    EXPORT_SCHEMA_VERSION,
    config_options,
    findings_format_option,
    format_option,
    policy_from_options,
    quiet_option,
    tolerance_options,
    trust_option,
)
from portable.cli.textgen import task_option
from portable.errors import UsageError
from portable.formatters import get_formatter
from portable.io import check_writable
from portable.quiet import debug_requested

__all__ = ["EXPORT_SCHEMA_VERSION", "export", "export_json", "precheck"]


input_option = click.option("--input", "-i", "inputs", multiple=True, metavar="NAME=1x3x224x224[:dtype]",
                            help="A model input by forward's parameter name (repeatable, any order; dtype default: the "
                                 "example input's, else float32). Default: the SPEC's example inputs.")
batch_option = click.option("--batch", default="dynamic", show_default=True, metavar="dynamic|N",
                            help="dynamic: dim 0 of every input and output is the symbol 'batch'; N: fully static.")
shape_option = click.option("--shape", "shapes", multiple=True, metavar="NAME=VALUE",
                            help="A model folder's static dim, by optimum's name (repeatable): sequence_length (text), "
                                 "height and width (images). Default: the folder's own configs (the tokenizer's "
                                 "model_max_length capped at 128, the image processor's size).")
# export's result is more than findings (the file written, verify's parity): text or JSON only, so that
# a SARIF or JUnit document never reads as clean when verify refused the export.
export_format_option = format_option("How to print the result (JSON: one shape, written or refused).")


def _render(report: Any, fmt: str) -> str:
    return get_formatter(fmt).render([report])


def export_json(*, exit_code: int, path: str, report: Any, parity: Any, timings: dict[str, float],
                message: str | None = None, result: Any = None) -> str:
    """The export's JSON, the same keys whether it wrote the file (``result``) or refused (``message``):
    ``ok`` and ``exit_code`` are the process's, ``parity`` is verify's record whenever it ran."""
    from portable._version import __version__

    data = {"schema_version": EXPORT_SCHEMA_VERSION, "tool": {"name": "portable", "version": __version__},
            "ok": exit_code == 0, "exit_code": exit_code, "message": message, "written": result is not None,
            "path": str(result.path if result is not None else path),
            "manifest": str(result.manifest_path) if result is not None else None,
            "fingerprint": result.fingerprint if result is not None else None,
            "validation": report.to_dict(), "parity": parity.to_dict() if parity is not None else None,
            "timings": dict(timings)}
    return json.dumps(data, indent=2)


@contextlib.contextmanager
def _json_on_failure(fmt: str, output: str) -> Iterator[None]:
    """With ``--format json``, a run stopped by a usage error (2), an unreadable input or an internal error (3)
    still prints export's one JSON shape, the error in it; the CLI's handler then words it and exits."""
    try:
        yield
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
        raise  # click's own: it words them and exits (2 for its usage errors), as the CLI's handler lets it
    except Exception as exc:
        if fmt == "json":
            from portable.errors import failure_record

            click.echo(failure_json(output, failure_record(exc)))
        raise


def failure_json(path: str, failure: dict[str, Any]) -> str:
    """:func:`export_json`'s keys for a run that made no report: nothing validated, verified or written."""
    from portable._version import __version__

    error = failure["error"]
    message = error["message"] if isinstance(error, dict) else str(error)
    data = {"schema_version": EXPORT_SCHEMA_VERSION, "tool": {"name": "portable", "version": __version__},
            "ok": False, "exit_code": failure["exit_code"], "message": message, "written": False, "path": path,
            "manifest": None, "fingerprint": None, "validation": None, "parity": None, "timings": {},
            "error": error}
    return json.dumps(data, indent=2)


def _refused(exc: Any, fmt: str, output: str, timings: dict[str, float]) -> None:
    """A refusal on stdout (the JSON report, the findings, or verify's per-output lines: never the clean
    validation report's "passed" when verify refused), one line on stderr, the exit code."""
    if fmt == "json":
        click.echo(export_json(exit_code=int(exc.exit_code), path=output, report=exc.report, parity=exc.parity,
                               timings=timings, message=exc.message))
    elif exc.parity is not None and not exc.parity.ok:
        click.echo("\n".join(parity_lines(exc.parity)))
    else:
        click.echo(_render(exc.report, fmt))
    if exc.detail and debug_requested():
        click.echo(exc.detail, err=True)
    click.echo(f"portable: export failed: {exc.message}; nothing written", err=True)
    raise click.exceptions.Exit(int(exc.exit_code)) from None


def parity_lines(parity: Any) -> list[str]:
    """Verify's verdict, batch by batch and output by output, in the comparator's words."""
    lines = [f"verify {'passed' if parity.ok else 'FAILED'}: ONNX Runtime against PyTorch at batch "
             f"{', '.join(str(b) for b in parity.batches)}; {parity.float64 or 'by the tolerances'}"]
    rows = [f"  batch {d['batch']}: {row['verdict']}" for d in parity.details for row in d["outputs"]]
    rows += [f"  {d['message']}" for d in parity.details if not d["outputs"]]
    shown = rows if len(rows) <= _ROWS else rows[:_ROWS] + [f"  ... {len(rows) - _ROWS} more (--format json)"]
    drawn = [f"  input {name!r}: {how}" for name, how in parity.inputs.items()]  # seeded how, and why (issue 48)
    return lines + shown + drawn


_ROWS = 8  # verify's lines in text; --format json has every output


def _source_lines(manifest: dict[str, Any]) -> list[str]:
    """A folder's export: the task, each dim and where it came from, and the files written beside the model."""
    source = manifest.get("source")
    if not source:
        return []
    dims = ", ".join(f"{name} {d['value']} ({d['from']})" for name, d in source["dims"].items())
    lines = [f"  task {source['task']} ({source['task_from']}); inputs {', '.join(source['inputs'])}; {dims}"]
    preprocessing = manifest.get("preprocessing")
    if preprocessing:
        kinds = [k.replace("_", " ") for k in ("tokenizer", "image_processor") if k in preprocessing]
        lines.append(f"  {' and '.join(kinds)} written beside it: {preprocessing['folder']}/ "
                     f"({len(preprocessing['files'])} files)")
    return lines


@click.command()
@click.argument("spec", metavar="MODEL")
@input_option
@shape_option
@trust_option
@click.option("--output", "-o", "output", required=True, type=click.Path(dir_okay=False), help="The ONNX file to write.")
@batch_option
@click.option("--precision", type=click.Choice(["fp32", "fp16", "bf16"]), default="fp32", show_default=True)
@click.option("--weights", type=click.Path(dir_okay=False), default=None, help="State dict: .safetensors or .pt.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Compare ONNX Runtime with eager PyTorch after export.")
@tolerance_options
@export_format_option
@config_options
@quiet_option
@task_option
@click.option("--context", default=256, show_default=True, type=click.IntRange(min=2),
              help="text-generation: the KV cache's slots C (prompt and generated tokens).")
@click.option("--prefill", default=32, show_default=True, type=click.IntRange(min=1),
              help="text-generation: tokens P of one prefill call (the prompt goes through in blocks of P).")
@click.option("--tokens", default=32, show_default=True, type=click.IntRange(min=1),
              help="text-generation: greedy tokens of verify's proof (ONNX Runtime against the model's generate).")
@click.option("--prompt", default=None, metavar="TEXT",
              help="text-generation: the proof's prompt as text, tokenized by the model's own tokenizer "
                   "(tokenizer() beside the SPEC's callable, or the one beside the model). Default: seeded ids.")
def export(spec: str, inputs: tuple[str, ...], shapes: tuple[str, ...], trust_remote_code: bool, output: str, batch: str,
           precision: str, weights: str | None, force: bool, verify: bool, atol: tuple[str, ...], rtol: tuple[str, ...],
           fmt: str, config: str | None, select: tuple[str, ...], ignore: tuple[str, ...], strict: bool, quiet: bool,
           task: str, context: int, prefill: int, tokens: int, prompt: str | None) -> None:
    """Export MODEL to one portable ONNX file: a Hugging Face model folder (config.json and weights; or a hub id
    in the local cache: portable never downloads), or a SPEC (package.module:callable or file.py:callable).

    A folder's task comes from its config.json (modules.json for sentence-transformers: the whole pipeline,
    output sentence_embedding) unless --task names one; its inputs are the task's, sized by --shape, and its
    tokenizer or image processor is written beside the file (-o NAME.onnx: NAME.hf/). Verify's tolerances are
    compare's defaults for the output's dtype; --atol/--rtol replace them (as in ``portable compare``). With
    --task text-generation, MODEL gives a causal LM and -o NAME writes NAME.prefill.onnx, NAME.decode.onnx and
    NAME.textgen.json (batch 1 unless --batch), and a folder's tokenizer in NAME.hf/."""
    with _json_on_failure(fmt, output):
        from portable.exporters.inputs import parse_input
        from portable.runners.tolerances import parse_overrides

        policy = policy_from_options(config, select, ignore, strict)
        from portable.cli.textgen import EXPORT_MODES, export_mode

        check_writable(output)  # exit 2 before the SPEC is loaded, not after a whole export
        resolved = _resolved_task(spec, task, shapes, trust_remote_code)
        EXPORT_MODES.refuse_others(click.get_current_context(), export_mode(resolved))
        specs = [parse_input(i) for i in inputs]
        tolerances = parse_overrides(atol, rtol)
        if resolved == "text-generation":
            from portable.cli.textgen import export_text_generation

            return export_text_generation(spec, output, inputs=inputs, batch=batch, precision=precision, weights=weights,
                                          force=force, verify=verify, tolerances=tolerances, fmt=fmt, policy=policy,
                                          quiet=quiet, context=context, prefill=prefill, tokens=tokens, debug=debug_requested(),
                                          prompt=prompt, trust_remote_code=trust_remote_code)
        _export_graph(spec, output, specs, batch=batch, precision=precision, weights=weights, policy=policy,
                      verify=verify, force=force, tolerances=tolerances, fmt=fmt, quiet=quiet, task=task,
                      shapes=shapes, trust_remote_code=trust_remote_code)


def _resolved_task(spec: str, task: str, shapes: tuple[str, ...], trust_remote_code: bool) -> str:
    """A model folder's task (given, or the one it names: checked from its JSON, before any weights load); a
    SPEC's --task as given, where a folder's task name or option is a usage error."""
    from portable.hf.folder import is_folder_reference

    if is_folder_reference(spec):
        from portable.hf.load import plan_folder

        return plan_folder(spec, task, shapes, trust_remote_code).task.name
    if task not in ("model", "text-generation") or shapes or trust_remote_code:
        given = f"--task {task}" if task not in ("model", "text-generation") else ("--shape" if shapes else "--trust-remote-code")
        raise UsageError(f"{given}: for a model folder (config.json and weights); {spec!r} is a SPEC, whose inputs are "
                         "-i NAME=1x3x224x224")
    return task


def _export_graph(spec: str, output: str, specs: list[Any], *, batch: str, fmt: str, quiet: bool, **options: Any) -> None:
    """One graph: export, verify, write; the result as text or JSON (a refusal: exit 1, nothing written)."""
    from portable.exporters.api import ExportFailed
    from portable.exporters.inputs import parse_batch
    from portable.exporters.spec_export import export_spec
    from portable.progress import Phases

    phases = Phases(quiet or fmt != "text")
    try:
        result = export_spec(spec, output, specs, batch=parse_batch(batch), phases=phases, **options)
    except ExportFailed as exc:
        _refused(exc, fmt, output, phases.timings)
    for warning in result.parity.warnings if result.parity else ():
        click.echo(f"portable: warning: parity: {warning}", err=True)
    if fmt == "json":
        click.echo(export_json(exit_code=0, path=output, report=result.report, parity=result.parity,
                               timings=result.timings, result=result))
    elif not quiet:
        counts = result.report.counts
        click.echo(f"wrote {result.path} ({result.fingerprint[:19]}…), {counts['error']} error(s), "
                   f"{counts['warning']} warning(s), {counts['info']} info; manifest {result.manifest_path}")
        for line in _source_lines(result.manifest):
            click.echo(line)
        if result.parity is not None and result.parity.skipped is None:
            click.echo("\n".join(parity_lines(result.parity)))


@click.command()
@click.argument("spec", metavar="MODEL")
@input_option
@shape_option
@trust_option
@task_option
@batch_option
@click.option("--weights", type=click.Path(dir_okay=False), default=None, help="State dict: .safetensors or .pt.")
@click.option("--graph-breaks/--no-graph-breaks", default=True, show_default=True,
              help="Also run torch._dynamo.explain for graph breaks (PORT102).")
@click.option("--translate/--no-translate", default=True, show_default=True,
              help="Also run torch.onnx's decomposition and translation of the captured program (PORT104).")
@findings_format_option()
@config_options
def precheck(spec: str, inputs: tuple[str, ...], shapes: tuple[str, ...], trust_remote_code: bool, task: str, batch: str,
             weights: str | None, graph_breaks: bool, translate: bool, fmt: str, config: str | None,
             select: tuple[str, ...], ignore: tuple[str, ...], strict: bool) -> None:
    """Find data-dependent control flow and graph breaks in MODEL's Python code, before export (MODEL: a SPEC,
    or a Hugging Face model folder as ``portable export`` takes it)."""
    from portable.exporters.inputs import parse_batch
    from portable.exporters.precheck import precheck as run_precheck
    from portable.exporters.spec_export import load_for_export

    policy = policy_from_options(config, select, ignore, strict)
    task = _resolved_task(spec, task, shapes, trust_remote_code)
    if task == "text-generation":
        raise UsageError("precheck --task text-generation: the pair's step module is checked by `portable export "
                         "--task text-generation` itself")
    module, args, names, root = load_for_export(spec, inputs, weights, task=task, shapes=shapes,
                                                trust_remote_code=trust_remote_code)
    report = run_precheck(module, args, parse_batch(batch), root=root, names=names, policy=policy,
                          graph_breaks=graph_breaks, path=spec, translate=translate)
    click.echo(_render(report, fmt))
    raise click.exceptions.Exit(int(report.exit_code))
