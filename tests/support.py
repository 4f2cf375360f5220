"""Test support shared by every test module (importable: pytest's pythonpath holds tests/)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]  # the checkout
FIXTURES = ROOT / "fixtures"


def _load_build():
    spec = importlib.util.spec_from_file_location("portable_rule_fixtures", FIXTURES / "rules" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rule_fixtures = _load_build()


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path
