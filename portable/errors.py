"""Exceptions and exit codes, in one place.

Every failure the CLI reports is one of these exceptions; ``portable.cli`` turns
them into one line on stderr and the exit code they carry.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ConfigError",
    "ExitCode",
    "FindingsError",
    "InputError",
    "InternalError",
    "PortableError",
    "UsageError",
    "failure_record",
    "one_line",
]


class ExitCode(IntEnum):
    """Process exit codes shared by every command."""

    OK = 0
    FINDINGS = 1  # error findings, parity or budget failure
    USAGE = 2  # bad flags, bad configuration
    ERROR = 3  # unreadable input or internal failure


class PortableError(Exception):
    """Base class: a message for the user and the exit code it maps to."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        return f"{text} (fix: {self.hint})" if self.hint else text


class UsageError(PortableError):
    """Bad command line or API arguments."""

    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """A bad ``[tool.portable]`` table or ``--config`` file; names the key."""


class InputError(PortableError):
    """An input that cannot be read: missing, empty, not a model, truncated."""

    exit_code = ExitCode.ERROR


class InternalError(PortableError):
    """A failure of portable itself or a library it drives."""

    exit_code = ExitCode.ERROR


class FindingsError(PortableError):
    """The work ran, but what it found fails the contract (exit 1)."""

    exit_code = ExitCode.FINDINGS


def one_line(exc: BaseException, *, limit: int = 200, typed: bool = True) -> str:
    """``Type: first line of the message`` for a one-line report; ``Type`` alone when the message is empty.

    ``typed=False`` gives the first line alone (still the type's name when there is no message);
    ``limit`` caps the message part. Never raises, whatever the exception's ``__str__`` holds.
    """
    try:
        lines = str(exc).strip().splitlines()
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the original failure
        lines = []
    first = lines[0].strip()[:limit] if lines else ""
    name = type(exc).__name__
    if not first:
        return name
    return f"{name}: {first}" if typed else first


def failure_record(exc: BaseException) -> dict[str, object]:
    """A run that stopped before any result, for a JSON report: the exit code the process then has (a
    PortableError's own, 3 for anything else: an internal error), and the error's type and message."""
    if isinstance(exc, PortableError):
        return {"exit_code": int(exc.exit_code), "error": {"type": type(exc).__name__, "message": str(exc)}}
    message = f"internal error: {type(exc).__name__}: {exc}"
    return {"exit_code": int(ExitCode.ERROR), "error": {"type": "InternalError", "message": message}}
