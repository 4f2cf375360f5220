"""One (model, step) as a task, and what runs in the task's own process, whichever engine started it.

The step's function runs with the process's stdout and stderr (the file descriptors: native libraries
too) sent to a log in its scratch folder, so nothing reaches the fleet's terminal; an exception is the
step's ``error`` record with its last line, the log's tail kept for the report.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from portable.errors import one_line
from portable.fleet.records import StepContext, StepOutcome

__all__ = ["Finished", "Task", "execute", "log_tail", "resident_gb"]

TAIL_LINES = 12


@dataclass(frozen=True)
class Task:
    """What an engine runs: one step of one model, its key and its limits."""

    model: str
    step: str
    key: str
    context: StepContext
    plugins: tuple[str, ...] = ()
    timeout_s: float = 900.0
    memory_gb: float = 6.0
    cpus: float = 1.0
    gpus: float = 0.0
    retries: int = 1
    first: bool = False  # run before the tasks already waiting (a model's steps after its export: models finish)
    env: tuple[tuple[str, str], ...] = ()  # the step process's environment, where not its server's (a Ray task's)

    @property
    def id(self) -> str:
        return f"{self.model}/{self.step}"


@dataclass(frozen=True)
class Finished:
    """A task that ended: its outcome, the seconds it ran (its last attempt), how many attempts it took.
    ``artefact``: the file's bytes where the engine brought them back from another machine (Ray)."""

    task: Task
    outcome: StepOutcome
    seconds: float
    attempts: int = 1
    artefact: bytes | None = None


def log_tail(path: str | Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log (empty when there is none)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])[-2000:]


def resident_gb(pid: int) -> float:
    """Resident memory of a process and its children, GB (0 when it is gone)."""
    import psutil

    try:
        process = psutil.Process(pid)
        return sum(p.memory_info().rss for p in (process, *process.children(recursive=True))) / 1024**3
    except psutil.Error:
        return 0.0


@contextlib.contextmanager
def _logged(path: Path) -> Iterator[None]:
    """fd 1 and 2 (and sys.stdout/err) into ``path`` while the step runs."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def execute(task: Task) -> StepOutcome:
    """Run the task's step here; never raises (an exception is the record's ``error``)."""
    from portable.fleet.steps import STEPS, load_plugins

    log = Path(task.context.scratch) / "step.log"
    with _logged(log):
        try:
            load_plugins(task.plugins)
            outcome = STEPS[task.step].run(task.context)
        except Exception as exc:  # noqa: BLE001 - a step that crashes is a record, not the end of the fleet
            traceback.print_exc()
            outcome = StepOutcome("error", f"the step crashed: {one_line(exc, limit=300)}")
    if outcome.status != "pass":
        data = dict(outcome.data) | {"log": log_tail(log)}
        return StepOutcome(outcome.status, outcome.reason, data, outcome.artefact)
    return outcome
