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
    "QuantizeFailed",
    "QuantizeResult",
    "ValidationReport",
    "__version__",
    "compare",
    "export",
    "fix",
    "inspect",
    "load_policy",
    "quantize",
    "validate",
]

# Each name from the module that defines it, not from its package (a package's attribute of a module's
# name becomes that module once the module is imported).
_LAZY = {
    "validate": "portable.validators.engine",
    "Policy": "portable.policy",
    "load_policy": "portable.policy",
    "ValidationReport": "portable.report",
    "export": "portable.exporters.api",
    "ExportResult": "portable.exporters.api",
    "ExportFailed": "portable.exporters.api",
    "compare": "portable.runners.api",
    "fix": "portable.repair.api",
    "inspect": "portable.validators.summary",
    "FixResult": "portable.repair.records",
    "FixFailed": "portable.repair.records",
    "quantize": "portable.quantization.api",
    "QuantizeResult": "portable.quantization.result",
    "QuantizeFailed": "portable.quantization.result",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
