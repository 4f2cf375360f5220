"""``portable rules`` and ``portable explain``: the rule set, documented.

Model rules (PORT001+) live in ``portable.validators.rules``; pre-export rules (PORT101+,
found by ``portable precheck`` and the first phase of ``export``) in
``portable.exporters.rules``. Both are listed and explained here.
"""

from __future__ import annotations

import click

from portable.errors import UsageError

__all__ = ["explain", "rules"]


def _rows() -> list[tuple[str, str, str, str]]:
    from portable.exporters.rules import PRECHECK_RULES
    from portable.validators.rules import ALL_RULES

    rows = [(r.id, r.name, r.severity.value + (" (opt-in)" if r.opt_in else ""), r.summary()) for r in ALL_RULES]
    rows += [(r.id, r.name, r.severity.value, f"pre-export: {r.hint}") for r in PRECHECK_RULES.values()]
    return rows


@click.command()
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True)
def rules(fmt: str) -> None:
    """List every rule: id, name, default severity and summary."""
    if fmt == "markdown":
        click.echo("| id | name | severity | what it checks |\n|---|---|---|---|")
    for rule_id, name, severity, summary in _rows():
        if fmt == "markdown":
            click.echo(f"| {rule_id} | `{name}` | {severity} | {summary} |")
        else:
            click.echo(f"{rule_id}  {name:<30} {severity:<18} {summary}")


@click.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print one rule's documentation (by id, e.g. PORT004, or name)."""
    from portable.exporters.rules import PRECHECK_RULES
    from portable.validators.rules import get_rule

    pre = PRECHECK_RULES.get(rule.upper()) or next((r for r in PRECHECK_RULES.values() if r.name == rule), None)
    if pre is not None:
        click.echo(f"{pre.id} {pre.name} (default severity: {pre.severity.value}; found before export by "
                   f"`portable precheck` and `portable export`)\n\nFix: {pre.hint}")
        return
    try:
        cls = get_rule(rule)
    except KeyError:
        raise UsageError(f"unknown rule {rule!r} (see `portable rules`)") from None
    click.echo(f"{cls.id} {cls.name} (default severity: {cls.severity.value}{', opt-in' if cls.opt_in else ''})\n")
    click.echo(cls.doc())
    click.echo(f"\nMessage: {cls.message}\nFix: {cls.hint}")
