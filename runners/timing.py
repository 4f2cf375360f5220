"""Timing, kept apart from the runners: warm-up, then timed iterations until both a count
and a duration are reached (trtexec-like), each iteration closed by device synchronisation.

Host timing is ``time.perf_counter`` around ``step(); synchronize()``; CUDA runs are timed
with CUDA events recorded on the current stream around the step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

__all__ = ["CudaEventTimer", "HostTimer", "Timer", "TimingConfig", "measure"]

Step = Callable[[], object]


@dataclass(frozen=True)
class TimingConfig:
    """Warm-up until both ``warmup_iterations`` and ``warmup_seconds`` are reached; then time
    until both ``min_iterations`` and ``min_seconds`` are reached (at most ``max_iterations``)."""

    warmup_seconds: float = 0.2
    warmup_iterations: int = 2
    min_iterations: int = 10
    min_seconds: float = 1.0
    max_iterations: int = 100_000

    def __post_init__(self) -> None:
        if self.min_iterations < 1 or self.max_iterations < self.min_iterations:
            raise ValueError("need 1 <= min_iterations <= max_iterations")
        if self.warmup_seconds < 0 or self.min_seconds < 0 or self.warmup_iterations < 0:
            raise ValueError("warm-up and durations must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Timer(Protocol):
    """Times one call of ``step``, synchronised with the device; returns seconds."""

    name: str

    def time(self, step: Step) -> float: ...


class HostTimer:
    """``time.perf_counter`` around the step and a device synchronisation."""

    name = "perf_counter"

    def __init__(self, synchronize: Callable[[], None] = lambda: None) -> None:
        self._synchronize = synchronize

    def time(self, step: Step) -> float:
        start = time.perf_counter()
        step()
        self._synchronize()
        return time.perf_counter() - start


class CudaEventTimer:
    """CUDA events around the step on the current stream (torch)."""

    name = "cuda_events"

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def time(self, step: Step) -> float:
        self._start.record()
        step()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3


def _run_until(step: Step, timer: Timer, iterations: int, seconds: float, cap: int) -> list[float]:
    samples: list[float] = []
    begin = time.perf_counter()
    while len(samples) < cap and (len(samples) < iterations or time.perf_counter() - begin < seconds):
        samples.append(timer.time(step))
    return samples


def measure(step: Step, timer: Timer, config: TimingConfig) -> list[float]:
    """Warm up, then return the timed samples (seconds)."""
    _run_until(step, timer, config.warmup_iterations, config.warmup_seconds, config.max_iterations)
    return _run_until(step, timer, config.min_iterations, config.min_seconds, config.max_iterations)
