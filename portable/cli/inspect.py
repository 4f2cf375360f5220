"""``portable inspect``: a model file at a glance, and whether it is portable."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from portable._version import __version__
from portable.cli.options import config_options, format_option, policy_from_options
from portable.errors import ExitCode, UsageError
from portable.policy import merge_cli
from portable.report import REPORT_SCHEMA_VERSION

if TYPE_CHECKING:
    from portable.validators.summary import ModelSummary

__all__ = ["inspect"]


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def _shape(shape: tuple[int | str, ...] | None) -> str:
    return "(no shape)" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _text(summary: ModelSummary) -> str:
    opsets = ", ".join(f"{domain} {version}" for domain, version in summary.opsets)
    lines = [f"{summary.path}: {_human(summary.size_bytes)}, IR {summary.ir_version}, opset {opsets}"
             + (f", producer {summary.producer}" if summary.producer else "")]
    width = max((len(v.name) for v in (*summary.inputs, *summary.outputs)), default=0)
    for title, values in (("inputs", summary.inputs), ("outputs", summary.outputs)):
        lines.append(f"{title} ({len(values)})")
        lines.extend(f"  {v.name:<{width}}  {v.dtype:<8} {_shape(v.shape)}" for v in values)
    lines.append(f"initializers: {summary.initializers}, {_human(summary.initializer_bytes)}")
    functions = f", {summary.functions} local function{'' if summary.functions == 1 else 's'}" if summary.functions else ""
    lines.append(f"ops: {summary.nodes} nodes, {len(summary.ops)} kinds{functions}")
    width = max((len(op) for op, _ in summary.ops), default=0)
    lines.extend(f"  {op:<{width}}  {count:>6}" for op, count in summary.ops)
    lines.append(summary.verdict())
    lines.extend(f"target {t.line()}" for t in summary.report.targets)
    return "".join(f"{line}\n" for line in lines)


@click.command()
@click.argument("model", type=click.Path())
@config_options
@click.option("--target", "targets", multiple=True, metavar="NAMES",
              help="Also a line per target, as `portable validate --target` gives it (comma-separated, repeatable).")
@click.option("--live", is_flag=True, help="With --target: the runtimes installed here answer too (as validate --live).")
@format_option("Print what MODEL holds as text, or as JSON.")
def inspect(model: str, config: str | None, select: tuple[str, ...], ignore: tuple[str, ...], strict: bool,
            targets: tuple[str, ...], live: bool, fmt: str) -> None:
    """Show what MODEL holds: inputs and outputs, op counts, initializers, opset, IR, producer, and the
    portability verdict in one line (the policy's rules, as `portable validate` runs them); with --target, a
    line per target (with --live, the installed runtime's answer too: Qualcomm's HTP for qnn).

    Exit 0 when the file was read and judged, whatever the verdict (gate with `portable validate`); 3 when
    it cannot be read, or cannot be judged (validation failed on it, as `validate` exits 3 there).
    """
    from portable.validators.summary import inspect as read

    policy = merge_cli(policy_from_options(config, select, ignore, strict, False), targets=targets, targets_live=live)
    if policy.targets_live and not policy.targets:
        raise UsageError("--live applies to targets: name them with --target")
    summary = read(model, policy)
    code = int(ExitCode.ERROR if summary.report.error is not None else ExitCode.OK)
    if fmt == "json":
        data = {"schema_version": REPORT_SCHEMA_VERSION, "tool": {"name": "portable", "version": __version__},
                "exit_code": code, **summary.to_dict()}
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(_text(summary), nl=False)
    raise click.exceptions.Exit(code)
