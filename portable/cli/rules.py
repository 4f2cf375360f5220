"""``portable rules`` and ``portable explain``: the rule set, documented."""

from __future__ import annotations

import click

from portable.errors import UsageError

__all__ = ["explain", "rules"]


@click.command()
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True)
def rules(fmt: str) -> None:
    """List every rule: id, name, default severity and summary."""
    from portable.validators.rules import ALL_RULES

    if fmt == "markdown":
        click.echo("| id | name | severity | what it checks |\n|---|---|---|---|")
        for rule in ALL_RULES:
            opt = " (opt-in)" if rule.opt_in else ""
            click.echo(f"| {rule.id} | `{rule.name}` | {rule.severity.value}{opt} | {rule.summary()} |")
        return
    for rule in ALL_RULES:
        opt = " (opt-in)" if rule.opt_in else ""
        click.echo(f"{rule.id}  {rule.name:<30} {rule.severity.value:<8}{opt} {rule.summary()}")


@click.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print one rule's documentation (by id, e.g. PORT004, or name)."""
    from portable.validators.rules import get_rule

    try:
        cls = get_rule(rule)
    except KeyError:
        raise UsageError(f"unknown rule {rule!r} (see `portable rules`)") from None
    click.echo(f"{cls.id} {cls.name} (default severity: {cls.severity.value}{', opt-in' if cls.opt_in else ''})\n")
    click.echo(cls.doc())
    click.echo(f"\nMessage: {cls.message}\nFix: {cls.hint}")
