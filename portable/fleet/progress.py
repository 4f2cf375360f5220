"""A fleet's progress: models done out of total, steps running, failures so far, ETA.

On a terminal, a rich status line on stderr (and one line per failure above it); ``--format json``: one
JSON object a line on stdout (``record`` per step, ``progress`` when the counts change, ``summary`` at the
end); otherwise one plain line per step on stderr.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from portable.fleet.plan import Fleet
from portable.fleet.records import StepRecord

__all__ = ["Progress", "make_progress"]


class Progress:
    """The counts; subclasses show them."""

    def __init__(self, fleet: Fleet) -> None:
        self.steps = {e.name: len(e.settings.steps) for e in fleet.selected()}
        self.seen: dict[str, int] = dict.fromkeys(self.steps, 0)
        self.failures = 0
        self.kept = 0
        self.running: list[str] = []
        self.start = time.monotonic()
        self.ran_seconds: list[float] = []

    @property
    def models_done(self) -> int:
        return sum(self.seen[m] >= n for m, n in self.steps.items())

    @property
    def total(self) -> int:
        return len(self.steps)

    def eta_s(self) -> float | None:
        """Time left at the rate of the steps run so far in this run (none run yet: unknown)."""
        ran = len(self.ran_seconds)
        left = sum(self.steps.values()) - sum(self.seen.values())
        if not ran or not left:
            return None if left else 0.0
        return (time.monotonic() - self.start) / ran * left

    def record(self, record: StepRecord, kept: bool) -> None:
        self.seen[record.model] = self.seen.get(record.model, 0) + 1
        self.failures += not record.passed
        self.kept += kept
        if not kept:
            self.ran_seconds.append(record.seconds)
        self.show_record(record, kept)

    def tick(self, running: Sequence[str]) -> None:
        self.running = list(running)
        self.show()

    def counts(self) -> dict[str, Any]:
        eta = self.eta_s()
        return {"models_done": self.models_done, "models": self.total, "running": list(self.running),
                "failures": self.failures, "kept": self.kept, "eta_s": None if eta is None else round(eta, 1),
                "elapsed_s": round(time.monotonic() - self.start, 1)}

    def show_record(self, record: StepRecord, kept: bool) -> None: ...

    def show(self) -> None: ...

    def close(self) -> None: ...


def _line(record: StepRecord, kept: bool) -> str:
    how = "kept" if kept else f"{record.seconds:.1f} s"
    reason = f": {record.reason[:160]}" if record.reason and not record.passed else ""
    return f"{record.model} {record.step}: {record.status} ({how}){reason}"


class PlainProgress(Progress):
    def __init__(self, fleet: Fleet, stream: TextIO) -> None:
        super().__init__(fleet)
        self.stream = stream

    def show_record(self, record: StepRecord, kept: bool) -> None:
        print(f"[{self.models_done}/{self.total}] {_line(record, kept)}", file=self.stream, flush=True)


class JsonProgress(Progress):
    """JSON lines: each record as it is written, the counts when they change."""

    def __init__(self, fleet: Fleet, stream: TextIO) -> None:
        super().__init__(fleet)
        self.stream = stream
        self._last: tuple[Any, ...] = ()

    def _emit(self, data: dict[str, Any]) -> None:
        self.stream.write(json.dumps(data, default=str) + "\n")
        self.stream.flush()

    def show_record(self, record: StepRecord, kept: bool) -> None:
        self._emit({"event": "record", "kept": kept, **record.to_dict()})

    def show(self) -> None:
        counts = self.counts()
        state = (counts["models_done"], tuple(counts["running"]), counts["failures"])
        if state != self._last:
            self._last = state
            self._emit({"event": "progress", **counts})


class RichProgress(Progress):
    """A live status line on stderr; failures printed above it as they come."""

    def __init__(self, fleet: Fleet) -> None:
        from rich.console import Console

        super().__init__(fleet)
        self.console = Console(stderr=True)
        self.status = self.console.status(self._text())
        self.status.start()

    def _text(self) -> str:
        counts = self.counts()
        eta = counts["eta_s"]
        running = ", ".join(counts["running"][:4]) + (" ..." if len(counts["running"]) > 4 else "")
        return (f"models {counts['models_done']}/{counts['models']} · running {len(counts['running'])}"
                f"{': ' + running if running else ''} · failures {counts['failures']} · "
                f"ETA {'?' if eta is None else f'{eta:.0f} s'}")

    def show_record(self, record: StepRecord, kept: bool) -> None:
        if not record.passed:
            self.console.print(f"[red]✗[/red] {_line(record, kept)}", highlight=False, markup=False)
        self.show()

    def show(self) -> None:
        self.status.update(self._text())

    def close(self) -> None:
        self.status.stop()


def make_progress(fleet: Fleet, fmt: str, quiet: bool) -> Progress:
    if fmt == "json":
        return JsonProgress(fleet, sys.stdout)
    if quiet:
        return Progress(fleet)
    return RichProgress(fleet) if sys.stderr.isatty() else PlainProgress(fleet, sys.stderr)
