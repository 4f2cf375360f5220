"""Timing, kept apart from the runners (as Polygraphy keeps it): a warm-up that runs until the
runner is steady, then round-robin blocks over all runners, so that none gains or loses by
the order it is timed in.

* Warm-up (:func:`warm_up`): blocks of synchronous calls, each about ``block_seconds``
  long, until the medians of the last ``steady_blocks`` blocks agree within
  ``steady_within`` (and at least ``warmup_seconds`` / ``warmup_iterations`` have run), or
  ``warmup_max_seconds`` is reached; how long it took and whether it settled are reported.
* Interleaving (:func:`interleave`): round after round, each runner runs one block of
  synchronous calls (each timed: the per-request latency) and one block of calls back to
  back, synchronised once (per-call time as a serving loop sees it, what
  ``torch.utils.benchmark``'s ``blocked_autorange`` measures). Round ``r`` starts with
  runner ``r mod n``, so each runner is first, last and in between equally often.

Host timing is ``time.perf_counter`` around ``step(); synchronize()``; CUDA runs of PyTorch
are timed with CUDA events on the current stream. The clock that decides when to stop is
injectable, so the logic is tested with fake steps and clocks.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

__all__ = ["CudaEventTimer", "HostTimer", "Measurement", "Timed", "Timer", "TimingConfig", "Warmup", "block_calls",
           "interleave", "is_steady", "warm_up"]

Step = Callable[[], object]
Clock = Callable[[], float]
MAX_BLOCK_CALLS = 10_000


@dataclass(frozen=True)
class TimingConfig:
    """Warm-up: at least ``warmup_iterations`` calls and ``warmup_seconds``, then until steady
    (``steady_blocks`` block medians within ``steady_within``), at most ``warmup_max_seconds``.
    Timed: at least ``rounds`` round-robin rounds, ``min_iterations`` calls and ``min_seconds``
    of timed calls per runner, at most ``max_iterations`` calls."""

    warmup_seconds: float = 0.2
    warmup_iterations: int = 2
    min_iterations: int = 10
    min_seconds: float = 1.0
    max_iterations: int = 100_000
    warmup_max_seconds: float = 10.0
    steady_within: float = 0.03
    steady_blocks: int = 3
    block_seconds: float = 0.05
    rounds: int = 5

    def __post_init__(self) -> None:
        if self.min_iterations < 1 or self.max_iterations < self.min_iterations:
            raise ValueError("need 1 <= min_iterations <= max_iterations")
        if self.warmup_seconds < 0 or self.min_seconds < 0 or self.warmup_iterations < 0:
            raise ValueError("warm-up and durations must be >= 0")
        if self.warmup_max_seconds < self.warmup_seconds:
            raise ValueError("the warm-up cap must be >= the minimum warm-up")
        if self.steady_within <= 0 or self.steady_blocks < 2 or self.block_seconds <= 0 or self.rounds < 1:
            raise ValueError("need steady_within > 0, steady_blocks >= 2, block_seconds > 0, rounds >= 1")

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


@dataclass(frozen=True)
class Warmup:
    """How a runner's warm-up went: calls, seconds, blocks, and whether it settled before the cap."""

    iterations: int
    seconds: float
    blocks: int
    steady: bool
    last_block_s: float  # median per-call time of the last block

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_steady(block_medians: Sequence[float], within: float, window: int) -> bool:
    """True when the last ``window`` block medians agree within ``within`` (max <= min * (1 + within))."""
    if len(block_medians) < window:
        return False
    last = block_medians[-window:]
    return max(last) <= min(last) * (1.0 + within)


def block_calls(per_call_s: float, block_s: float) -> int:
    """Calls that fill a block of about ``block_s`` (1 ... MAX_BLOCK_CALLS)."""
    return max(1, min(MAX_BLOCK_CALLS, round(block_s / max(per_call_s, 1e-7))))


def warm_up(step: Step, timer: Timer, config: TimingConfig, clock: Clock = time.perf_counter) -> Warmup:
    """Run blocks of synchronous calls until steady or capped (see the module docstring)."""
    begin = clock()
    first = timer.time(step)
    medians: list[float] = [first]
    iterations = 1
    while True:
        elapsed = clock() - begin
        settled = is_steady(medians, config.steady_within, config.steady_blocks)
        if settled and iterations >= config.warmup_iterations and elapsed >= config.warmup_seconds:
            return Warmup(iterations, elapsed, len(medians), True, medians[-1])
        if elapsed >= config.warmup_max_seconds:
            return Warmup(iterations, elapsed, len(medians), False, medians[-1])
        calls = block_calls(medians[-1], config.block_seconds)
        medians.append(statistics.median(timer.time(step) for _ in range(calls)))
        iterations += calls


@dataclass(frozen=True)
class Timed:
    """One runner's prepared step, with the timer of its synchronous calls (CUDA events or the
    host clock) and the host timer of its back-to-back blocks."""

    name: str
    step: Step
    timer: Timer
    pipeline_timer: Timer


@dataclass(frozen=True)
class Measurement:
    """One runner's timed calls: ``samples`` (seconds per synchronous call) and ``pipelined``
    (seconds per call of each back-to-back block), over ``rounds`` round-robin rounds."""

    name: str
    samples: tuple[float, ...]
    pipelined: tuple[float, ...]
    rounds: int
    first_in_rounds: int  # how many rounds this runner opened


def _one_round(entry: Timed, per_call: float, config: TimingConfig, samples: list[float],
               pipelined: list[float]) -> None:
    calls = block_calls(per_call, config.block_seconds)
    samples.extend(entry.timer.time(entry.step) for _ in range(calls))
    pipelined.append(entry.pipeline_timer.time(entry.step, calls) / calls)


def _done(samples: Sequence[float], rounds: int, config: TimingConfig) -> bool:
    return rounds >= config.rounds and len(samples) >= config.min_iterations and sum(samples) >= config.min_seconds


def interleave(entries: Sequence[Timed], warmups: dict[str, Warmup], config: TimingConfig) -> list[Measurement]:
    """Round-robin blocks over warmed-up runners until every one has enough (see the module docstring)."""
    samples: dict[str, list[float]] = {e.name: [] for e in entries}
    pipelined: dict[str, list[float]] = {e.name: [] for e in entries}
    rounds = 0
    while entries and not all(_done(samples[e.name], rounds, config) for e in entries):
        if any(len(s) >= config.max_iterations for s in samples.values()):
            break
        start = rounds % len(entries)
        for entry in [*entries[start:], *entries[:start]]:
            per_call = statistics.median(samples[entry.name][-50:] or [warmups[entry.name].last_block_s])
            _one_round(entry, per_call, config, samples[entry.name], pipelined[entry.name])
        rounds += 1
    return [Measurement(e.name, tuple(samples[e.name]), tuple(pipelined[e.name]), rounds,
                        len(range(i, rounds, len(entries)))) for i, e in enumerate(entries)]
