"""Latency statistics and the timing loop, on fixed sample lists and fake timers (no wall clock)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from portable.runners.stats import LatencyStats, percentile
from portable.runners.timing import HostTimer, TimingConfig

TEN = [float(v) for v in range(1, 11)]  # 1..10


@pytest.mark.parametrize(("q", "expected"), [(0, 1.0), (50, 5.5), (90, 9.1), (99, 9.91), (100, 10.0)])
def test_percentile_interpolates_linearly(q: float, expected: float) -> None:
    assert percentile(list(reversed(TEN)), q) == pytest.approx(expected)


@pytest.mark.parametrize("samples", [[0.3, 0.1, 0.2], [5.0], [1.0, 1.0, 9.0, 2.5, 7.25, 0.5, 3.0]])
@pytest.mark.parametrize("q", [0, 10, 50, 90, 99, 100])
def test_percentile_matches_numpy_linear(samples: list[float], q: float) -> None:
    assert percentile(samples, q) == pytest.approx(float(np.percentile(samples, q)))


def test_percentile_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_latency_stats_from_fixed_samples() -> None:
    stats = LatencyStats.from_samples([s / 1000 for s in TEN], batch=8)  # 1..10 ms
    assert stats.iterations == 10
    assert stats.mean_s == pytest.approx(5.5e-3)
    assert stats.stdev_s == pytest.approx(math.sqrt(55 / 6) * 1e-3)  # sample stdev: 3.0277 ms
    assert stats.cv == pytest.approx(math.sqrt(55 / 6) / 5.5)
    assert (stats.p50_s, stats.p90_s, stats.p99_s) == pytest.approx((5.5e-3, 9.1e-3, 9.91e-3))
    assert (stats.min_s, stats.max_s) == (1e-3, 10e-3)
    assert stats.throughput == pytest.approx(8 / 5.5e-3)  # samples per second


def test_latency_stats_of_one_sample_and_constant_samples() -> None:
    one = LatencyStats.from_samples([0.004], batch=1)
    assert (one.stdev_s, one.cv, one.p99_s, one.throughput) == (0.0, 0.0, 0.004, pytest.approx(250.0))
    flat = LatencyStats.from_samples([0.002] * 5, batch=32)
    assert flat.cv == 0.0 and flat.throughput == pytest.approx(16000.0)


def test_latency_stats_rejects_empty_and_bad_batch() -> None:
    with pytest.raises(ValueError):
        LatencyStats.from_samples([], batch=1)
    with pytest.raises(ValueError):
        LatencyStats.from_samples([0.1], batch=0)


def test_timing_config_validates() -> None:
    with pytest.raises(ValueError):
        TimingConfig(min_iterations=0)
    with pytest.raises(ValueError):
        TimingConfig(min_seconds=-1)


def test_host_timer_synchronises_after_each_step() -> None:
    order: list[str] = []
    timer = HostTimer(lambda: order.append("sync"))
    timer.time(lambda: order.append("step"))
    assert order == ["step", "sync"]


def test_host_timer_synchronises_once_per_block() -> None:
    order: list[str] = []
    timer = HostTimer(lambda: order.append("sync"))
    timer.time(lambda: order.append("step"), calls=3)
    assert order == ["step", "step", "step", "sync"]


