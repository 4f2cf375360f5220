"""Qualcomm's HTP, simulated on x86-64: onnxruntime-qnn's QNN execution provider with its HTP backend, through
runners/sessions.py's one factory (:func:`~portable.runners.sessions.qnn_htp`, the spec ``validate --target qnn
--live`` uses too).

The HTP computes with the NPU's arithmetic: a QDQ file runs in integer (uint8/int8 activations and weights, the
HTP's own requantization and rounding), and its outputs are not ONNX Runtime CPU's emulation of the same file,
which is what ``compare --runtime ort,qnn`` measures. A float file is computed in float32 by the x86-64
simulator (measured: 1.2e-7 max abs on the tiny CNN against PyTorch), where a device runs it in fp16 by default
(the EP's ``enable_htp_fp16_precision``): the simulator does not show that. Nodes the HTP refuses run on ONNX
Runtime's CPU provider beside it, as on the device.

QNN needs every dim fixed: a file with a symbolic batch gets one session per batch size it is run at, the
batch fixed by ONNX Runtime's free-dimension override (as a copy at that batch would be). onnxruntime-qnn is
optional (the ``qnn`` extra) and imported in :meth:`load` only; the simulator is slow (about 1 s a MobileNetV2
image on one core), so :meth:`prepare` exists for the interface and no latency of it means anything for a phone.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import one_line
from portable.runners.base import Feeds, Runner, RunnerFailed, Step
from portable.runners.sessions import FATAL, qnn_htp, qnn_version, session_from_onnx

__all__ = ["HELD_OUT_CAP", "QnnRunner", "htp_outputs"]

PACKAGE = "onnxruntime_qnn"
# Held-out samples run on the simulator at most (about 1 s a MobileNetV2-sized image on one core): the HTP's
# accuracy figures are over the first HELD_OUT_CAP samples, and say so
HELD_OUT_CAP = 48


class QnnRunner(Runner):
    """The QNN EP on the HTP simulator, one session per batch size (QNN needs fixed dims)."""

    kind = "qnn-htp"
    device = "cpu"  # the simulator runs on the host

    def __init__(self, model_path: str | Path, *, name: str = "qnn") -> None:
        super().__init__()
        self.model_path, self.name = str(model_path), name
        self._sessions: dict[int, Any] | None = None
        self._symbols: tuple[str, ...] = ()
        self.batch = 1  # the samples one run takes: the file's static batch, else 1
        self.version: str | None = None

    def load(self) -> None:
        """The session at batch 1 (a compile failure of the HTP fails here, as
        :class:`~portable.runners.sessions.SessionFailed` naming the EP's message)."""
        from portable.runners.inputs import graph_io

        start = time.perf_counter()
        self.version = qnn_version()
        specs, _outputs = graph_io(self.model_path)
        self._symbols = tuple(dict.fromkeys(s.shape[0] for s in specs if s.shape and isinstance(s.shape[0], str) and s.shape[0]))
        self.batch = next((s.static_batch for s in specs if s.shape and s.static_batch), 1)  # fed at a time
        self._sessions = {}
        self._session(1)
        self.load_seconds = time.perf_counter() - start

    def _session(self, batch: int) -> Any:
        sessions = self._loaded(self._sessions)
        if batch not in sessions:
            spec = qnn_htp(log_severity=FATAL, free_dims={s: batch for s in self._symbols})
            sessions[batch] = session_from_onnx(self.model_path, spec, what=f"{self.model_path} on the QNN HTP")
        return sessions[batch]

    @staticmethod
    def _batch(feeds: Feeds) -> int:
        sizes = {int(v.shape[0]) for v in feeds.values() if getattr(v, "ndim", 0)}
        return max(sizes, default=1)

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        session = self._session(self._batch(feeds) if self._symbols else 1)
        try:
            return [np.asarray(o) for o in session.run(None, dict(feeds))]
        except Exception as exc:  # noqa: BLE001 - the simulator's refusal, in its own words
            raise RunnerFailed(f"the QNN HTP failed to run: {one_line(exc, limit=400)}") from None

    def prepare(self, feeds: Feeds) -> Step:
        session, given = self._session(self._batch(feeds) if self._symbols else 1), dict(feeds)
        return lambda: session.run(None, given)

    def unload(self) -> None:
        self._sessions = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": self.version, "backend": "HTP (simulator on x86-64)"}


def htp_outputs(model: str | Path, samples: dict[str, np.ndarray], cap: int = HELD_OUT_CAP) -> tuple[list[np.ndarray], int, float]:
    """The HTP's outputs on the first ``cap`` samples (inputs on a leading axis, fed the file's static batch at a
    time, else one by one), concatenated per output; with the count run and the simulator's seconds."""
    count = min(cap, min(len(v) for v in samples.values()))
    runner = QnnRunner(model)
    runner.load()
    try:
        start, chunks = time.perf_counter(), []
        for at in range(0, count - count % runner.batch, runner.batch):
            chunks.append(runner.infer({k: v[at:at + runner.batch] for k, v in samples.items()}))
        seconds = time.perf_counter() - start
    finally:
        runner.unload()
    run = len(chunks) * runner.batch
    return [np.concatenate([c[k] for c in chunks]) for k in range(len(chunks[0]))], run, seconds
