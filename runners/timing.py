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

__all__ = ["CudaEventTimer", "HostTimer", "Timer", "TimingConfig", "measure", "measure_pipelined"]

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
    """Times ``calls`` back-to-back calls of ``step``, synchronised with the device once at
    the end; returns seconds. ``calls=1`` is one synchronous request."""

    name: str

    def time(self, step: Step, calls: int = 1) -> float: ...


class HostTimer:
    """``time.perf_counter`` around the step and a device synchronisation."""

    name = "perf_counter"

    def __init__(self, synchronize: Callable[[], None] = lambda: None) -> None:
        self._synchronize = synchronize

    def time(self, step: Step, calls: int = 1) -> float:
        start = time.perf_counter()
        for _ in range(calls):
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

    def time(self, step: Step, calls: int = 1) -> float:
        self._start.record()
        for _ in range(calls):
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
    """Warm up, then return the timed samples (seconds): one synchronous call each."""
    _run_until(step, timer, config.warmup_iterations, config.warmup_seconds, config.max_iterations)
    return _run_until(step, timer, config.min_iterations, config.min_seconds, config.max_iterations)


def measure_pipelined(step: Step, timer: Timer, per_call_s: float, blocks: int = 5,
                      block_s: float = 0.1) -> list[float]:
    """Seconds per call when calls run back to back, as a serving loop runs them: each
    sample is one block of calls (about ``block_s`` long) synchronised once, divided by its
    size. Launch overhead then overlaps the previous call's work, as in
    ``torch.utils.benchmark.Timer.blocked_autorange``; run after :func:`measure` (warm)."""
    calls = max(1, min(10_000, round(block_s / max(per_call_s, 1e-6))))
    return [timer.time(step, calls) / calls for _ in range(blocks)]
