"""OpenVINO on the CPU: ``Core.read_model`` (its ONNX frontend) then ``compile_model(model, "CPU")``, both
through runners/sessions.py's loaders (``validate --live`` reads the model with the same one).

openvino is optional (``make targets-venv``, the ``targets`` extra): it is imported in :meth:`load`
only, and :func:`installed` says whether it is here. The CPU plugin runs float32 models in bf16 on
CPUs with AMX/AVX-512-bf16 unless told otherwise; the runner asks for ``INFERENCE_PRECISION_HINT`` f32,
the same strict numerics ``compare`` sets on every other side.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import one_line
from portable.runners.base import Feeds, Runner, RunnerFailed, Step
from portable.runners.sessions import openvino_compiled, openvino_model

__all__ = ["OpenVinoRunner"]

PACKAGE = "openvino"
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}  # strict fp32, as the ORT and PyTorch sides


class OpenVinoRunner(Runner):
    """One OpenVINO CPU compiled model; dynamic axes stay dynamic (OpenVINO reshapes per call)."""

    kind = "openvino"
    device = "cpu"

    def __init__(self, model_path: str | Path, *, name: str = "openvino") -> None:
        super().__init__()
        self.model_path, self.name = str(model_path), name
        self._compiled: Any = None
        self.version: str | None = None

    def load(self) -> None:
        """Read and compile the file (runners/sessions.py's loaders: an op the frontend does not translate
        fails here, as :class:`~portable.runners.sessions.LoadFailed`)."""
        import openvino as ov

        start = time.perf_counter()
        self.version = ov.get_version()
        self._compiled = openvino_compiled(*openvino_model(self.model_path), "CPU", CONFIG)
        self.load_seconds = time.perf_counter() - start

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        compiled = self._loaded(self._compiled)
        try:
            results = compiled(dict(feeds))
        except Exception as exc:  # noqa: BLE001
            raise RunnerFailed(f"OpenVINO failed to run: {one_line(exc, limit=400)}") from None
        return [np.array(results[out]) for out in compiled.outputs]

    def prepare(self, feeds: Feeds) -> Step:
        request, given = self._loaded(self._compiled).create_infer_request(), dict(feeds)
        return lambda: request.infer(given)

    def unload(self) -> None:
        self._compiled = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": self.version, "config": dict(CONFIG)}
