"""What one quantize run was asked for, checked and resolved before any model is loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portable.policy import Policy
from portable.quantization.settings import Budgets, Settings

__all__ = ["DEFAULT_BATCH", "DEFAULT_EVAL_SAMPLES", "DEFAULT_SAMPLES", "DEFAULT_SEARCH_LIMIT", "Plan"]

DEFAULT_SAMPLES = 64  # seeded calibration samples
DEFAULT_EVAL_SAMPLES = 256  # held-out samples the accuracy is measured on
DEFAULT_SEARCH_LIMIT = 16  # nodes the precision search may keep in float (portable.quantization.search)
DEFAULT_BATCH = 8  # samples per run of a dynamic-batch model, and the batch its latency is timed at


@dataclass(frozen=True)
class Plan:
    """What the user asked for, checked and resolved before any model is loaded."""

    source: Path
    output: Path
    settings: Settings
    budgets: Budgets
    policy: Policy
    calibration: Path | None
    eval_data: Path | None
    samples: int
    eval_samples: int
    batch: int
    seed: int
    int_ranges: dict[str, tuple[int, int]]
    latency: bool
    per_node: bool
    timing: Any = None  # runners.timing.TimingConfig; None: its defaults
    preprocess: str | None = None  # a folder of images: imagenet | inception | none (images.py)
    search_limit: int = DEFAULT_SEARCH_LIMIT  # most nodes the precision search keeps in float (0: no search)
    judge: dict[str, str] = field(default_factory=dict)  # --judge OUTPUT=KIND (judging.py): what judges an output
