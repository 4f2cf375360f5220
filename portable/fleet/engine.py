"""What the driver asks of an engine (local processes or Ray): take tasks, say which ended and how.

The engines place and run the steps; they decide nothing about what to run. The driver
(:mod:`portable.fleet.run`) submits each model's export, then its other steps once the export's file is
in the store, and writes every record itself.
"""

from __future__ import annotations

from typing import Protocol

from portable.errors import UsageError
from portable.fleet.work import Finished, Task

__all__ = ["ENGINES", "Engine", "Finished", "make_engine"]

ENGINES = ("local", "ray")


class Engine(Protocol):
    name: str

    def submit(self, task: Task) -> None: ...

    def wait(self, timeout: float) -> list[Finished]: ...

    def running(self) -> list[str]: ...

    def busy(self) -> bool: ...

    def close(self) -> None: ...


def make_engine(name: str, *, jobs: int = 1, address: str | None = None) -> Engine:
    """The engine ``name``; Ray's connects (or starts a local cluster) here, before any work."""
    if name == "local":
        if address is not None:
            raise UsageError("--address is for --engine ray")
        from portable.fleet.local import LocalEngine

        return LocalEngine(jobs)
    if name == "ray":
        from portable.fleet.ray_engine import RayEngine

        return RayEngine.connect(address, jobs=jobs)
    raise UsageError(f"unknown engine {name!r} (known: {', '.join(ENGINES)})")
