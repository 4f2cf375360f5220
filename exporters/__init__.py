"""The exporter: PyTorch module -> one portable, deterministic, validated ONNX file.

``portable.exporters.export(module, example_inputs, path, batch="dynamic", precision="fp32",
policy=None) -> ExportResult``; :func:`precheck` reports data-dependent control flow and
graph breaks before export. Importing this package does not import torch.
"""

from __future__ import annotations

from portable._lazy import lazy_getattr

__all__ = ["ExportFailed", "ExportResult", "FixFailed", "FixResult", "export", "export_spec", "fix", "precheck"]

_LAZY = {
    "ExportFailed": "portable.exporters.api",
    "ExportResult": "portable.exporters.api",
    "export": "portable.exporters.api",
    "export_spec": "portable.exporters.spec_export",
    "precheck": "portable.exporters.precheck",
    "fix": "portable.exporters.fix",
    "FixResult": "portable.exporters.fix",
    "FixFailed": "portable.exporters.fix",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
