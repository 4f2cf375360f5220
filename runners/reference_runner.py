"""ONNX's own ``onnx.reference.ReferenceEvaluator``, the spec in NumPy: slow, for small models.

The evaluator runs in a child process (``spawn``: no threads of ONNX Runtime or PyTorch inherited)
so that a model too large for it is stopped at the time cap and reported ``timed out`` instead of
hanging the comparison (a Python thread cannot be stopped). The child loads the model once per
``infer`` call; the cap covers load and run together.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from portable.runners.base import Feeds, Runner, RunnerFailed, Step

__all__ = ["DEFAULT_CAP_SECONDS", "ReferenceRunner", "TimedOut"]

DEFAULT_CAP_SECONDS = 60.0


class TimedOut(RunnerFailed):
    """The evaluator did not finish within its cap (reported ``timed out``, not a failure of the model)."""


def _evaluate(path: str, feeds: dict[str, np.ndarray], answer: Any) -> None:
    """In the child: run the evaluator and send ``("ok", outputs)`` or ``("error", message)``."""
    try:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(path)
        answer.put(("ok", [np.asarray(o) for o in evaluator.run(None, feeds)]))
    except Exception as exc:  # noqa: BLE001 - the evaluator's failure goes back as text
        answer.put(("error", f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"))


def _answer(answer: Any, child: Any, cap: float) -> tuple[str, Any]:
    """The child's answer within ``cap`` seconds; a child that dies without one (a crash, the OOM killer)
    is this runner's failure at once, not a wait to the cap reported as "timed out"."""
    deadline = time.perf_counter() + cap
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimedOut(f"timed out: the reference evaluator did not finish within {cap:g} s")
        try:
            return cast(tuple[str, Any], answer.get(timeout=min(left, 0.5)))
        except queue.Empty:
            if not child.is_alive():
                try:  # its answer may still be in the pipe
                    return cast(tuple[str, Any], answer.get(timeout=0.5))
                except queue.Empty:
                    raise RunnerFailed(f"the reference evaluator's process died (exit code {child.exitcode}) "
                                       "without an answer") from None


class ReferenceRunner(Runner):
    """The reference evaluator in a capped child process."""

    kind = "onnx-reference"
    device = "cpu"

    def __init__(self, model_path: str | Path, *, cap_seconds: float = DEFAULT_CAP_SECONDS,
                 name: str = "reference") -> None:
        super().__init__()
        self.model_path, self.cap_seconds, self.name = str(model_path), cap_seconds, name

    def load(self) -> None:
        """The evaluator loads in the child, inside the cap; here only the file is checked."""
        start = time.perf_counter()
        if not Path(self.model_path).is_file():
            raise RunnerFailed(f"no such model file: {self.model_path}")
        self.load_seconds = time.perf_counter() - start

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        context = multiprocessing.get_context("spawn")
        answer = context.Queue()
        child = context.Process(target=_evaluate, args=(self.model_path, dict(feeds), answer), daemon=True)
        child.start()
        try:
            status, payload = _answer(answer, child, self.cap_seconds)
        finally:
            child.join(timeout=1)
            if child.is_alive():
                child.kill()
                child.join()
        if status != "ok":
            raise RunnerFailed(f"the reference evaluator failed: {payload}")
        return list(payload)

    def prepare(self, feeds: Feeds) -> Step:
        return lambda: self.infer(feeds)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "cap_seconds": self.cap_seconds}
