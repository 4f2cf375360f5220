"""Peak memory probes, kept apart from the runners.

* PyTorch on CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``
  (tensors held by PyTorch's caching allocator: weights, activations, cuDNN workspace; not the
  CUDA context, not the allocator's cached but free blocks).
* ONNX Runtime on CUDA: the growth of the device memory this process holds, read from NVML
  (``nvmlDeviceGetComputeRunningProcesses``; the whole device's used memory where the process is
  not listed, e.g. in a container), across the session's load and its first runs. ONNX Runtime
  exposes no arena statistics to Python; its BFC arena does not shrink, so the growth is the
  arena's high-water mark plus the cuDNN/cuBLAS handles and workspaces it created. Without
  NVML (``nvidia-ml-py``), ``cudaMemGetInfo`` through ``torch.cuda.mem_get_info`` (device-wide).
* CPU runs: the growth of the process's resident set size (psutil) across a span of work.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["CudaPeakMemory", "DeviceMemoryGrowth", "Reader", "RssGrowth", "nvml_reader", "rss_bytes"]


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


Reader = Callable[[], tuple[int | None, int]]  # -> (this process's bytes or None, the device's bytes)


def _visible_index() -> int:
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def nvml_reader() -> Reader | None:
    """A reader of device memory in use through NVML, or ``None`` without ``pynvml``."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(_visible_index())
    except pynvml.NVMLError:  # no driver or no such device: fall back to cudaMemGetInfo
        return None
    pid = os.getpid()

    def read() -> tuple[int | None, int]:
        mine = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                if p.pid == pid and p.usedGpuMemory is not None]
        return (int(mine[0]) if mine else None), int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)

    return read


def _cuda_mem_get_info() -> tuple[int | None, int]:
    import torch

    free, total = torch.cuda.mem_get_info()
    return None, int(total - free)


class DeviceMemoryGrowth:
    """Device memory held by this process grown since ``start()`` (NVML; the whole device's
    where NVML does not list the process): for ONNX Runtime's arena, which reports no
    statistics of its own (see the module docstring)."""

    def __init__(self, reader: Reader | None = None) -> None:
        self._read: Reader = reader or nvml_reader() or _cuda_mem_get_info
        self._source = "nvml" if reader is not None or self._read is not _cuda_mem_get_info else "cuda_mem_get_info"
        self._baseline: tuple[int | None, int] = (None, 0)
        self.kind = f"{self._source}_device_used_growth"

    def start(self) -> None:
        self._baseline = self._read()

    def peak(self) -> int:
        mine, device = self._read()
        if mine is not None and self._baseline[0] is not None:
            self.kind = f"{self._source}_process_used_growth"
            return max(0, mine - self._baseline[0])
        self.kind = f"{self._source}_device_used_growth"
        return max(0, device - self._baseline[1])
