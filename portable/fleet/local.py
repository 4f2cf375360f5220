"""``--engine local``: a pool of ``--jobs`` processes on this machine, one fresh process per step.

Each step's process comes from a fork server that has imported portable (and torch, onnx and ONNX Runtime
where installed) once, so a step does not pay their import. The driver watches each one: past its time
limit or its memory cap (resident memory of the process and its children) the process group is killed
and the record says which; a process that dies on its own (a signal, a crash in a native library) is
recorded as ``killed`` with how it ended. No other step is touched. A step's process dies with the fork
server, which ends with the process that started it (a driver killed half-way leaves no step running).

The Ray engine runs each step of a worker the same way (:func:`run_alone`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from portable.fleet.records import StepOutcome
from portable.fleet.work import Finished, Task, execute, resident_gb

__all__ = ["LocalEngine", "run_alone"]

PRELOAD = ("portable.fleet.work", "portable.fleet.builtin", "portable.cli", "torch", "onnx", "onnxruntime")
POLL_S = 0.25
EXIT_S = 5.0  # how long a step that has sent its outcome may take to exit before it is killed


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (one per driver, shared by the step processes) without its
    warnings, unless ``--debug``. It removes the semaphores of a step killed half-way (a reference
    evaluator's queue) and warns at exit "There appear to be N leaked semaphore objects": true, and said
    already by the step's record (timeout, memory, killed). The tracker takes its warning filters from
    this process's ``-W`` options (``sys.warnoptions``) when it starts."""
    from multiprocessing import resource_tracker

    from portable.quiet import debug_requested

    option = "ignore::UserWarning:multiprocessing.resource_tracker"
    if debug_requested() or option in sys.warnoptions:
        return
    sys.warnoptions.append(option)
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions.remove(option)


def _die_with_parent() -> None:
    """SIGKILL this process when its parent (the fork server) ends (Linux's PR_SET_PDEATHSIG; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def _child(task: Task, conn: Connection) -> None:
    """The step's process (not a daemon: a step may start processes of its own, the reference evaluator's)."""
    os.setpgid(0, 0)  # its own process group: a kill takes the step's own children with it
    _die_with_parent()
    if task.env:  # the environment of the task's own start (a Ray worker's, set by Ray for this task)
        os.environ.clear()
        os.environ.update(dict(task.env))
    outcome = execute(task)
    conn.send(outcome)
    conn.close()


@dataclass
class _Running:
    task: Task
    process: Any
    conn: Connection
    start: float
    peak_gb: float = 0.0
    over: str = ""  # why the driver ends it: "timeout" or "memory"


class LocalEngine:
    """A process per step, at most ``jobs`` at once, each under its time limit and memory cap."""

    name = "local"

    def __init__(self, jobs: int = 1, preload: Sequence[str] = ()) -> None:
        self.jobs = max(1, jobs)
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([*PRELOAD, *preload])  # (read once: when this process's server starts)
        _quiet_resource_tracker()
        self._queue: deque[Task] = deque()
        self._running: list[_Running] = []

    def submit(self, task: Task) -> None:
        if task.first:
            self._queue.appendleft(task)
        else:
            self._queue.append(task)

    def running(self) -> list[str]:
        return [r.task.id for r in self._running]

    def busy(self) -> bool:
        return bool(self._queue or self._running)

    def wait(self, timeout: float) -> list[Finished]:
        """Start what fits, then wait up to ``timeout`` s; the steps that ended meanwhile."""
        self._start()
        if not self._running:
            return []
        ready = wait([r.process.sentinel for r in self._running] + [r.conn for r in self._running], min(timeout, POLL_S))
        done = [r for r in self._running if r.conn in ready or r.process.sentinel in ready]
        done += [r for r in self._running if r not in done and self._over(r)]
        for item in done:
            self._running.remove(item)
        return [self._finish(r) for r in done]

    def _start(self) -> None:
        while self._queue and len(self._running) < self.jobs:
            task = self._queue.popleft()
            receive, send = self._context.Pipe(duplex=False)
            process = self._context.Process(target=_child, args=(task, send), name=f"portable-fleet {task.id}")
            process.start()
            send.close()
            self._running.append(_Running(task, process, receive, time.monotonic()))

    def _over(self, run: _Running) -> bool:
        """Past the time limit or over the memory cap (the process is killed then)."""
        if time.monotonic() - run.start > run.task.timeout_s:
            run.over = "timeout"
        else:
            run.peak_gb = max(run.peak_gb, resident_gb(run.process.pid))
            run.over = "memory" if run.peak_gb > run.task.memory_gb else ""
        return bool(run.over)

    def _finish(self, run: _Running) -> Finished:
        seconds = time.monotonic() - run.start
        outcome = _received(run.conn)
        if outcome is None:
            outcome = self._ended(run, seconds)
        else:  # it sent its outcome last: let it end on its own, its exit handlers run (a library's semaphores go)
            run.process.join(EXIT_S)
        _kill(run.process)
        run.conn.close()
        return Finished(run.task, outcome, round(seconds, 3), 1)

    def _ended(self, run: _Running, seconds: float) -> StepOutcome:
        """Why a step gave no outcome: over its limits (killed here), or its process died on its own."""
        if run.over == "memory":
            _kill(run.process)
            return StepOutcome("memory", f"over the memory cap: {run.peak_gb:.1f} GB resident > {run.task.memory_gb:g} GB; killed")
        if run.over == "timeout":
            _kill(run.process)
            return StepOutcome("timeout", f"timed out after {run.task.timeout_s:g} s (the step's limit); killed")
        run.process.join(5)
        return StepOutcome("killed", _how(run.process.exitcode))

    def close(self) -> None:
        for run in self._running:
            _kill(run.process)
        self._running.clear()
        self._queue.clear()


def _received(conn: Connection) -> StepOutcome | None:
    try:
        if conn.poll():
            outcome = conn.recv()
            return outcome if isinstance(outcome, StepOutcome) else None
    except (EOFError, OSError):
        pass
    return None


def _how(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the step's process was killed by {name}"
    return f"the step's process exited {code} without a result"


def _kill(process: Any) -> None:
    """The step's process group (its own children too), then the process."""
    if process.pid is not None and process.is_alive():
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            process.kill()
    process.join(5)


def run_alone(task: Task, preload: Sequence[str] = ()) -> Finished:
    """One task in a process of its own, under its limits, as a fleet on this machine runs it (a Ray worker
    runs each of its steps so); ``preload``: more modules for the fork server to import once."""
    engine = LocalEngine(1, preload)
    engine.submit(task)
    try:
        while True:
            for done in engine.wait(POLL_S):
                return done
    finally:
        engine.close()
