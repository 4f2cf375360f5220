"""tract (sonos/tract, its Python package ``tract``, 0.23 API): ``tract.onnx().load(path)``, then
``into_model()`` (typing, where an op without a builder or a shape it cannot infer fails) and
``into_runnable()`` (which optimizes), then ``run`` on the feeds.

The input facts are the file's own; the symbolic batch is then bound per batch size with tract's
``SetSymbols`` transform (one runnable per size), as a deployment with a fixed batch would: left
symbolic, tract fails to run some ops (``Resize``: "Undetermined symbol in expression: batch", the zoo's
DeepLabV3). Setting concrete input facts instead (``1,3,224,224,f32``) fails on portable's exports,
whose ``value_info`` keeps the symbol (``Impossible to unify Sym(batch) with Val(1)``).
tract is optional (``make targets-venv``); it is imported in :meth:`load` only. The file is loaded and typed by
runners/sessions.py's :func:`~portable.runners.sessions.tract_model`, the loader ``validate --live`` uses too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from portable.runners.base import Feeds, Runner, RunnerFailed, Step
from portable.runners.sessions import tract_message, tract_model

__all__ = ["TractRunner"]

PACKAGE = "tract"


class TractRunner(Runner):
    """tract's ONNX loader and its optimized runnable."""

    kind = "tract"
    device = "cpu"

    def __init__(self, model_path: str | Path, *, name: str = "tract") -> None:
        super().__init__()
        self.model_path, self.name = str(model_path), name
        self._runnables: dict[tuple[tuple[str, int], ...], Any] = {}
        self._specs: list[Any] = []
        self._tract: Any = None
        self.version: str | None = None

    def load(self) -> None:
        """Load and type the file (an op without a builder, a shape tract cannot infer: fails here)."""
        import tract

        from portable.runners.inputs import graph_io

        start = time.perf_counter()
        self._tract = tract
        self.version = tract.version() if hasattr(tract, "version") else None
        self._specs = graph_io(self.model_path)[0]
        tract_model(self.model_path)
        self.load_seconds = time.perf_counter() - start

    def _runnable(self, feeds: Feeds) -> Any:
        """The runnable for these feeds' sizes of the symbolic axes (one per batch size)."""
        sizes = {d: int(np.shape(feeds[spec.name])[axis]) for spec in self._specs
                 for axis, d in enumerate(spec.shape) if isinstance(d, str)}
        key = tuple(sorted(sizes.items()))
        if key not in self._runnables:
            from tract.transform import SetSymbols

            model = tract_model(self.model_path)
            try:
                if sizes:
                    model.transform(SetSymbols(dict(sizes)))
                self._runnables[key] = model.into_runnable()
            except Exception as exc:  # noqa: BLE001
                raise RunnerFailed(f"tract cannot optimize the model for {dict(sizes)}: {tract_message(exc)}") from None
        return self._runnables[key]

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        self._loaded(self._tract)
        runnable = self._runnable(feeds)
        arrays = [np.ascontiguousarray(a) for a in feeds.values()]  # the graph's input order (make_feeds')
        try:
            return [np.array(v.to_numpy()) for v in runnable.run(arrays)]
        except Exception as exc:  # noqa: BLE001
            raise RunnerFailed(f"tract failed to run: {tract_message(exc)}") from None

    def prepare(self, feeds: Feeds) -> Step:
        self._loaded(self._tract)
        runnable, arrays = self._runnable(feeds), [np.ascontiguousarray(a) for a in feeds.values()]
        return lambda: runnable.run(arrays)

    def unload(self) -> None:
        self._runnables = {}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": self.version}
