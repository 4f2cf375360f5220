"""``--engine ray``: each step a ``ray.remote`` task on a cluster (``--address``), or on a local one.

- A task declares what it needs (``num_cpus``, ``num_gpus`` for a step on a ``cuda`` model, ``memory``), so
  Ray places it; a need no node of the cluster has is recorded at once, not left waiting.
- In the worker, the step runs as the local engine runs it (:func:`~portable.fleet.local.run_alone`): in a
  process of its own, forked from a server that has imported portable, torch, onnx and ONNX Runtime once
  per worker (Ray reuses its workers, so a step does not pay those imports), under its time limit and
  memory cap, its outcome worded as on this machine. The step's process dies with its worker.
- Retries are Ray's: ``max_retries`` (the fleet's ``retries``) when the worker or its node dies;
  ``retry_exceptions=False``, since a step's failure is caught in the task and is its record, not a crash.
  A small actor (:class:`Monitor`) counts each task's attempts.
- The model's file goes to the task through the object store (``ray.put`` once per file), its export's
  file comes back as the task's result: nodes need not share a disk for the files the fleet makes.
  Completion order is ``ray.wait``'s. Only the driver writes the store.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from portable.errors import UsageError
from portable.fleet.records import StepOutcome
from portable.fleet.work import Finished, Task

__all__ = ["RAY_HINT", "Monitor", "RayEngine", "ray_step"]

RAY_HINT = "pip install 'portable-onnx[ray]'"
GIB = 1024**3


class Monitor:
    """When each task's current attempt started (this actor's clock) and how many attempts it has had.
    A Ray actor (``ray.remote(Monitor)``); plain methods, so the tests can call them too."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.attempts: dict[str, int] = {}

    def start(self, task: str) -> None:
        self.started[task] = time.monotonic()
        self.attempts[task] = self.attempts.get(task, 0) + 1

    def state(self) -> dict[str, tuple[float, int]]:
        """task -> (seconds since its attempt started, attempts)."""
        now = time.monotonic()
        return {t: (now - s, self.attempts[t]) for t, s in self.started.items()}


def ray_step(task: Task, artefact: bytes | None, monitor: Any) -> tuple[StepOutcome, bytes | None, float]:
    """The task in this worker: the step in a process of its own, in a scratch folder of its own; its outcome,
    the export's file as bytes, its seconds. The monitor has counted the attempt before the step begins."""
    import ray

    from portable.fleet.local import run_alone

    ray.get(monitor.start.remote(task.id))
    with tempfile.TemporaryDirectory(prefix="portable-fleet-") as scratch:
        path = None
        if artefact is not None:
            path = Path(scratch) / "input" / "model.onnx"
            path.parent.mkdir()
            path.write_bytes(artefact)
        context = replace(task.context, scratch=scratch, artefact=str(path) if path else None)
        # the worker's environment as Ray set it for this task (CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS)
        done = run_alone(replace(task, context=context, env=tuple(os.environ.items())), preload=("ray",))
        outcome = done.outcome
        data = Path(outcome.artefact).read_bytes() if outcome.artefact and Path(outcome.artefact).exists() else None
    return replace(outcome, artefact=None), data, done.seconds


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
    """Connect (True: a local cluster was started here, for this run only). Ray's log lines while it starts
    ("Started a local Ray instance", "Token authentication is enabled ...") show under ``--debug`` only."""
    import contextlib

    from portable.quiet import debug_requested, quiet_libraries

    with contextlib.nullcontext() if debug_requested() else quiet_libraries():
        return _connect(address, jobs)


def _connect(address: str | None, jobs: int) -> bool:
    import ray

    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)}}
    common: dict[str, Any] = {"log_to_driver": False, "runtime_env": env, "configure_logging": False,
                              "include_dashboard": False}
    if address is None:  # "local": a new instance, not the cluster that `ray start` or RAY_ADDRESS names ('auto' does)
        ray.init(address="local", num_cpus=max(1, jobs), **common)
        return True
    if address != "auto":
        _reachable(address)
    try:
        ray.init(address=address, **common)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
    return False


def _driver_prints(on: bool) -> bool:
    """Turn the driver's printing of the cluster's messages on or off; whether it was on.

    Ray's driver prints the raylet's error messages ("(raylet) A worker died or was killed ...", "Task ...
    failed. There are 1 retries remaining") on stdout from a thread of its own, whatever ``log_to_driver``
    says (that covers the workers' output only). The fleet records each of those events, so they are noise
    in its output (and would break ``--format json``'s lines): they show under ``--debug`` only. Ray has no
    public option for this (2.60); ``_worker_logs_enabled`` is the switch its own ``ray.util.rpdb`` turns
    off while a breakpoint holds the terminal."""
    from ray._private import worker

    was = bool(getattr(worker, "_worker_logs_enabled", True))
    worker._worker_logs_enabled = on
    return was


class RayEngine:
    """Tasks on a Ray cluster; the records come back to the driver."""

    name = "ray"

    def __init__(self, started_here: bool) -> None:
        import ray

        from portable.quiet import debug_requested

        self._started_here = started_here
        self._printed = _driver_prints(debug_requested())
        self._remote = ray.remote(ray_step)
        self._monitor: Any = ray.remote(num_cpus=0)(Monitor).remote()
        self._refs: dict[Any, Task] = {}  # result ref -> its task
        self._puts: dict[str, Any] = {}
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
        self._refs[ref] = task

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
        return [task.id for task in self._refs.values()]

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
            state: dict[str, tuple[float, int]] = ray.get(self._monitor.state.remote())
            done += [self._result(ref, state) for ref in ready]
        return done

    def _result(self, ref: Any, state: dict[str, tuple[float, int]]) -> Finished:
        import ray

        task = self._refs.pop(ref)
        seconds, attempts = state.get(task.id, (0.0, 1))
        try:
            outcome, data, ran = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return Finished(task, StepOutcome("killed", "cancelled (the fleet was stopped)"), round(seconds, 3), attempts)
        except ray.exceptions.RayError as exc:
            why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            reason = f"the worker died ({type(exc).__name__}: {why}) after {attempts} attempt(s)"
            return Finished(task, StepOutcome("killed", reason), round(seconds, 3), attempts)
        return Finished(task, outcome, ran, attempts, data)

    def close(self) -> None:
        import ray

        for ref in list(self._refs):
            ray.cancel(ref, force=True)
        self._refs.clear()
        ray.shutdown()
        _driver_prints(self._printed)
