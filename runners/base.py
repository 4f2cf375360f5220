"""The runner interface: one class per backend with load / infer / unload.

``infer`` takes host arrays and returns host arrays (the parity phase); ``prepare`` puts
the inputs where the backend wants them once and returns a step that runs the model with
them and nothing else (the latency phase); ``synchronize`` waits for the device.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

import numpy as np

__all__ = ["Feeds", "Runner", "RunnerFailed", "Step"]

Feeds = Mapping[str, np.ndarray]
Step = Callable[[], object]
T = TypeVar("T")


class RunnerFailed(Exception):
    """A runner could not load or run (ONNX Runtime session, torch.compile, out of memory).

    Not a :class:`portable.errors.PortableError`: the comparison records it on that runner
    and goes on with the others; the report's exit code is then 3.
    """


class Runner(ABC):
    """A loaded backend that runs one model."""

    name: str  # unique within a comparison: "ort-cpu", "eager", "compiled"
    kind: str  # "onnxruntime" | "torch-eager" | "torch-compile"
    device: str  # "cpu" | "cuda"

    def __init__(self) -> None:
        self.load_seconds: float | None = None  # session creation, module placement

    @abstractmethod
    def load(self) -> None:
        """Create the session / place the module; sets ``load_seconds``."""

    @abstractmethod
    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        """Run once; outputs in the ONNX graph's output order, as host arrays."""

    @abstractmethod
    def prepare(self, feeds: Feeds) -> Step:
        """Place the inputs once and return a step that only runs the model."""

    def _loaded(self, handle: T | None) -> T:
        """``handle`` (the session, the compiled model, the module) that :meth:`load` sets; RuntimeError
        ``NAME: load() first`` while it is None (not loaded yet, or unloaded)."""
        if handle is None:
            raise RuntimeError(f"{self.name}: load() first")
        return handle

    def synchronize(self) -> None:  # noqa: B027 - a no-op default, not abstract
        """Wait until work queued on the device is done (no-op on the host)."""

    @property
    def uses_cuda(self) -> bool:
        return self.device == "cuda"

    def unload(self) -> None:  # noqa: B027 - a no-op default, not abstract
        """Release the session / module."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "device": self.device, "load_seconds": self.load_seconds}

    def __enter__(self) -> Runner:
        self.load()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.unload()
