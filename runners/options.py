"""What a comparison is asked to do, as one frozen record: :class:`CompareOptions`.

``portable.compare(model, module, options)`` and ``portable compare`` build the same record (the CLI parses
its flags into it once, before torch is imported); :func:`portable.runners.api.compare` takes its fields as
keyword arguments too. Contradictions are usage errors here, before any runner is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portable.errors import UsageError
from portable.runners.base import Feeds
from portable.runners.budgets import ErrorBudget, LatencyBudget, with_figures
from portable.runners.timing import TimingConfig
from portable.runners.tolerances import ToleranceTable
from portable.runners.torch_runners import COMPILE_MODES

__all__ = ["CompareOptions"]


@dataclass(frozen=True)
class CompareOptions:
    """``compile_mode``: one mode, several (``"default,reduce-overhead"``: one compiled runner each), or None
    to skip ``torch.compile``; ``timing=None`` skips the latency phase; ``tf32`` sets the numerics of PyTorch
    and of every ONNX Runtime provider alike; the budgets are judged on a run that completed."""

    device: str | None = None
    compile_mode: str | Sequence[str] | None = "default"
    providers: str | Sequence[str] | None = None
    batches: Sequence[int] | None = None
    inputs: str | Path | Feeds | None = None
    dims: Mapping[str, int] | None = None
    int_range: tuple[int, int] | None = None
    int_ranges: Mapping[str, tuple[int, int]] | None = None
    seed: int = 0
    tf32: bool = False
    tolerances: ToleranceTable | None = None
    timing: TimingConfig | None = field(default_factory=TimingConfig)
    localize: bool = False
    reference_name: str = ""
    latency_budgets: tuple[LatencyBudget, ...] = ()
    error_budgets: tuple[ErrorBudget, ...] = ()
    min_cosine: float | None = None  # float outputs judged by cosine / SQNR (runners/budgets.py: Figures)
    min_sqnr: float | None = None

    def __post_init__(self) -> None:
        if self.timing is None and self.latency_budgets:
            raise UsageError("--max-latency-ms needs the latency phase: drop --no-latency")
        self.compile_modes()  # an unknown mode is a usage error now, not after the runners loaded

    def compile_modes(self) -> list[str]:
        """The compiled runners to make, each mode once (``[]``: none)."""
        if self.compile_mode is None:
            return []
        given = self.compile_mode
        modes = [m.strip() for m in (given.split(",") if isinstance(given, str) else given)]
        bad = [m for m in modes if m not in COMPILE_MODES]
        if bad or not modes:
            raise UsageError(f"unknown compile mode {','.join(bad) or given!r} "
                             f"(choose from {', '.join(COMPILE_MODES)}, comma-separated)")
        return list(dict.fromkeys(modes))

    def table(self, model: str | Path | None = None) -> ToleranceTable:
        """The tolerances, in this run's numerics mode; with ``model``, the figures that judge its float outputs
        instead (a quantized file's manifest, ``min_cosine``/``min_sqnr``)."""
        from dataclasses import replace

        table = replace(self.tolerances or ToleranceTable(), tf32=self.tf32)
        return with_figures(table, model, self.min_cosine, self.min_sqnr) if model is not None else table

    def with_(self, **changes: Any) -> CompareOptions:
        from dataclasses import replace

        return replace(self, **changes)
