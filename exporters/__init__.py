"""The exporter: PyTorch module -> one portable, deterministic, validated ONNX file.

``portable.exporters.export(module, example_inputs, path, batch="dynamic", precision="fp32",
policy=None) -> ExportResult``; :func:`precheck` reports data-dependent control flow and
graph breaks before export. Importing this package does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DEMO_SPECS", "ExportFailed", "ExportResult", "FixFailed", "FixResult", "demo_models", "export",
           "export_spec", "fix", "precheck"]

_LAZY = {
    "ExportFailed": "portable.exporters.api",
    "ExportResult": "portable.exporters.api",
    "export": "portable.exporters.api",
    "export_spec": "portable.exporters.spec_export",
    "precheck": "portable.exporters.precheck",
    "fix": "portable.exporters.fix",
    "FixResult": "portable.exporters.fix",
    "FixFailed": "portable.exporters.fix",
    "DEMO_SPECS": "portable.exporters.demo",
    "demo_models": "portable.exporters.demo",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'portable.exporters' has no attribute {name!r}")
