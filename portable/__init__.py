"""portable: export PyTorch models to portable ONNX, validate the contract, compare runtimes.

The public API is imported lazily, so ``import portable`` stays cheap (no torch).
"""

from __future__ import annotations

import importlib
from typing import Any

from portable._version import __version__

__all__ = [
    "ExportFailed",
    "ExportResult",
    "FixFailed",
    "FixResult",
    "Policy",
    "ValidationReport",
    "__version__",
    "compare",
    "export",
    "fix",
    "load_policy",
    "validate",
]

_LAZY = {
    "validate": "portable.validators.engine",
    "Policy": "portable.policy",
    "load_policy": "portable.policy",
    "ValidationReport": "portable.report",
    "export": "portable.exporters",
    "ExportResult": "portable.exporters",
    "ExportFailed": "portable.exporters",
    "compare": "portable.runners",
    "fix": "portable.exporters",
    "FixResult": "portable.exporters",
    "FixFailed": "portable.exporters",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'portable' has no attribute {name!r}")
