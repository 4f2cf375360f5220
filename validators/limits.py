"""Size limits shared by the lean parse and the shape analysis, in a module of their own so that
loading a model does not import the analysis (start-up: ``portable validate`` on a small file)."""

from __future__ import annotations

__all__ = ["SMALL_TENSOR"]

# Initializers above this many elements stay out of the analysis copy (same limit as
# onnxscript's folder input_size_limit, so nothing it could fold is lost); the lean parse
# strips the payloads of exactly those.
SMALL_TENSOR = 8192
