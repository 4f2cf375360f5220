"""The exporter: PyTorch module -> one portable, deterministic, validated ONNX file.

``portable.exporters.export(module, example_inputs, path, batch="dynamic", precision="fp32",
policy=None) -> ExportResult``; ``portable.exporters.precheck.precheck`` reports data-dependent control
flow and graph breaks before export. Importing this package does not import torch. No lazy name here is
also the name of a module of the package (``precheck`` and ``fix`` were: the name meant the function
until that module was imported, and the module afterwards).
"""

from __future__ import annotations

from portable._lazy import lazy_getattr

__all__ = ["ExportFailed", "ExportResult", "export", "export_spec"]

_LAZY = {
    "ExportFailed": "portable.exporters.api",
    "ExportResult": "portable.exporters.api",
    "export": "portable.exporters.api",
    "export_spec": "portable.exporters.spec_export",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
