"""Options shared by several commands, defined once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from portable.policy import Policy, load_policy, merge_cli

__all__ = ["EXPORT_SCHEMA_VERSION", "config_options", "output_option", "policy_from_options", "quiet_option", "tolerance_options"]

F = TypeVar("F", bound=Callable[..., Any])

# One shape for an export's JSON (one graph or a text-generation pair), written or refused: the major part
# changes on incompatible changes.
EXPORT_SCHEMA_VERSION = "1.0"


def _compose(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(fn: F) -> F:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


config_options = _compose(
    click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
                 help="Policy file (TOML; top level or [tool.portable]). Default: the nearest pyproject.toml."),
    click.option("--select", multiple=True, metavar="IDS", help="Run only these rules (comma-separated, repeatable)."),
    click.option("--ignore", multiple=True, metavar="IDS", help="Skip these rules (comma-separated, repeatable)."),
    click.option("--strict", is_flag=True, default=False, help="Warnings fail too (exit 1)."),
)

output_option = click.option("--output", "-o", "output", type=click.Path(dir_okay=False), default=None,
                              help="Write the report to FILE instead of stdout.")

quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress output.")

tolerance_options = _compose(
    click.option("--atol", multiple=True, metavar="[OUTPUT=]V", help="Absolute tolerance, for all or one output."),
    click.option("--rtol", multiple=True, metavar="[OUTPUT=]V", help="Relative tolerance, for all or one output."),
)


def policy_from_options(config: str | None, select: tuple[str, ...] = (), ignore: tuple[str, ...] = (),
                        strict: bool = False, ort: bool = False) -> Policy:
    """The policy from the config file plus command-line overrides."""
    return merge_cli(load_policy(config), select=select, ignore=ignore, strict=strict, ort=ort)
