"""A ``portable`` command run in the step's own process, as a user runs it: its JSON and its exit code.

The fleet's steps are the CLI's commands (``export``, ``fix``, ``validate``, ``quantize``, ``compare``), so a
fleet judges a model exactly as the command does, whatever the command learns to take (a model folder,
``--task``, ``--shape``). Each is run in-process through click, with ``--format json``.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Command", "run_command"]


@dataclass(frozen=True)
class Command:
    """What one command did: its exit code, its JSON report (None if it printed none), its last stderr line."""

    args: tuple[str, ...]
    exit_code: int
    report: dict[str, Any] | None = None
    said: str = ""  # the command's one-line error ("portable: error: ..."), where it gave one
    stdout: str = field(default="", repr=False)


def run_command(args: Sequence[str]) -> Command:
    """``portable ARGS`` in this process; nothing it prints reaches the fleet's terminal."""
    import click

    from portable.cli import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(args=list(args), prog_name="portable", standalone_mode=False)
        except click.exceptions.Exit as exc:  # raised past main by a command's own Exit in some click versions
            code = exc.exit_code
        except click.ClickException as exc:  # usage errors: click words them
            exc.show()
            code = exc.exit_code
        except click.exceptions.Abort:
            code = 130
    code = code if isinstance(code, int) else 0
    return Command(tuple(args), code, _json(out.getvalue()), _said(err.getvalue()), out.getvalue())


def _json(text: str) -> dict[str, Any] | None:
    """The report: the command's stdout as one JSON document (the last one, if a command printed two)."""
    text = text.strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        start = text.rfind("\n{")
        try:
            data = json.loads(text[start + 1:]) if start >= 0 else None
        except ValueError:
            return None
    return data if isinstance(data, dict) else None


def _said(stderr: str) -> str:
    """The command's own error line, else the last line on stderr."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("portable: error:", "Error:", "portable: "))]
    return (errors[-1] if errors else lines[-1] if lines else "")[:500]
