"""``--engine ray``: each step a ``ray.remote`` task on a cluster (``--address``), or on a local one.

- A task declares what it needs (``num_cpus``, ``num_gpus`` for a step on a ``cuda`` model, ``memory``), so
  Ray places it; a need no node of the cluster has is recorded at once, not left waiting.
- ``max_calls=1``: a fresh worker process per task, as the local engine has.
- Retries are Ray's: ``max_retries`` (the fleet's ``retries``) when the worker or its node dies;
  ``retry_exceptions=False``, since a step's failure is caught in the task and is its record, not a crash.
- The time limit and the memory cap: a small actor (:class:`Monitor`) hears when each attempt starts and
  when its process grows past the cap (a thread in the task watches it); the driver cancels such a task
  with ``ray.cancel(force=True)``, which kills its worker (a cancelled task is not retried).
- The model's file goes to the task through the object store (``ray.put`` once per file), its export's
  file comes back as the task's result: nodes need not share a disk for the files the fleet makes.
  Completion order is ``ray.wait``'s. Only the driver writes the store.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from portable.errors import UsageError
from portable.fleet.engine import Finished
from portable.fleet.records import StepOutcome
from portable.fleet.work import Task, execute, resident_gb

__all__ = ["RAY_HINT", "Monitor", "RayEngine", "ray_step"]

RAY_HINT = "pip install 'portable-onnx[ray]'"
WATCH_S = 0.5
GIB = 1024**3


class Monitor:
    """When each task's current attempt started (this actor's clock), how many attempts, and its memory
    over the cap. A Ray actor (``ray.remote(Monitor)``); plain methods, so the tests can call them too."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.attempts: dict[str, int] = {}
        self.over: dict[str, float] = {}

    def start(self, task: str) -> None:
        self.started[task] = time.monotonic()
        self.attempts[task] = self.attempts.get(task, 0) + 1

    def exceeded(self, task: str, gb: float) -> None:
        self.over[task] = gb

    def state(self) -> dict[str, tuple[float, int, float | None]]:
        """task -> (seconds since its attempt started, attempts, GB over the cap or None)."""
        now = time.monotonic()
        return {t: (now - s, self.attempts[t], self.over.get(t)) for t, s in self.started.items()}


def _watch(task: Task, monitor: Any, stop: threading.Event) -> None:
    while not stop.wait(WATCH_S):
        gb = resident_gb(os.getpid())
        if gb > task.memory_gb:
            monitor.exceeded.remote(task.id, gb)
            return


def ray_step(task: Task, artefact: bytes | None, monitor: Any) -> tuple[StepOutcome, bytes | None]:
    """The task: the step in this (fresh) worker, in a scratch folder of its own; the export's file as bytes."""
    monitor.start.remote(task.id)
    stop = threading.Event()
    threading.Thread(target=_watch, args=(task, monitor, stop), daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="portable-fleet-") as scratch:
        path = None
        if artefact is not None:
            path = Path(scratch) / "input" / "model.onnx"
            path.parent.mkdir()
            path.write_bytes(artefact)
        context = replace(task.context, scratch=scratch, artefact=str(path) if path else None)
        outcome = execute(replace(task, context=context))
        stop.set()
        data = Path(outcome.artefact).read_bytes() if outcome.artefact and Path(outcome.artefact).exists() else None
    return replace(outcome, artefact=None), data


def _reachable(address: str) -> None:
    """A ``host:port`` that answers, else a usage error (exit 2) before any work."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--address {address!r}: expected HOST:PORT, 'auto', or nothing (a local cluster)")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as exc:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def _init(address: str | None, jobs: int) -> bool:
    """Connect (True: a local cluster was started here, for this run only)."""
    import ray

    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)}}
    common: dict[str, Any] = {"log_to_driver": False, "runtime_env": env, "configure_logging": False,
                              "include_dashboard": False}
    if address is None:
        ray.init(num_cpus=max(1, jobs), **common)
        return True
    if address != "auto":
        _reachable(address)
    try:
        ray.init(address=address, **common)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
    return False


class RayEngine:
    """Tasks on a Ray cluster; the records come back to the driver."""

    name = "ray"

    def __init__(self, started_here: bool) -> None:
        import ray

        self._started_here = started_here
        self._remote = ray.remote(max_calls=1)(ray_step)
        self._monitor: Any = ray.remote(num_cpus=0)(Monitor).remote()
        self._refs: dict[Any, tuple[Task, Any]] = {}  # result ref -> (task, ref)
        self._puts: dict[str, Any] = {}
        self._notes: dict[str, StepOutcome] = {}
        self._refused: list[Finished] = []

    @classmethod
    def connect(cls, address: str | None, *, jobs: int = 1) -> RayEngine:
        if importlib.util.find_spec("ray") is None:
            raise UsageError(f"--engine ray needs Ray, which is not installed here: {RAY_HINT}")
        return cls(_init(address, jobs))

    def submit(self, task: Task) -> None:
        missing = self._infeasible(task)
        if missing:
            self._refused.append(Finished(task, StepOutcome("error", missing), 0.0, 0))
            return
        options = {"num_cpus": task.cpus, "num_gpus": task.gpus, "memory": int(task.memory_gb * GIB),
                   "max_retries": task.retries, "retry_exceptions": False, "name": task.id}
        ref = self._remote.options(**options).remote(task, self._put(task.context.artefact), self._monitor)
        self._refs[ref] = (task, ref)

    def _put(self, path: str | None) -> Any:
        """The file in the object store, once per path and content."""
        import ray

        if path is None:
            return None
        stat = os.stat(path)
        key = f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
        if key not in self._puts:
            self._puts[key] = ray.put(Path(path).read_bytes())
        return self._puts[key]

    def _infeasible(self, task: Task) -> str | None:
        """Why no node of the cluster can take the task (more GPUs or memory than any node has), else None."""
        import ray

        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        if task.gpus and not any(n.get("GPU", 0) >= task.gpus for n in nodes):
            return f"no node of the Ray cluster has a GPU (the step runs on the model's device {task.context.settings.get('device')})"
        if not any(n.get("memory", 0) >= task.memory_gb * GIB for n in nodes):
            return f"no node of the Ray cluster has {task.memory_gb:g} GB of memory to give the step (memory-gb)"
        return None

    def running(self) -> list[str]:
        return [task.id for task, _ in self._refs.values()]

    def busy(self) -> bool:
        return bool(self._refs or self._refused)

    def wait(self, timeout: float) -> list[Finished]:
        import ray

        done, self._refused = list(self._refused), []
        if not self._refs:
            return done
        ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=timeout, fetch_local=False)
        if ready:
            ready, _ = ray.wait(list(self._refs), num_returns=len(self._refs), timeout=0, fetch_local=False)
        state: dict[str, tuple[float, int, float | None]] = ray.get(self._monitor.state.remote())
        done += [self._result(ref, state) for ref in ready]
        self._limits(state)
        return done

    def _result(self, ref: Any, state: dict[str, tuple[float, int, float | None]]) -> Finished:
        import ray

        task, _ = self._refs.pop(ref)
        seconds, attempts, _ = state.get(task.id, (0.0, 1, None))
        try:
            outcome, data = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return Finished(task, self._notes.get(task.id) or StepOutcome("killed", "cancelled"), round(seconds, 3), attempts)
        except ray.exceptions.RayError as exc:
            why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            reason = f"the worker died ({type(exc).__name__}: {why}) after {attempts} attempt(s)"
            return Finished(task, StepOutcome("killed", reason), round(seconds, 3), attempts)
        return Finished(task, outcome, round(seconds, 3), attempts, data)

    def _limits(self, state: dict[str, tuple[float, int, float | None]]) -> None:
        """Cancel (kill) each running task past its time limit or over its memory cap, saying why."""
        import ray

        for ref, (task, _) in list(self._refs.items()):
            if task.id in self._notes or task.id not in state:
                continue
            seconds, _, over = state[task.id]
            if over is not None:
                self._notes[task.id] = StepOutcome("memory", f"over the memory cap: {over:.1f} GB resident > "
                                                             f"{task.memory_gb:g} GB; cancelled")
            elif seconds > task.timeout_s:
                self._notes[task.id] = StepOutcome("timeout", f"timed out after {task.timeout_s:g} s (the step's limit); "
                                                              "cancelled")
            else:
                continue
            ray.cancel(ref, force=True)

    def close(self) -> None:
        import ray

        for ref in list(self._refs):
            ray.cancel(ref, force=True)
        self._refs.clear()
        ray.shutdown()
