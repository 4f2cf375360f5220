"""Phase timing, with progress on the terminal (rich, on stderr) unless quiet."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["PHASES", "Phases"]

PHASES = ("load", "torch.export", "translate", "optimize", "validate", "verify", "write")


class Phases:
    """Records how long each phase took; shows a spinner while it runs and a line when it ends."""

    def __init__(self, quiet: bool = True) -> None:
        self.timings: dict[str, float] = {}
        self._console = None
        self._name: str = ""
        self._status: Any = None
        if not quiet:
            from rich.console import Console

            self._console = Console(stderr=True)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        status = self._console.status(f"{name}...") if self._console else contextlib.nullcontext()
        self._name, self._status = name, status
        try:
            with status:
                yield
        except BaseException:
            self._line(name, start, "[red]✗[/red]")
            raise
        finally:
            self._status = None
        self._line(name, start, "[green]✓[/green]")

    def note(self, text: str) -> None:
        """A step within the running phase (``search: trial 3 of 17 ...``): a line on stderr, and the spinner's
        text; nothing when quiet."""
        if self._console is not None:
            self._console.print(f"  {self._name}: {text}", highlight=False, markup=False, soft_wrap=True)
            if hasattr(self._status, "update"):
                self._status.update(f"{self._name}: {text}")

    def _line(self, name: str, start: float, mark: str) -> None:
        elapsed = time.perf_counter() - start
        self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 4)
        if self._console is not None:
            self._console.print(f"{mark} {name:<13} {elapsed:6.2f} s", highlight=False)

