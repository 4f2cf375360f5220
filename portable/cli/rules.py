"""``portable rules`` and ``portable explain``: the rule set, documented.

Both read the rule catalogue (:mod:`portable.catalogue`): the model rules (PORT001+) and the
pre-export rules (PORT101+, found by ``portable precheck`` and the first phase of ``export``) and the
pair rules (PORT301+, over a text-generation export's two graphs: ``portable validate --pair``).
"""

from __future__ import annotations

import re

import click

from portable.catalogue import catalogue
from portable.errors import UsageError
from portable.ruleinfo import RuleInfo

__all__ = ["explain", "rules"]


_ABOUT = {"pre-export": "; found before export by `portable precheck` and `portable export`",
          "pair": "; checked on a prefill/decode pair by `portable validate --pair` and `portable export --task text-generation`"}


def _rows() -> list[tuple[str, str, str, str]]:
    return [(r.id, r.name, r.severity.value + (" (opt-in)" if r.opt_in else ""),
             r.summary if r.phase == "model" else f"{r.phase}: {r.summary}") for r in catalogue()]


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _message(template: str) -> str:
    """The message template as a reader sees it: ``{found}`` as ``<found>``; nothing when the
    template is one placeholder (``{what}``: the message is written per finding)."""
    if not template or _PLACEHOLDER.fullmatch(template.strip()):
        return ""
    return f"\nMessage: {_readable(template)}"


def _readable(template: str) -> str:
    return _PLACEHOLDER.sub(lambda m: f"<{m[1]}>", template)


def _explanation(rule: RuleInfo) -> str:
    about = (", opt-in" if rule.opt_in else "") if rule.phase == "model" else _ABOUT[rule.phase]
    message = _message(rule.message)
    head = f"{rule.id} {rule.name} (default severity: {rule.severity.value}{about})"
    return f"{head}\n\n{rule.docs}\n{message}\nFix: {_readable(rule.hint)}"


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
    info = catalogue().get(rule)
    if info is None:
        raise UsageError(f"unknown rule {rule!r} (see `portable rules`)")
    click.echo(_explanation(info))
