"""``portable fix``: make an ONNX model portable where that is safe, prove it, say what remains.

onnx-ir, onnxruntime and the exporter's passes are imported inside the command only.
"""

from __future__ import annotations

import json
from typing import Any

import click

from portable._version import __version__
from portable.cli.options import config_option, format_option, ignore_option, quiet_option, select_option
from portable.io import check_writable
from portable.policy import load_policy, merge_cli

__all__ = ["FIX_SCHEMA_VERSION", "fix", "render_error", "render_json", "render_text"]

# portable/schemas/fix.schema.json: the major part changes on incompatible changes.
FIX_SCHEMA_VERSION = "1.0"


@click.command()
@click.argument("model", type=click.Path(dir_okay=True))
@click.option("--output", "-o", "output", required=True, type=click.Path(dir_okay=False),
              help="The fixed ONNX file to write (its manifest goes beside it as OUTPUT.json).")
@click.option("--batch", default="dynamic", show_default=True, metavar="dynamic|N",
              help="dynamic: the inputs' dim-0 symbol becomes 'batch'; N: it becomes the integer N.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=SIZE",
              help="Fix a symbolic dim of the inputs/outputs to SIZE (repeatable); an unnamed one as INPUT:AXIS=SIZE.")
@click.option("--opset", type=click.IntRange(min=1), default=None, help="Target opset. Default: the policy's (18).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Prove the fixed model equivalent with ONNX Runtime (original vs fixed).")
@click.option("--inputs", "inputs", default=None, type=click.Path(dir_okay=False),
              help="Prove on these inputs (.npz: input names or arr_0... as keys) instead of seeded random ones.")
@click.option("--strict", is_flag=True, help="Warnings fail too, and nothing is written while any finding remains.")
@click.option("--canonical-names", is_flag=True, help="Rename nodes and values from their op types, in graph order.")
@format_option("Print the fix report as text, or as JSON (schema: portable/schemas/fix.schema.json).")
@config_option
@click.option("--target", "targets", multiple=True, metavar="NAMES",
              help="Target profiles to check the result against (PORT201-204); a target whose sources want int64 as "
                   "int32 (nnapi, webnn) also turns on the int32-indices remedy, one whose table lacks Pad's reflect or "
                   "edge mode (coreml, nnapi, migraphx, litert) the pad-as-slices remedy, one with a rank limit (coreml) rank-limit.")
@click.option("--approximate-gelu", is_flag=True,
              help="Write each exact GELU (Erf, missing from the qnn and nnapi tables) in its tanh form. Not exact "
                   "(up to 4.8e-4 apart per element): the proof judges the outputs by float64 references and says "
                   "how far they moved.")
@select_option
@ignore_option
@quiet_option
def fix(model: str, output: str, batch: str, dims: tuple[str, ...], opset: int | None, force: bool, verify: bool,
        inputs: str | None, strict: bool, canonical_names: bool, fmt: str, config: str | None, select: tuple[str, ...],
        ignore: tuple[str, ...], quiet: bool, targets: tuple[str, ...] = (), approximate_gelu: bool = False) -> None:
    """Make MODEL portable where that is safe, prove it equivalent, and list what no remedy fixes.

    Exit codes: 0 portable and proven; 1 findings remain (the file is written unless
    --strict) or the proof failed (nothing written); 2 usage; 3 unreadable model, or the
    original cannot be run for the proof (nothing written unless --no-verify).
    """
    from portable.repair import FixFailed
    from portable.repair import fix as run_fix
    from portable.runners.inputs import parse_dims

    try:
        policy = merge_cli(load_policy(config), select=select, ignore=ignore,
                           targets=[t for item in targets for t in item.split(",") if t.strip()])
        check_writable(output)  # before the model is read or repaired
        result = run_fix(model, output, batch=batch, dims=parse_dims(dims), opset=opset, policy=policy, force=force,
                         verify=verify, strict=strict, canonical_names=canonical_names, inputs=inputs,
                         quiet=quiet or fmt != "text", approximate_gelu=approximate_gelu)
    except FixFailed as exc:
        _batch_warning(batch, exc.result)
        click.echo(render_json(exc.result) if fmt == "json" else render_text(exc.result))
        click.echo(f"portable: fix failed: {exc}", err=True)
        raise click.exceptions.Exit(int(exc.exit_code)) from None
    except Exception as exc:  # usage (2), unreadable (3), internal (3): the CLI's handler words and exits
        if fmt == "json":
            click.echo(render_error(model, exc))
        raise
    _batch_warning(batch, result)
    if fmt == "json" or not quiet:
        click.echo(render_json(result) if fmt == "json" else render_text(result))
    raise click.exceptions.Exit(int(result.exit_code))


def _batch_warning(batch: str, result: Any) -> None:
    """``--batch dynamic`` asked for explicitly on a model whose batch stays as it was: say why, on stderr
    (the default asks nothing, so it says nothing)."""
    from click.core import ParameterSource

    explicit = click.get_current_context().get_parameter_source("batch") != ParameterSource.DEFAULT
    report = next((r for r in result.remedies if r.name == "batch"), None)
    if explicit and batch == "dynamic" and report is not None and report.status != "applied":
        click.echo("portable: warning: --batch dynamic changed nothing: dim 0 of the inputs is static (or not one "
                   "symbol shared by every input), and a static batch is kept: shapes computed from it could "
                   "break. Re-export with a dynamic batch to get one", err=True)


def render_error(model: str, exc: BaseException) -> str:
    """The JSON report of a run that stopped before any result (exit 2 or 3): what and why, with the exit
    code the process then has (a PortableError's own; 3 for an internal error)."""
    from portable.errors import failure_record

    data = {"schema_version": FIX_SCHEMA_VERSION, "tool": {"name": "portable", "version": __version__},
            "source": model, "ok": False, "written": False, **failure_record(exc)}
    return json.dumps(data, indent=2, sort_keys=True)


def render_json(result: Any) -> str:
    """The fix report as JSON (schema: portable/schemas/fix.schema.json)."""
    data = {"schema_version": FIX_SCHEMA_VERSION, "tool": {"name": "portable", "version": __version__},
            **result.to_dict()}
    return json.dumps(data, indent=2, sort_keys=True)


def render_text(result: Any) -> str:
    """The remedies table, the proof, what remains, and what was written."""
    lines = [f"portable fix: {result.source} -> {result.path}", "",
             f"  {'remedy':<24} {'status':<10} {'nodes':<12} changes"]
    for r in result.remedies:
        if r.status in ("skipped", "unchanged"):
            continue
        delta = _delta(r.nodes_before, r.nodes_after)
        nodes = f"{sum(r.nodes_before.values())} -> {sum(r.nodes_after.values())}"
        lines.append(f"  {r.name:<24} {r.status:<10} {nodes:<12} " + "; ".join(x for x in (r.detail, delta) if x))
    quiet = [r.name for r in result.remedies if r.status == "unchanged"]
    if quiet:
        lines.append(f"  unchanged: {', '.join(quiet)}")
    if result.ops is not None:
        lines.append(f"  ops: {result.ops.line()}")
    lines += ["", _proof_line(result.proof) if result.proof is not None or result.report is None
              else "proof: not run (--no-verify)"]
    lines += _remaining(result)
    lines.append(_written(result))
    return "\n".join(lines)


def _delta(before: dict[str, int], after: dict[str, int]) -> str:
    ops = sorted(set(before) | set(after))
    changes = [f"{op} {before.get(op, 0)}->{after.get(op, 0)}" for op in ops if before.get(op, 0) != after.get(op, 0)]
    return ", ".join(changes)


def _proof_line(proof: Any) -> str:
    if proof is None:
        return "proof: not run"
    batches = ", ".join(str(b) for b in proof.batches)
    if proof.ok and proof.original_runtime != "onnxruntime":
        fixed = "ONNX Runtime" if proof.fixed_runtime == "onnxruntime" else "onnx.reference too"
        return (f"proof: holds at batch {batches}: {proof.message} (the original run by onnx.reference, "
                f"the fixed model by {fixed})\n  why: {proof.original_runtime.partition(' (')[2][:-1]}")
    if proof.ok:
        return f"proof: holds at batch {batches}: {proof.message} (ONNX Runtime, original vs fixed)" + _skipped(proof)
    return f"proof: {'cannot run' if proof.unavailable else 'FAILED'} at batch {batches}: {proof.message}"


def _skipped(proof: Any) -> str:
    if not proof.skipped:
        return ""
    sizes = ", ".join(str(b) for b in proof.skipped)
    return (f"\n  dim 0 is not a free batch: the original itself does not run at batch {sizes} (exit 1; "
            "--batch N fixes the size it runs at)")


def _remaining(result: Any) -> list[str]:
    findings = result.remaining
    if result.report is None or not findings:
        return [] if result.report is None else ["validate: the fixed model honours the contract"]
    opset = next((r for r in result.remedies if r.name == "opset" and r.status == "refused"), None)
    lines = [f"not fixable automatically ({len(findings)}):"]
    for f in findings:
        lines.append(f"  {f.rule_id} {f.severity.value}: {f.location.describe()}: {f.message}")
        lines.append(f"      fix: {_hint(f, opset.detail if opset else None)}")
    return lines


def _hint(finding: Any, opset_refusal: str | None) -> str:
    """The rule's hint; for a symbolic input dim, the --dim that fixes it; for the opset, why it stayed."""
    if finding.rule_id == "PORT001" and opset_refusal:
        return f"the opset remedy was refused ({opset_refusal}); convert the named op by hand or re-export"
    if finding.rule_id == "PORT008" and "dynamic dim" in finding.message:
        return f"rerun fix with --dim NAME=SIZE for each symbol other than the batch in the shape above; or {finding.hint}"
    return str(finding.hint)


def _written(result: Any) -> str:
    if result.written:
        return f"wrote {result.path} ({(result.fingerprint or '')[:19]}…), manifest {result.manifest_path}"
    if result.proof is not None and not result.proof.ok:
        return "nothing written (no proof held: see the proof line)"
    if result.report is not None and result.remaining:
        return "nothing written (--strict: findings remain)"
    return "nothing written"
