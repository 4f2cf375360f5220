"""``portable validate``: check model files against the portability contract."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from portable.cli.options import config_options, output_option, policy_from_options
from portable.discovery import collect_models
from portable.formatters import FORMATS, get_formatter
from portable.io import atomic_write_text
from portable.report import ValidationReport, worst_exit_code

__all__ = ["emit", "validate", "validate_targets"]


def use_color(output: str | None) -> bool:
    return output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ


def emit(reports: Sequence[ValidationReport], fmt: str, output: str | None) -> None:
    """Render reports and write them to ``output`` (atomically) or stdout."""
    text = get_formatter(fmt, color=use_color(output)).render(reports)
    if output:
        atomic_write_text(output, text)
    else:
        click.echo(text, nl=False)


def validate_targets(paths: Sequence[str], policy) -> list[ValidationReport]:
    from portable.validators import select_rules, validate as validate_model

    rules = tuple(r.id for r in select_rules(policy))
    reports = []
    for target in collect_models(paths):
        if target.error is not None:
            reports.append(ValidationReport(path=target.path, policy=policy, error=target.error, rules=rules))
        else:
            reports.append(validate_model(target.path, policy))
    return reports


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@config_options
@click.option("--ort", is_flag=True, help="Also run PORT014: create an ONNX Runtime CPU session.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="Report format.")
@output_option
def validate(paths: tuple[str, ...], config: str | None, select: tuple[str, ...], ignore: tuple[str, ...],
             strict: bool, ort: bool, fmt: str, output: str | None) -> None:
    """Validate ONNX models (files, or folders searched for *.onnx) against the contract.

    Exit 0 when no model has error findings (warnings too under --strict), 1 when one
    has, 3 when a model cannot be read.
    """
    policy = policy_from_options(config, select, ignore, strict, ort)
    reports = validate_targets(paths, policy)
    emit(reports, fmt, output)
    raise click.exceptions.Exit(int(worst_exit_code(reports)))
