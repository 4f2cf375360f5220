"""Peak memory probes, kept apart from the runners.

CUDA runs: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` (weights,
activations and workspace held by PyTorch's caching allocator). CPU runs: the growth of
the process's resident set size (psutil) across a span of work.
"""

from __future__ import annotations

__all__ = ["CudaPeakMemory", "RssGrowth", "rss_bytes"]


def rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


class RssGrowth:
    """Resident-set growth since ``start()`` (never negative)."""

    kind = "rss_growth"

    def __init__(self) -> None:
        self._baseline = rss_bytes()

    def start(self) -> None:
        self._baseline = rss_bytes()

    def peak(self) -> int:
        return max(0, rss_bytes() - self._baseline)


class CudaPeakMemory:
    """``torch.cuda.max_memory_allocated`` since ``start()``."""

    kind = "cuda_max_memory_allocated"

    def start(self) -> None:
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def peak(self) -> int:
        import torch

        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated())
