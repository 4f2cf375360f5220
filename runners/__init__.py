"""Runners: ONNX Runtime, eager and compiled PyTorch, compared for parity and latency.

Importing this package is cheap; torch and onnxruntime load when a runner or
:func:`compare` is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "CompareReport",
    "CompiledRunner",
    "EagerRunner",
    "LatencyStats",
    "MatrixReport",
    "OnnxRuntimeRunner",
    "Runner",
    "TimingConfig",
    "ToleranceTable",
    "compare",
    "merge_reports",
    "run_matrix",
]

_WHERE = {
    "CompareReport": "portable.runners.report",
    "CompiledRunner": "portable.runners.torch_runners",
    "EagerRunner": "portable.runners.torch_runners",
    "LatencyStats": "portable.runners.stats",
    "MatrixReport": "portable.runners.matrix",
    "OnnxRuntimeRunner": "portable.runners.ort_runner",
    "Runner": "portable.runners.base",
    "TimingConfig": "portable.runners.timing",
    "ToleranceTable": "portable.runners.tolerances",
    "compare": "portable.runners.api",
    "merge_reports": "portable.runners.merge",
    "run_matrix": "portable.runners.matrix",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'portable.runners' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)
