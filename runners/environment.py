"""What the run happened on: versions, processor, GPU."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

__all__ = ["describe_environment", "default_device"]


def default_device() -> str:
    """``cuda`` when PyTorch sees a CUDA device, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def describe_environment() -> dict[str, Any]:
    import onnxruntime as ort
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "onnxruntime": ort.__version__,
        "ort_providers": ort.get_available_providers(),
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "gpu": gpu,
        "target": gpu or f"cpu-{platform.machine()}",
    }
