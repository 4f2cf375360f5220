"""Latency that matters for generation: time to first token, per-token decode latency, tokens per second.

Timing stays apart from the loop (as ``runners/timing.py`` keeps it apart from the runners):
the whole generation is first warmed up until steady (:func:`portable.runners.timing.warm_up`),
then generations run back to back, each call timed alone (prefill blocks, then decode steps),
until ``min_iterations`` generations and ``min_seconds`` have been timed. Time to first token is
the sum of one generation's prefill calls (the prompt's blocks) and includes the host's argmax;
a decode step is one call of the decode graph; tokens per second is the new tokens of one
generation over its whole time. The static cache makes every decode step the same work (the
attention always spans the C slots), so the decode figures do not depend on the position.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from portable.runners.generation import PairSession
from portable.runners.stats import LatencyStats
from portable.runners.timing import HostTimer, Timer, TimingConfig, warm_up

__all__ = ["GenerationLatency", "measure_generation", "measure_torch_generation"]


@dataclass(frozen=True)
class GenerationLatency:
    """One runner's generation latency (seconds), over ``runs`` timed generations."""

    runner: str
    runs: int
    prompt_tokens: int
    new_tokens: int
    prefill_calls: int  # per generation: the prompt's blocks
    ttft: LatencyStats
    decode: LatencyStats
    tokens_per_s: float  # new tokens over the whole generation, median of the runs
    warmup_steady: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ttft": self.ttft.to_dict(), "decode": self.decode.to_dict()}


def measure_generation(pair: PairSession, prompt: np.ndarray, tokens: int, config: TimingConfig,
                       timer: Timer | None = None, runner: str = "onnxruntime-cpu") -> GenerationLatency:
    """Warm up, then time whole generations of ``tokens`` new tokens after ``prompt`` (module docstring)."""
    timer = timer or HostTimer()
    warm = warm_up(lambda: pair.generate(prompt, tokens), timer, config)
    blocks = math.ceil(prompt.shape[1] / pair.geometry.prefill_tokens)
    ttft: list[float] = []
    decode: list[float] = []
    rates: list[float] = []
    while len(ttft) < config.min_iterations or sum(ttft) + sum(decode) < config.min_seconds:
        seconds = pair.generate(prompt, tokens, timer).step_seconds
        ttft.append(sum(seconds[:blocks]))
        decode.extend(seconds[blocks:])
        rates.append(tokens / sum(seconds))
        if len(ttft) >= config.max_iterations:
            break
    batch = prompt.shape[0]
    return GenerationLatency(runner, len(ttft), prompt.shape[1], tokens, blocks, LatencyStats.from_samples(ttft, batch),
                             LatencyStats.from_samples(decode or [math.nan], batch), float(np.median(rates)) * batch,
                             warm.steady)


class _Stamps:
    """A transformers logits processor that notes the time of each generation step (after a device sync:
    the step's forward has finished), so that one ``generate`` call gives its TTFT and each decode step."""

    def __init__(self, synchronize: Any) -> None:
        import time

        self.clock, self.synchronize, self.times = time.perf_counter, synchronize, [0.0]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.synchronize()
        self.times.append(self.clock())
        return scores

    def start(self) -> _Stamps:
        self.synchronize()
        self.times = [self.clock()]
        return self


def measure_torch_generation(model: Any, prompt: np.ndarray, tokens: int, config: TimingConfig, *, compiled: bool,
                             device: str = "cpu") -> GenerationLatency:
    """The model's own greedy ``generate`` timed as :func:`measure_generation` times the pair: warmed up (the
    first calls compile), then whole generations, each step stamped by a logits processor after a device
    sync: time to first token is the prefill forward, a decode step the time between two stamps."""
    import torch
    from transformers import LogitsProcessorList

    from portable.runners.generation import generate_options

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    stamps, ids = _Stamps(sync), torch.from_numpy(prompt).to(device)
    options = generate_options(compiled, device, ids, tokens) | {"logits_processor": LogitsProcessorList([stamps])}
    call = lambda: model.generate(ids, **options)  # noqa: E731
    with torch.no_grad():
        warm = warm_up(call, HostTimer(sync), config)
        ttft, decode, rates = _stamped(stamps, call, config)
    name = f"torch-{'compiled' if compiled else 'eager'}-{device}"
    batch = prompt.shape[0]
    return GenerationLatency(name, len(ttft), prompt.shape[1], tokens, 1, LatencyStats.from_samples(ttft, batch),
                             LatencyStats.from_samples(decode or [math.nan], batch), float(np.median(rates)) * batch,
                             warm.steady)


def _stamped(stamps: _Stamps, call: Any, config: TimingConfig) -> tuple[list[float], list[float], list[float]]:
    ttft: list[float] = []
    decode: list[float] = []
    rates: list[float] = []
    while len(ttft) < config.min_iterations or sum(ttft) + sum(decode) < config.min_seconds:
        call_start = stamps.start()
        call()
        steps = np.diff(call_start.times).tolist()
        ttft.append(steps[0])
        decode.extend(steps[1:])
        rates.append(len(steps) / sum(steps))
        if len(ttft) >= config.max_iterations:
            break
    return ttft, decode, rates
