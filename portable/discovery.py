"""Turning command-line paths into the list of model files to check."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Target", "collect_models"]


@dataclass(frozen=True)
class Target:
    """A model path to validate, or a path that gave none (``error`` says why)."""

    path: str
    error: str | None = None


def collect_models(paths: Iterable[str | Path]) -> Iterator[Target]:
    """Files as given; folders searched recursively for ``*.onnx`` (sorted, so runs are stable)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.onnx") if p.is_file())
            if not found:
                yield Target(str(raw), "directory holds no .onnx files")
            for model in found:
                yield Target(str(model))
        else:
            yield Target(str(raw))
