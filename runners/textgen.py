"""``portable compare --task text-generation`` and the export's proof: greedy generation, token for token.

One seeded prompt; ONNX Runtime runs the pair's host loop (:class:`~portable.runners.generation.PairSession`),
the PyTorch model runs its own ``generate`` (eager, and ``torch.compile``d over a static cache unless
``compile=False``); the traces are compared step by step
(:func:`~portable.runners.generation_report.compare_traces`; a step beyond the default float32 tolerance
is judged once more by the float64 noise floor, the model run in float64 on ONNX Runtime's tokens, made
only when a step needs it), then, when ``timing`` is given, ONNX Runtime's generation is timed
(:func:`~portable.runners.generation_latency.measure_generation`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import UsageError, one_line
from portable.runners.generation import PairFiles, PairSession, Trace, float64_logits, prompt_ids, torch_generate
from portable.runners.generation_latency import measure_generation
from portable.runners.generation_report import (
    GenerationComparison,
    GenerationReport,
    compare_traces,
    failed_reference,
    spread,
    tolerance_for,
)
from portable.runners.timing import TimingConfig
from portable.runners.tolerances import ToleranceTable

__all__ = ["DEFAULT_PROMPT", "DEFAULT_TOKENS", "compare_text_generation"]

DEFAULT_TOKENS = 32
DEFAULT_PROMPT = 20  # not a multiple of the default prefill block (32): the padded block is exercised
DYNAMIC_BATCH = 3  # a dynamic pair is proven at a batch it was not traced at (the exporter traces at 2)
Progress = Callable[[str], None]


def compare_text_generation(pair: str | Path | PairFiles, model: Any, *, tokens: int = DEFAULT_TOKENS,
                            prompt_length: int | None = None, seed: int = 0, compile: bool = True,
                            tolerances: ToleranceTable | None = None, timing: TimingConfig | None = None,
                            progress: Progress | None = None) -> GenerationReport:
    """Greedy generation of ``tokens`` tokens from a seeded prompt through the pair in ONNX Runtime
    (CPU) and through ``model.generate``; see the module docstring. ``model``: the transformers causal
    LM the pair was exported from (eval mode is set for the call)."""
    say = progress or (lambda _msg: None)
    files = pair if isinstance(pair, PairFiles) else PairFiles.find(pair)
    session = PairSession(files)
    geometry = session.geometry
    length = prompt_length if prompt_length is not None else min(DEFAULT_PROMPT, geometry.context - tokens + 1)
    session.check_fits(length, tokens)
    prompt = prompt_ids(geometry.batch or DYNAMIC_BATCH, length, _vocab(model), seed)
    say(f"ONNX Runtime: {tokens} greedy token(s) after a prompt of {length}")
    ours = session.generate(prompt, tokens)
    exact = _Float64(model, prompt, ours, tolerances, say)
    comparisons = [_against(ours, model, prompt, tokens, compiled, tolerances, say, exact) for compiled in
                   ((False, True) if compile else (False,))]
    latency = None
    if timing is not None:
        say("timing ONNX Runtime's generation")
        latency = {"onnxruntime-cpu": measure_generation(session, prompt, tokens, timing).to_dict()}
    return _report(files, prompt, ours, comparisons, latency, {"seed": seed, "tokens": tokens,
                                                              "prompt_length": length, "context": geometry.context,
                                                              "prefill_tokens": geometry.prefill_tokens,
                                                              "float64": exact.note})


def _vocab(model: Any) -> int:
    config = getattr(model, "config", None)
    vocab = getattr(config.get_text_config() if config is not None else None, "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 1:
        raise UsageError(f"{type(model).__name__} has no config.vocab_size: the reference must be a transformers causal LM")
    return vocab


class _Float64:
    """The model's float64 logits on ONNX Runtime's tokens (:func:`float64_logits`), made the first time a step
    beyond the tolerance asks for them; ``note`` says whether they ran, or why not."""

    def __init__(self, model: Any, prompt: np.ndarray, ours: Trace, table: ToleranceTable | None,
                 say: Progress) -> None:
        self.model, self.prompt, self.ours, self.say = model, prompt, ours, say
        given = table is not None and table.given
        float32 = bool(ours.logits) and ours.logits[0].dtype == np.float32
        self.applies = float32 and not given
        self.note = "not needed" if self.applies else ("--atol/--rtol as given (no float64 calibration)" if given
                                                       else "default tolerances only (float32 logits only)")
        self._logits: tuple[np.ndarray, ...] | None = None

    def logits(self) -> tuple[np.ndarray, ...] | None:
        if self.applies and self._logits is None:
            self.say("the reference in float64 on ONNX Runtime's tokens (the noise floor of fp32 arithmetic)")
            try:
                self._logits = float64_logits(self.model, self.prompt, self.ours.tokens)
                self.note = "float64 reference: ran (a step beyond the tolerance judged by the noise floor)"
            except Exception as exc:  # noqa: BLE001 - a model that will not convert: the tolerances alone
                self.applies, self.note = False, f"default tolerances only: float64 failed ({one_line(exc, limit=200)})"
        return self._logits


def _against(ours: Trace, model: Any, prompt: Any, tokens: int, compiled: bool, table: ToleranceTable | None,
             say: Progress, exact: _Float64) -> GenerationComparison:
    name = "torch-compiled" if compiled else "torch-eager"
    tolerance = tolerance_for(ours.logits, table)
    say(f"PyTorch generate ({'torch.compile, static cache' if compiled else 'eager'})")
    was_training = model.training
    model.eval()
    try:
        theirs = torch_generate(model, prompt, tokens, compiled=compiled)
    except Exception as exc:  # noqa: BLE001 - the reference failing (a compile error) is reported, not raised
        return failed_reference(name, f"could not run: {one_line(exc, limit=300)}", tolerance)
    finally:
        model.train(was_training)
    comparison = compare_traces(ours, theirs, tolerance)
    if comparison.tokens_identical and comparison.first_logits_beyond is not None and exact.applies:
        comparison = compare_traces(ours, theirs, tolerance, exact.logits())
    return comparison


def _report(files: PairFiles, prompt: Any, ours: Trace, comparisons: list[GenerationComparison],
            latency: dict[str, Any] | None, setup: dict[str, Any]) -> GenerationReport:
    distinct, logits_spread = spread(ours)
    rows = lambda array: tuple(tuple(int(t) for t in row) for row in array)  # noqa: E731
    return GenerationReport(str(files.prefill), str(files.decode), rows(prompt), rows(ours.tokens), tuple(comparisons),
                            distinct, logits_spread, latency, setup)
