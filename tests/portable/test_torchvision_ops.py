"""PyPI's torchvision (a CUDA build) beside the CPU torch (``make zoo-venv``): a model folder and a SPEC of
torchvision's still load, each in a fresh process (the suite's conftest defines the ops for itself, so only a fresh
process shows what a user's does). Skips where torchvision is not installed (CI's ``make test``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed "
                                "(make zoo-venv installs PyPI's)")

FOLDER = """
from portable.hf.folder import require_transformers
require_transformers()
from transformers import BertConfig, BertModel
BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8))
print("loaded")
"""
SPEC = """
from portable.spec import load_spec
print(type(load_spec("torchvision.models:resnet18").module).__name__)
"""


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)


def test_a_folder_loads_through_transformers_beside_pypis_torchvision() -> None:
    done = _fresh(FOLDER)  # without the ops: "Could not import module 'BertModel'"
    assert done.returncode == 0 and done.stdout.strip() == "loaded", done.stderr[-1500:]


def test_a_spec_of_torchvisions_imports_it() -> None:
    done = _fresh(SPEC)
    assert done.returncode == 0 and done.stdout.strip() == "ResNet", done.stderr[-1500:]
