"""The generation proof's record: ONNX Runtime's greedy tokens and logits against each PyTorch reference.

A pair passes when the token sequences are identical and, at every step, the logits are within
the tolerance of their dtype (``runners/tolerances.py``: float32 atol 1e-4, rtol 1e-3), judged
by :func:`portable.runners.comparator.compare_arrays` as ``portable compare`` judges an output.
The record names the first step whose tokens differ, the first step whose logits are beyond the
tolerance, and the largest absolute logits difference at every step. A reference that could not
run (``torch.compile`` failing) is reported with its reason and does not pass.

A step whose float32 or float16 logits miss the default tolerance still passes when they are within the
float64 noise floor (:class:`portable.runners.comparator.NoiseFloor`, as export's verify judges an output):
ONNX Runtime's error against the model run in float64 on the same tokens (for a float16 pair, the float16
weights in float64) is at most ``NOISE_FACTOR`` times the reference's own at the pair's precision. The
absolute 1e-4 is below float32's own rounding at some steps of a trained model (issue 34, docs/llm.md
"The padded prefill block"); ``--atol``/``--rtol`` are judged alone.

Degenerate logits prove nothing (a model that always picks one token matches any export that
does too): the record says how many distinct tokens the reference chose and the smallest spread
(standard deviation over the vocabulary) of its logits; :data:`DEGENERATE_SPREAD` or one token
id for every step is a warning, as ``compare`` warns of a degenerate output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from portable.errors import ExitCode
from portable.runners.comparator import NOISE_FACTOR, NoiseFloor, compare_arrays, noise_floor
from portable.runners.generation import Trace
from portable.runners.teacher_forced import TeacherForced
from portable.runners.tolerances import Tolerance, ToleranceTable

__all__ = ["DEGENERATE_SPREAD", "GenerationComparison", "GenerationReport", "compare_traces"]

DEGENERATE_SPREAD = 1e-3


@dataclass(frozen=True)
class GenerationComparison:
    """ONNX Runtime's trace against one reference's."""

    reference: str
    tokens_identical: bool
    first_token_mismatch: int | None  # step index (0: the token after the prompt)
    first_logits_beyond: int | None  # first step whose logits are outside the tolerance
    max_abs_per_step: tuple[float, ...]
    tolerance: Tolerance
    error: str | None = None  # the reference could not run
    tokens: tuple[tuple[int, ...], ...] = ()  # the reference's new tokens, per row
    noise: tuple[tuple[int, NoiseFloor], ...] = ()  # steps beyond the tolerance judged by the float64 noise floor

    @property
    def passed(self) -> bool:
        return self.error is None and self.tokens_identical and self.first_logits_beyond is None

    def message(self) -> str:
        if self.error is not None:
            return f"{self.reference}: {self.error}"
        if not self.tokens_identical:
            return (f"{self.reference}: tokens differ from step {self.first_token_mismatch}"
                    f"{self._logits_note()}")
        if self.first_logits_beyond is not None:
            return (f"{self.reference}: same tokens, but the logits of step {self.first_logits_beyond} differ by "
                    f"{self.max_abs_per_step[self.first_logits_beyond]:.3g} (tolerance {self.tolerance.describe()}"
                    f"{self._floor_note(self.first_logits_beyond)})")
        return (f"{self.reference}: tokens identical, max |logits diff| {max(self.max_abs_per_step, default=0.0):.3g}"
                f"{self._noise_note()}")

    def _noise_note(self) -> str:
        """The steps that passed by the float64 noise floor, with their errors."""
        steps = [f"step {i}: {n.actual_error:.2g} vs {self.reference}'s own {n.expected_error:.2g}"
                 for i, n in self.noise if n.passed]
        return (f" (beyond {self.tolerance.describe()} but within the float64 noise floor, error against float64 "
                f"allowed {NOISE_FACTOR:g}x the reference's: {'; '.join(steps)})") if steps else ""

    def _floor_note(self, step: int) -> str:
        n = dict(self.noise).get(step)
        return (f"; error against float64 {n.actual_error:.3g}, {n.ratio:.3g}x {self.reference}'s own "
                f"{n.expected_error:.3g}, allowed {n.factor:g}x") if n is not None else ""

    def _logits_note(self) -> str:
        step = self.first_logits_beyond
        return f" (logits beyond {self.tolerance.describe()} from step {step})" if step is not None else ""

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "passed": self.passed, "tokens_identical": self.tokens_identical,
                "first_token_mismatch": self.first_token_mismatch, "first_logits_beyond": self.first_logits_beyond,
                "max_abs_per_step": list(self.max_abs_per_step), "tolerance": self.tolerance.to_dict(),
                "error": self.error, "tokens": [list(row) for row in self.tokens],
                "noise_floor": {str(i): n.to_dict() for i, n in self.noise}, "message": self.message()}


def compare_traces(actual: Trace, expected: Trace, tolerance: Tolerance,
                   exact: Sequence[np.ndarray] | None = None) -> GenerationComparison:
    """``actual`` (ONNX Runtime) against ``expected`` (a PyTorch reference), step by step; ``exact``: each
    step's logits of the model in float64 on the same tokens (:func:`portable.runners.generation.float64_logits`),
    by which a step beyond the tolerance is judged (the noise floor, module docstring)."""
    same = actual.tokens.shape == expected.tokens.shape and bool((actual.tokens == expected.tokens).all())
    differs = [i for i in range(min(actual.tokens.shape[1], expected.tokens.shape[1]))
               if not (actual.tokens[:, i] == expected.tokens[:, i]).all()]
    stats = [compare_arrays(a, e, tolerance) for a, e in zip(actual.logits, expected.logits)]
    noise = _noise_floors(actual, expected, stats, exact if same else None)
    floors = {i for i, n in noise if n.passed}
    beyond = next((i for i, s in enumerate(stats) if not s.passed and i not in floors), None)
    if len(actual.logits) != len(expected.logits) and beyond is None:
        beyond = min(len(actual.logits), len(expected.logits))
    first = differs[0] if differs else (None if same else min(actual.tokens.shape[1], expected.tokens.shape[1]))
    rows = tuple(tuple(int(t) for t in row) for row in expected.tokens)
    return GenerationComparison(expected.runner, same, first, beyond, tuple(float(s.max_abs) for s in stats),
                                tolerance, tokens=rows, noise=noise)


def _noise_floors(actual: Trace, expected: Trace, stats: Sequence[Any],
                  exact: Sequence[np.ndarray] | None) -> tuple[tuple[int, NoiseFloor], ...]:
    """The noise floor of each finite step beyond the tolerance, when there is a float64 run to judge by."""
    if exact is None or len(exact) != len(stats):
        return ()
    return tuple((i, noise_floor(actual.logits[i], expected.logits[i], exact[i])) for i, s in enumerate(stats)
                 if not s.passed and not s.nonfinite_actual and not s.nonfinite_expected)


def failed_reference(reference: str, error: str, tolerance: Tolerance) -> GenerationComparison:
    return GenerationComparison(reference, False, None, None, (), tolerance, error)


@dataclass(frozen=True)
class GenerationReport:
    """The whole proof: the prompt, every runner's tokens, each comparison, and the latency when timed."""

    prefill: str
    decode: str
    prompt: tuple[tuple[int, ...], ...]
    tokens: tuple[tuple[int, ...], ...]  # ONNX Runtime's new tokens, per row
    comparisons: tuple[GenerationComparison, ...]
    distinct_tokens: int
    logits_spread: float
    latency: dict[str, Any] | None = None
    setup: dict[str, Any] = field(default_factory=dict)
    texts: dict[str, str] | None = None  # decoded by the model's tokenizer: the prompt and each side's new text
    teacher_forced: TeacherForced | None = None  # over a real text (runners/teacher_forced.py)
    judged_by: str = "identity"  # "budgets": a weight-only pair, judged by the teacher-forced budgets alone

    @property
    def passed(self) -> bool:
        if self.judged_by == "budgets":
            return self.teacher_forced is not None and self.teacher_forced.passed
        forced = self.teacher_forced is None or self.teacher_forced.passed
        return bool(self.comparisons) and all(c.passed for c in self.comparisons) and forced

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.passed else ExitCode.FINDINGS

    @property
    def warnings(self) -> tuple[str, ...]:
        if self.distinct_tokens > 1 and self.logits_spread > DEGENERATE_SPREAD:
            return ()
        return (f"degenerate generation: {self.distinct_tokens} distinct token(s), smallest logits spread "
                f"{self.logits_spread:.3g}: token identity proves little (give the model weights whose logits vary)",)

    def greedy_agreement(self) -> dict[str, float]:
        """Per reference: the share of greedy steps before the first token that differs (1.0: all identical)."""
        steps = len(self.tokens[0]) if self.tokens else 0
        return {c.reference: (1.0 if c.first_token_mismatch is None else c.first_token_mismatch / steps)
                for c in self.comparisons if c.error is None and steps}

    def message(self) -> str:
        said = [c.message() for c in self.comparisons] + ([self.teacher_forced.message()] if self.teacher_forced else [])
        return "; ".join(said) or "no reference ran"

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "portable.generation/1", "passed": self.passed, "exit_code": int(self.exit_code),
                "prefill": self.prefill, "decode": self.decode, "prompt": [list(r) for r in self.prompt],
                "tokens": [list(r) for r in self.tokens], "comparisons": [c.to_dict() for c in self.comparisons],
                "distinct_tokens": self.distinct_tokens, "logits_spread": self.logits_spread,
                "warnings": list(self.warnings), "latency": self.latency, "setup": self.setup, "texts": self.texts,
                "teacher_forced": self.teacher_forced.to_dict() if self.teacher_forced else None,
                "judged_by": self.judged_by, "greedy_agreement": self.greedy_agreement(),
                "message": self.message()}


def spread(trace: Trace) -> tuple[int, float]:
    """Distinct tokens chosen, and the smallest standard deviation of one step's logits."""
    deviations = [float(np.std(step.astype(np.float64), axis=-1).min()) for step in trace.logits]
    return len(np.unique(trace.tokens)), min(deviations, default=0.0)


def tolerance_for(logits: Sequence[np.ndarray], table: ToleranceTable | None) -> Tolerance:
    """The tolerance of the logits' dtype (or the user's ``--atol``/``--rtol`` for ``logits``)."""
    dtype = str(logits[0].dtype) if logits else "float32"
    return (table or ToleranceTable()).for_output("logits", dtype)


def render_text(report: GenerationReport) -> str:
    """The proof and the latency as plain lines (``portable compare --task text-generation``)."""
    setup = report.setup
    lines = [f"text generation: {report.prefill} + {report.decode}",
             f"prompt: {setup.get('prompt_length')} token(s) x {len(report.prompt)} row(s), seed {setup.get('seed')}; "
             f"{setup.get('tokens')} new token(s); context {setup.get('context')}, prefill blocks of "
             f"{setup.get('prefill_tokens')}",
             f"onnxruntime tokens: {list(report.tokens[0]) if report.tokens else []}"]
    for comparison in report.comparisons:
        mark = ("PASS" if comparison.passed else "FAIL") if report.judged_by == "identity" else "INFO"
        lines.append(f"{mark} {comparison.message()}")
        if comparison.max_abs_per_step:
            lines.append("  max |logits diff| per step: " + " ".join(f"{d:.2g}" for d in comparison.max_abs_per_step))
    lines += [f"text ({side}): {text!r}" for side, text in (report.texts or {}).items()]
    if report.teacher_forced is not None:
        lines.append(("PASS " if report.teacher_forced.passed else "FAIL ") + report.teacher_forced.message())
    lines += [f"warning: {w}" for w in report.warnings]
    for runner, figures in (report.latency or {}).items():
        ttft, decode = figures["ttft"], figures["decode"]
        lines.append(f"latency ({runner}): time to first token p50 {ttft['p50_s'] * 1e3:.3g} ms "
                     f"({figures['prefill_calls']} prefill call(s)); decode p50 {decode['p50_s'] * 1e3:.3g} ms, "
                     f"p90 {decode['p90_s'] * 1e3:.3g} ms per token; {figures['tokens_per_s']:.4g} tokens/s "
                     f"over {figures['runs']} generation(s)")
    lines.append("passed" if report.passed else f"failed: {report.message()}")
    return "\n".join(lines) + "\n"
