"""transformers imports torchvision when it is installed (``make zoo-venv``); PyPI's torchvision is a CUDA
build whose ops do not load beside the CPU torch, so define them first, as the zoo's harness does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("torchvision") is not None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.zoo.tvops import register_torchvision_ops

    register_torchvision_ops()
