"""portable: export PyTorch models to portable ONNX, validate the contract, compare runtimes.

The public API is imported lazily, so ``import portable`` stays cheap (no torch).
"""

from __future__ import annotations

from portable._lazy import lazy_getattr
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

__getattr__ = lazy_getattr(__name__, _LAZY)
