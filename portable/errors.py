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
