"""tract (sonos/tract, its Python package ``tract``, 0.23 API): ``tract.onnx().load(path)``, then
``into_model()`` (typing, where an op without a builder or a shape it cannot infer fails) and
``into_runnable()`` (which optimizes), then ``run`` on the feeds.

The input facts are the file's own: a symbolic batch stays a tract symbol and one runnable serves
every batch size. Setting concrete facts instead (``1,3,224,224,f32``) fails on portable's exports,
whose ``value_info`` keeps the symbol (``Impossible to unify Sym(batch) with Val(1)``).
tract is optional (``make targets-venv``); it is imported in :meth:`load` only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from portable.runners.base import Feeds, Runner, RunnerFailed, Step

__all__ = ["TractRunner"]

PACKAGE = "tract"


def _first_line(exc: BaseException) -> str:
    """tract's error without its Rust backtrace: the message and its causes."""
    text = " ".join(str(exc).split("Stack backtrace:")[0].split())
    return f"{type(exc).__name__}: {text[:400]}"


class TractRunner(Runner):
    """tract's ONNX loader and its optimized runnable."""

    kind = "tract"
    device = "cpu"

    def __init__(self, model_path: str | Path, *, name: str = "tract") -> None:
        super().__init__()
        self.model_path, self.name = str(model_path), name
        self._runnable: Any = None
        self.version: str | None = None

    def load(self) -> None:
        import tract

        start = time.perf_counter()
        self.version = tract.version() if hasattr(tract, "version") else None
        try:
            inference = tract.onnx().load(self.model_path)
        except Exception as exc:  # noqa: BLE001 - the loader's refusal is this runner's failure
            raise RunnerFailed(f"tract does not load the model: {_first_line(exc)}") from None
        try:
            self._runnable = inference.into_model().into_runnable()
        except Exception as exc:  # noqa: BLE001
            raise RunnerFailed(f"tract cannot type or optimize the model: {_first_line(exc)}") from None
        self.load_seconds = time.perf_counter() - start

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        if self._runnable is None:
            raise RuntimeError(f"{self.name}: load() first")
        arrays = [np.ascontiguousarray(a) for a in feeds.values()]  # the graph's input order (make_feeds')
        try:
            return [np.array(v.to_numpy()) for v in self._runnable.run(arrays)]
        except Exception as exc:  # noqa: BLE001
            raise RunnerFailed(f"tract failed to run: {_first_line(exc)}") from None

    def prepare(self, feeds: Feeds) -> Step:
        runnable, arrays = self._runnable, [np.ascontiguousarray(a) for a in feeds.values()]
        return lambda: runnable.run(arrays)

    def unload(self) -> None:
        self._runnable = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": self.version}
