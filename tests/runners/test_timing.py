"""The steady-state warm-up and the round-robin interleaving, with fake steps and clocks (no timed tests)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from portable.runners.timing import (
    Timed,
    TimingConfig,
    Warmup,
    block_calls,
    interleave,
    is_steady,
    warm_up,
)


class FakeClock:
    """Seconds of fake time; the fake timers advance it by what they report."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeDevice:
    """Shared by all fake runners: a device whose calls start ``cold_factor`` times slower and speed
    up linearly until ``cold_s`` of fake time (clocks ramping up, caches and autotuning settling)."""

    def __init__(self, clock: FakeClock, cold_s: float = 0.0, cold_factor: float = 1.0) -> None:
        self.clock, self.cold_s, self.cold_factor = clock, cold_s, cold_factor
        self.log: list[str] = []

    def timer(self, name: str, per_call: float | Callable[[int], float]) -> FakeTimer:
        return FakeTimer(self, name, per_call)


class FakeTimer:
    """Reports ``per_call`` seconds a call (or ``per_call(i)`` for the i-th call), slower while the
    device is cold, and advances the fake clock by it; logs which runner ran."""

    name = "fake"

    def __init__(self, device: FakeDevice, runner: str, per_call: float | Callable[[int], float]) -> None:
        self.device, self.runner, self.per_call = device, runner, per_call
        self.calls = 0

    def time(self, step: object, calls: int = 1) -> float:
        total = 0.0
        for _ in range(calls):
            base = self.per_call(self.calls) if callable(self.per_call) else self.per_call
            left = max(0.0, 1.0 - (self.device.clock.now + total) / self.device.cold_s) if self.device.cold_s else 0
            total += base * (1.0 + (self.device.cold_factor - 1.0) * left)
            self.calls += 1
        self.device.clock.now += total
        self.device.log.append(self.runner)
        return total


def config(**kw: float) -> TimingConfig:
    base = {"warmup_seconds": 0.0, "warmup_iterations": 0, "min_iterations": 1, "min_seconds": 0.0,
            "warmup_max_seconds": 10.0, "block_seconds": 0.01, "rounds": 3}
    return TimingConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_is_steady_needs_the_last_blocks_within_the_band() -> None:
    assert is_steady([5.0, 2.0, 1.0, 1.01, 1.02], 0.03, 3)
    assert not is_steady([5.0, 2.0, 1.0, 1.01, 1.05], 0.03, 3)
    assert not is_steady([1.0, 1.0], 0.03, 3)  # too few blocks


def test_block_calls_fill_the_block_and_are_bounded() -> None:
    assert block_calls(0.001, 0.05) == 50
    assert block_calls(1.0, 0.05) == 1
    assert block_calls(0.0, 0.05) == 10_000


def test_warm_up_runs_until_the_blocks_agree_and_reports_it() -> None:
    clock = FakeClock()
    # 10 ms calls that get faster by 0.45 ms a call (more than the 3 % band) until call 20, then stay at 1 ms
    timer = FakeDevice(clock).timer("a", lambda i: max(0.001, 0.01 - i * 4.5e-4))
    warm = warm_up(lambda: None, timer, config(), clock)
    assert warm.steady and warm.last_block_s == pytest.approx(0.001)
    assert warm.iterations == timer.calls and warm.iterations > 20  # went past the ramp
    assert warm.seconds == pytest.approx(clock.now)


def test_warm_up_stops_at_the_cap_when_never_steady() -> None:
    clock = FakeClock()
    timer = FakeDevice(clock).timer("a", lambda i: 0.001 * (1 + (i // 10) % 2))  # blocks alternate 1 ms / 2 ms
    warm = warm_up(lambda: None, timer, config(warmup_max_seconds=0.5), clock)
    assert not warm.steady
    assert 0.5 <= warm.seconds < 0.6


def test_warm_up_honours_its_minimum_even_when_steady_at_once() -> None:
    clock = FakeClock()
    warm = warm_up(lambda: None, FakeDevice(clock).timer("a", 0.001), config(warmup_seconds=0.2), clock)
    assert warm.steady and warm.seconds >= 0.2


def test_interleave_runs_round_robin_blocks_each_round_opened_by_the_next_runner() -> None:
    device = FakeDevice(FakeClock())
    entries = [Timed(n, lambda: None, device.timer(n, t), device.timer(n, t)) for n, t in
               (("a", 0.001), ("b", 0.002), ("c", 0.004))]
    warm = {e.name: Warmup(1, 0.0, 1, True, e.timer.per_call) for e in entries}  # type: ignore[attr-defined]
    measured = interleave(entries, warm, config(rounds=6))
    assert [m.rounds for m in measured] == [6, 6, 6]
    assert [m.first_in_rounds for m in measured] == [2, 2, 2]
    # a turn: one runner's timed calls then its back-to-back block, uninterrupted; three turns a round
    turns = [name for i, name in enumerate(device.log) if i == 0 or device.log[i - 1] != name]
    assert turns == ["a", "b", "c", "b", "c", "a", "c", "a", "b"] * 2
    by = {m.name: m for m in measured}
    assert by["b"].pipelined[0] == pytest.approx(0.002) and len(by["c"].pipelined) == 6


def test_interleave_stops_only_when_every_runner_has_enough() -> None:
    device = FakeDevice(FakeClock())
    entries = [Timed(n, lambda: None, device.timer(n, t), device.timer(n, t)) for n, t in
               (("fast", 0.001), ("slow", 0.1))]
    warm = {"fast": Warmup(1, 0, 1, True, 0.001), "slow": Warmup(1, 0, 1, True, 0.1)}
    measured = {m.name: m for m in interleave(entries, warm, config(min_seconds=0.5, min_iterations=7, rounds=1))}
    assert sum(measured["fast"].samples) >= 0.5 and sum(measured["slow"].samples) >= 0.5
    assert len(measured["slow"].samples) >= 7


def _figures(order: list[str], device: FakeDevice, cfg: TimingConfig) -> dict[str, float]:
    truth = {"a": 0.002, "b": 0.003}
    entries = [Timed(n, lambda: None, device.timer(n, truth[n]), device.timer(n, truth[n])) for n in order]
    warm = {e.name: warm_up(e.step, e.timer, cfg, device.clock) for e in entries}
    return {m.name: sorted(m.samples)[len(m.samples) // 2] for m in interleave(entries, warm, cfg)}


def test_a_cold_device_biases_neither_runner_whatever_the_order() -> None:
    """The device starts 2x slow and reaches full speed at 0.3 s. A fixed 50 ms warm-up would
    leave the first runner timed cold; warming until steady and interleaving gives both their
    true figures in either order."""
    cfg = config(warmup_seconds=0.05, min_seconds=0.2, rounds=5)
    forward = _figures(["a", "b"], FakeDevice(FakeClock(), cold_s=0.3, cold_factor=2.0), cfg)
    backward = _figures(["b", "a"], FakeDevice(FakeClock(), cold_s=0.3, cold_factor=2.0), cfg)
    assert forward == pytest.approx({"a": 0.002, "b": 0.003}) and backward == pytest.approx(forward)


def test_a_fixed_short_warm_up_would_be_biased_by_order() -> None:
    """The same cold device with the steadiness test defeated (cap = minimum = 50 ms): the first
    runner's median reads slow. This is the failure the steady warm-up removes."""
    cfg = config(warmup_seconds=0.05, warmup_max_seconds=0.05, min_seconds=0.02, rounds=1)
    device = FakeDevice(FakeClock(), cold_s=0.3, cold_factor=2.0)
    entry = Timed("a", lambda: None, device.timer("a", 0.002), device.timer("a", 0.002))
    warm = {"a": warm_up(entry.step, entry.timer, cfg, device.clock)}
    assert not warm["a"].steady
    (measured,) = interleave([entry], warm, cfg)
    assert sorted(measured.samples)[len(measured.samples) // 2] > 0.002 * 1.3


def test_timing_config_rejects_a_cap_below_the_minimum() -> None:
    with pytest.raises(ValueError):
        TimingConfig(warmup_seconds=1.0, warmup_max_seconds=0.5)
    with pytest.raises(ValueError):
        TimingConfig(steady_blocks=1)
