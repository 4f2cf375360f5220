"""Latency statistics from recorded samples: percentiles, mean, spread, throughput.

Percentiles use linear interpolation between closest ranks (NumPy's default ``linear``
method, Hyndman & Fan type 7), so ``p50`` of an even-sized list is the mean of its two
middle samples. ``stdev`` is the sample standard deviation (n - 1 in the denominator).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LatencyStats", "percentile"]


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``samples`` by linear interpolation."""
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class LatencyStats:
    """Summary of per-iteration latencies (seconds) for one runner at one batch size."""

    iterations: int
    batch: int
    mean_s: float
    stdev_s: float
    cv: float  # coefficient of variation: stdev / mean
    min_s: float
    max_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    throughput: float  # samples (batch items) per second, from the mean latency

    @classmethod
    def from_samples(cls, samples: Sequence[float], batch: int) -> LatencyStats:
        if not samples:
            raise ValueError("no latency samples")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        mean = statistics.fmean(samples)
        stdev = statistics.stdev(samples) if len(samples) > 1 else 0.0
        return cls(
            iterations=len(samples),
            batch=batch,
            mean_s=mean,
            stdev_s=stdev,
            cv=stdev / mean if mean > 0 else 0.0,
            min_s=min(samples),
            max_s=max(samples),
            p50_s=percentile(samples, 50),
            p90_s=percentile(samples, 90),
            p99_s=percentile(samples, 99),
            throughput=batch / mean if mean > 0 else math.inf,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
