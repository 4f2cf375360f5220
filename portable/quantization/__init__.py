"""``portable quantize``: static 8-bit QDQ quantization through ONNX Runtime's own tooling, of a
portable model into a portable one, with its accuracy and speed cost measured.

A package of the ground floor (``portable/``): quantization spans the three upper folders
(the validators check the input and the result, the exporters' artefact step writes it, the
runners' timing measures it), so it belongs to none of them; it imports them inside the
functions that use them, as the API and the CLI do. Importing it is cheap (no onnxruntime).
"""

from __future__ import annotations

from portable._lazy import lazy_getattr

__all__ = ["TARGETS", "QuantizeFailed", "QuantizeResult", "quantize"]

_LAZY = {
    "quantize": "portable.quantization.api",
    "QuantizeResult": "portable.quantization.result",
    "QuantizeFailed": "portable.quantization.result",
    "TARGETS": "portable.quantization.targets",
}

__getattr__ = lazy_getattr(__name__, _LAZY)
