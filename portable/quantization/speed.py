"""ONNX Runtime CPU latency of the float and the int8 model, side by side in one run.

The timing is the runners' (``portable.runners.timing``): each session warmed up alone until
steady, then both timed in round-robin blocks, so machine noise hits them alike and the ratio
is what to read. Both sessions come from the runners' session factory with ONNX Runtime's
intra-op spinning off (``session.intra_op.allow_spinning=0``): a session that waits for work
with its threads spinning would take the cores from the one being timed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import InternalError

__all__ = ["LatencyComparison", "compare_latency", "cpu_session"]


def cpu_session(path: Path, what: str = "the model", *, as_written: bool = False) -> Any:
    """An ONNX Runtime CPU session of ``path`` (the runners' factory: quiet, no fallback, graph
    optimizations at ONNX Runtime's default, spinning off); one that cannot be made is portable's
    failure here (exit 3): both models were validated before. ``as_written``: graph optimizations off,
    so a QDQ file runs its QuantizeLinear/DequantizeLinear and float ops as written (the file's own
    arithmetic, the same on every CPU) instead of ORT's fused int8 kernels (which depend on the CPU)."""
    from portable.runners.sessions import SessionFailed, SessionSpec, session_from_onnx

    try:
        return session_from_onnx(path, SessionSpec(spinning=False, optimize=not as_written), what=what)
    except SessionFailed as exc:
        raise InternalError(exc.message) from None


@dataclass(frozen=True)
class LatencyComparison:
    """p50 and mean per call (seconds) of both models at one batch, and int8 / float ratios."""

    batch: int
    float_stats: Any  # runners.stats.LatencyStats
    int8_stats: Any
    float_pipelined_s: float
    int8_pipelined_s: float
    rounds: int
    steady: bool

    @property
    def ratio_p50(self) -> float:
        return float(self.int8_stats.p50_s / self.float_stats.p50_s)

    def to_dict(self) -> dict[str, Any]:
        return {"provider": "CPUExecutionProvider", "batch": self.batch, "float": self.float_stats.to_dict(),
                "int8": self.int8_stats.to_dict(), "float_pipelined_s": self.float_pipelined_s,
                "int8_pipelined_s": self.int8_pipelined_s, "ratio_p50": round(self.ratio_p50, 4),
                "ratio_pipelined": round(self.int8_pipelined_s / self.float_pipelined_s, 4),
                "rounds": self.rounds, "warmed_up_steady": self.steady, "spinning": False}


def _step(session: Any, feeds: dict[str, np.ndarray]) -> Callable[[], object]:
    """One synchronous run of ``session`` on ``feeds``."""
    return lambda: session.run(None, feeds)


def compare_latency(float_model: Path, int8_model: Path, feeds: Mapping[str, np.ndarray],
                    config: Any = None) -> LatencyComparison:
    """Time both models on the same ``feeds`` (see the module docstring)."""
    from portable.runners.stats import LatencyStats
    from portable.runners.timing import HostTimer, Timed, TimingConfig, interleave, warm_up

    config = config or TimingConfig()
    data = dict(feeds)
    entries = []
    for name, path in (("float", float_model), ("int8", int8_model)):
        entries.append(Timed(name, _step(cpu_session(path, f"the {name} model"), data), HostTimer(), HostTimer()))
    warm = {e.name: warm_up(e.step, e.timer, config) for e in entries}
    measured = {m.name: m for m in interleave(entries, warm, config)}
    batch = int(next(iter(feeds.values())).shape[0])
    stats = {n: LatencyStats.from_samples(m.samples, batch) for n, m in measured.items()}
    return LatencyComparison(batch, stats["float"], stats["int8"], statistics.median(measured["float"].pipelined),
                             statistics.median(measured["int8"].pipelined), measured["float"].rounds,
                             all(w.steady for w in warm.values()))
