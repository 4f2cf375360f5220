"""Lazy public names (PEP 562): a package's ``__getattr__`` that imports a name's module on first use,
so that importing the package stays cheap (no torch, no onnx until a name needs it)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """``__getattr__`` for ``package``: ``name`` comes from the module ``modules[name]``."""

    def attribute(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(modules[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return attribute
