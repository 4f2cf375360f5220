"""tract (sonos/tract, its Python package ``tract``, 0.23 API): ``tract.onnx().load(path)``, the input facts
set to the feeds' shapes and types, ``into_model().into_runnable()`` (which optimizes), ``run``.

tract is optional (``make targets-venv``); it is imported in :meth:`load` only. tract plans one
model per concrete input shape, so the runner keeps one runnable per shape (batch 1 and 3: two).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import one_line
from portable.runners.base import Feeds, Runner, RunnerFailed, Step

__all__ = ["TractRunner", "tract_fact"]

PACKAGE = "tract"
_DATUM = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32", "int16": "i16",
          "int8": "i8", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool"}


def tract_fact(array: np.ndarray) -> str:
    """tract's fact string for a concrete input: ``1,3,224,224,f32``."""
    datum = _DATUM.get(np.asarray(array).dtype.name)
    if datum is None:
        raise RunnerFailed(f"tract: no datum type for a {np.asarray(array).dtype} input")
    return ",".join([*map(str, np.shape(array)), datum])


class TractRunner(Runner):
    """tract's ONNX loader, one optimized runnable per input shape."""

    kind = "tract"
    device = "cpu"

    def __init__(self, model_path: str | Path, *, name: str = "tract") -> None:
        super().__init__()
        self.model_path, self.name = str(model_path), name
        self._runnables: dict[tuple[tuple[int, ...], ...], Any] = {}
        self._tract: Any = None
        self.version: str | None = None

    def _inference_model(self) -> Any:
        try:
            return self._tract.onnx().load(self.model_path)
        except Exception as exc:  # noqa: BLE001 - the loader's refusal is this runner's failure
            raise RunnerFailed(f"tract does not load the model: {one_line(exc, limit=400)}") from None

    def load(self) -> None:
        """Parse the file (tract's loader: an op without a builder fails here)."""
        import tract

        start = time.perf_counter()
        self._tract = tract
        self.version = tract.version()
        self._inference_model()
        self.load_seconds = time.perf_counter() - start

    def _runnable(self, arrays: list[np.ndarray]) -> Any:
        key = tuple(a.shape for a in arrays)
        if key not in self._runnables:
            model = self._inference_model()
            try:
                for index, array in enumerate(arrays):
                    model.set_input_fact(index, tract_fact(array))
                self._runnables[key] = model.into_model().into_runnable()  # into_runnable optimizes
            except RunnerFailed:
                raise
            except Exception as exc:  # noqa: BLE001
                raise RunnerFailed(f"tract cannot plan the model for inputs {list(key)}: "
                                   f"{one_line(exc, limit=400)}") from None
        return self._runnables[key]

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        if self._tract is None:
            raise RuntimeError(f"{self.name}: load() first")
        arrays = [np.ascontiguousarray(a) for a in feeds.values()]  # the graph's input order (make_feeds')
        runnable = self._runnable(arrays)
        try:
            return [np.array(v.to_numpy()) for v in runnable.run(arrays)]
        except Exception as exc:  # noqa: BLE001
            raise RunnerFailed(f"tract failed to run: {one_line(exc, limit=400)}") from None

    def prepare(self, feeds: Feeds) -> Step:
        arrays = [np.ascontiguousarray(a) for a in feeds.values()]
        runnable = self._runnable(arrays)
        return lambda: runnable.run(arrays)

    def unload(self) -> None:
        self._runnables = {}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": self.version}
