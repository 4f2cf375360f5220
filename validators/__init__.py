"""Portability validators: rules with stable ids over ONNX model files."""

from __future__ import annotations

from portable.validators.engine import select_rules, validate, validate_bytes, validate_held, validate_proto
from portable.validators.rules import ALL_RULES, get_rule

__all__ = ["ALL_RULES", "get_rule", "select_rules", "validate", "validate_bytes", "validate_held", "validate_proto"]
