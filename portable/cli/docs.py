"""``docs/cli.md`` from the click commands themselves: every command's usage, help and options as its
``--help`` gives them, and the vocabulary the commands share (exit codes, target names, deprecated spellings).

    .venv/bin/python -m portable.cli.docs docs/cli.md      (make cli-docs; without a file: to stdout)

``tests/cli/test_cli_docs.py`` regenerates the page and fails, naming the sections, when the file drifts.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator

import click

from portable.cli import BROKEN_PIPE, COMMANDS, cli
from portable.errors import ExitCode
from portable.io import atomic_write_text

__all__ = ["EXIT_MEANINGS", "REGENERATE", "drifted", "main", "render", "sections"]

REGENERATE = "make cli-docs"

# What each exit code means, for every command (the codes are portable.errors.ExitCode's).
EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "pass: no error findings (no warnings either under `--strict`), parity and budgets met",
    ExitCode.FINDINGS: "error findings, a parity failure or an exceeded budget (a failed target gate is one)",
    ExitCode.USAGE: "usage or configuration error: a bad flag or value, an unknown `[tool.portable]` key",
    ExitCode.ERROR: "unreadable input, a runner that could not run, or an internal failure (`--debug` shows "
                    "the traceback)",
}

_HEADER = f"""# The command line

Generated from the click commands (`portable/cli/`) by `{REGENERATE}`
(`.venv/bin/python -m portable.cli.docs docs/cli.md`); do not edit by hand: `tests/cli/test_cli_docs.py`
fails when this page and `--help` disagree. The options of each command are its `--help`'s, in its order."""


def _root() -> click.Context:
    return cli.context_class(cli, info_name="portable", **cli.context_settings)


def _walk(ctx: click.Context) -> Iterator[click.Context]:
    """``ctx`` and the context of every command below it, in ``COMMANDS``' order (a group's own: sorted)."""
    yield ctx
    command = ctx.command
    if not isinstance(command, click.Group):
        return
    names = command.list_commands(ctx)
    ordered = [n for n in COMMANDS if n in names] if command is cli else names
    for name in ordered:
        sub = command.get_command(ctx, name)
        if sub is not None:
            yield from _walk(click.Context(sub, info_name=name, parent=ctx))


def _help_text(command: click.Command) -> str:
    """The command's help as ``--help`` shows it: up to ``\\f``; a ``\\b`` paragraph kept as written."""
    text = inspect.cleandoc(command.help or "").split("\f")[0]
    paragraphs = []
    for paragraph in text.split("\n\n"):
        lines = paragraph.splitlines()
        if lines and lines[0].strip() == "\b":
            paragraphs.append("```text\n" + "\n".join(lines[1:]) + "\n```")
        else:
            paragraphs.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(p for p in paragraphs if p)


def _everywhere(ctx: click.Context, param: click.Parameter) -> bool:
    """``--debug`` and ``-h``/``--help``: every command takes them; listed once, in the ``portable`` section."""
    return param.opts == ["--debug"] or set(param.opts) == set(ctx.help_option_names)


def _options(ctx: click.Context, *, everywhere: bool) -> list[str]:
    lines = []
    for param in ctx.command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or (not everywhere and _everywhere(ctx, param)):
            continue
        opts, help_text = record
        if isinstance(param, click.Argument) and not help_text:
            continue  # in the usage line
        lines.append(f"- `{opts}`" + (f": {help_text}" if help_text else ""))
    return lines


def _section(ctx: click.Context) -> str:
    command = ctx.command
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    parts = [f"## `{ctx.command_path}`", f"```text\n{usage}\n```", _help_text(command)]
    if isinstance(command, click.Group) and command is not cli:
        parts.append("Commands: " + ", ".join(f"`{ctx.command_path} {n}`" for n in command.list_commands(ctx)))
    options = _options(ctx, everywhere=command is cli)
    if command is cli:
        parts.append("Every command below also takes `--debug` (tracebacks on errors) and `-h`/`--help`.")
    if options:
        parts.append("Options:\n\n" + "\n".join(options))
    return "\n\n".join(p for p in parts if p)


def _exit_codes() -> str:
    rows = [f"| {int(code)} | `{code.name}` | {EXIT_MEANINGS[code]} |" for code in ExitCode]
    return "\n".join([
        "### Exit codes", "",
        "The same for every command (`portable.errors.ExitCode`; each `portable.errors` exception carries its "
        "code, and a JSON report's `exit_code` is the process's):", "",
        "| code | `ExitCode` | meaning |", "|---|---|---|", *rows, "",
        f"Besides: 130 when interrupted (Ctrl-C); {BROKEN_PIPE}, quietly, when the reader of the output leaves early "
        "(`portable ... | head`), as for SIGPIPE."])


def _target_options() -> list[str]:
    """Each command's ``--target``, as its ``--help`` words it."""
    lines = []
    for ctx in _walk(_root()):
        for param in ctx.command.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) and "--target" in param.opts else None
            if record is not None:
                lines.append(f"- `{ctx.command_path} {record[0]}`: {record[1]}")
    return lines


def _targets() -> str:
    from portable.quantization.targets import TARGETS as QUANTIZE_TARGETS
    from portable.validators.targets import TARGETS

    return "\n".join([
        "### Target names", "",
        "One set of names, the target profiles' (`portable.validators.targets.TARGETS`): "
        + ", ".join(f"`{t}`" for t in TARGETS) + ".",
        "`portable quantize --target` takes those of them that have quantization defaults "
        "(`portable.quantization.targets.TARGETS`): " + ", ".join(f"`{t}`" for t in QUANTIZE_TARGETS) + ".", "",
        "`--target` per command:", "", *_target_options()])


def _deprecated() -> list[str]:
    """Hidden options (``old_NAME`` stands for the option whose destination is ``NAME``) and old target names."""
    from portable.quantization.targets import DEPRECATED

    lines = []
    for ctx in _walk(_root()):
        params = ctx.command.get_params(ctx)
        visible = {p.name: p for p in params if isinstance(p, click.Option) and not p.hidden}
        for param in params:
            if isinstance(param, click.Option) and param.hidden:
                new = visible.get((param.name or "").removeprefix("old_"))
                now = f"now `{new.opts[0]}`" if new is not None else "hidden, kept for old scripts"
                lines.append(f"- `{ctx.command_path} {param.opts[0]}`: {now}")
    lines += [f"- `portable quantize --target {old}`: now `--target {new}`" for old, new in DEPRECATED.items()]
    return lines


def _vocabulary() -> str:
    deprecated = "\n".join(["### Deprecated spellings", "",
                            "Each still works for one release, with a `portable: deprecated: ...` line on stderr:",
                            "", *_deprecated()])
    return "\n\n".join(["## Vocabulary", _exit_codes(), _targets(), deprecated])


def render() -> str:
    """The whole page."""
    commands = [_section(ctx) for ctx in _walk(_root())]
    return "\n\n".join([_HEADER, _vocabulary(), *commands]) + "\n"


def sections(text: str) -> dict[str, str]:
    """The page by ``## `` heading (the text before the first one under ``""``)."""
    found: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            found[current] = []
        found[current].append(line)
    return {title: "\n".join(lines).strip() for title, lines in found.items()}


def drifted(written: str, generated: str) -> list[str]:
    """The headings whose sections differ between the file and the commands (missing on either side too)."""
    old, new = sections(written), sections(generated)
    return [title or "(the page's head)" for title in dict.fromkeys([*new, *old]) if old.get(title) != new.get(title)]


def main(argv: list[str] | None = None) -> None:
    """``python -m portable.cli.docs [FILE]``: write the page to FILE (atomically), or to stdout."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        atomic_write_text(args[0], render())
    else:
        sys.stdout.write(render())


if __name__ == "__main__":  # pragma: no cover
    main()
