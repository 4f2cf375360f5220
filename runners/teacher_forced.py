"""Teacher forcing over a real text: what people who ship LLMs compare (issue 34).

The text's token ids are cut into windows of the pair's context; in each, every position's next-token
distribution comes from ONNX Runtime (the prefill graph's blocks over the window, ``PairSession.prompt_logits``)
and from the PyTorch model (one float32 forward over the window, no cache). Scored are the tokens after the
first of each window. Per token: the log-probability each side gives the text's next token, their
difference, and whether both sides' top-1 agree; over the text: each side's perplexity and their ratio.
The budgets (:class:`Budgets`) say what passes: a float pair must agree to fp32's noise, a weight-only
int8 pair within what its user accepts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from portable.quiet import quiet_libraries
from portable.runners.generation import PairSession

__all__ = ["FP16", "WEIGHT_ONLY", "Budgets", "TeacherForced", "teacher_forced", "windows"]


@dataclass(frozen=True)
class Budgets:
    """What passes. The defaults are a float pair's: fp32 arithmetic moves a log-probability by about 1e-5
    (SmolLM2's trained layers: 3e-5 at most), a weight off by 1 % moves one by 0.1 (``max_logprob_diff``
    catches it where top-1 and perplexity barely move: 99.8 %, 1.0001x). A weight-only int8 pair is
    judged by ``min_top1`` and ``max_ppl_ratio`` with the third set to infinity (``--max-logprob-diff inf``)."""

    min_top1: float = 0.99  # top-1 agreement over the scored tokens
    max_ppl_ratio: float = 1.01  # ONNX Runtime's perplexity over PyTorch's
    max_logprob_diff: float = 0.01  # max |log p_ort - log p_torch| of the text's tokens, in nats

    @classmethod
    def of(cls, quantized: bool, min_top1: float | None = None, max_ppl_ratio: float | None = None,
           max_logprob_diff: float | None = None, precision: str = "fp32") -> Budgets:
        """The budgets given, the rest by default: a weight-only pair's (WEIGHT_ONLY), an fp16 pair's (FP16)
        or a float32 pair's."""
        base = WEIGHT_ONLY if quantized else FP16 if precision == "fp16" else cls()
        return cls(base.min_top1 if min_top1 is None else min_top1,
                   base.max_ppl_ratio if max_ppl_ratio is None else max_ppl_ratio,
                   base.max_logprob_diff if max_logprob_diff is None else max_logprob_diff)


# A weight-only int8 pair: its log-probabilities move by design; top-1 agreement and perplexity decide. Per-channel
# int8 on the whole trained SmolLM2-135M over the README: 94.6 % top-1, perplexity 81.5 against 80.6 (1.011x);
# on its first 2 layers 97.7 % (docs/llm.md). The budget leaves room below those for other models and machines.
WEIGHT_ONLY = Budgets(min_top1=0.90, max_ppl_ratio=1.05, max_logprob_diff=math.inf)
# An fp16 pair against the model in fp16: fp16's own rounding moves a log-probability by far more than fp32's,
# and the largest difference grows with depth and the text's length. Qwen2.5-Coder-0.5B over the README (1,613
# tokens): the whole fp16 pair's own 0.063 nats at most (mean 0.0037; top-1 99.88 %, perplexity 0.99999x), while
# one weight off by 1 % moves its first 2 layers' pair by 0.062 over 480 tokens (0.018 without): at fp16 the
# largest difference alone cannot tell a fault from rounding, so top-1 and perplexity decide and 0.1 nats is a
# guard against a gross fault; a tighter --max-logprob-diff fits a shorter model or text (docs/llm.md).
FP16 = Budgets(min_top1=0.99, max_ppl_ratio=1.01, max_logprob_diff=0.1)


@dataclass(frozen=True)
class TeacherForced:
    """The comparison over one text (log-probabilities in nats)."""

    tokens: int  # tokens scored
    windows: int
    max_abs_logprob: float  # max |log p_ort - log p_torch| of the text's tokens
    mean_abs_logprob: float
    ppl_ort: float
    ppl_torch: float
    top1: float  # the share of positions where both sides' argmax agree
    budgets: Budgets = Budgets()

    @property
    def ppl_ratio(self) -> float:
        return self.ppl_ort / self.ppl_torch

    @property
    def passed(self) -> bool:
        b = self.budgets
        return self.top1 >= b.min_top1 and self.ppl_ratio <= b.max_ppl_ratio and self.max_abs_logprob <= b.max_logprob_diff

    def message(self) -> str:
        b, count = self.budgets, f"{self.windows} window{'' if self.windows == 1 else 's'}"
        return (f"teacher-forced over {self.tokens} tokens ({count}): top-1 agreement {self.top1:.2%} (budget >= "
                f"{b.min_top1:.2%}), perplexity {self.ppl_ort:.4g} against {self.ppl_torch:.4g} (ratio "
                f"{self.ppl_ratio:.5f}, budget <= {b.max_ppl_ratio}), |log-prob diff| max {self.max_abs_logprob:.3g} "
                f"(budget <= {b.max_logprob_diff:.3g}), mean {self.mean_abs_logprob:.3g}")

    def to_dict(self) -> dict[str, Any]:
        b = self.budgets
        return {"tokens": self.tokens, "windows": self.windows, "max_abs_logprob": self.max_abs_logprob,
                "mean_abs_logprob": self.mean_abs_logprob, "ppl_onnxruntime": self.ppl_ort, "ppl_torch": self.ppl_torch,
                "ppl_ratio": self.ppl_ratio, "top1_agreement": self.top1, "passed": self.passed,
                "budgets": {"min_top1": b.min_top1, "max_ppl_ratio": b.max_ppl_ratio,
                            "max_logprob_diff": b.max_logprob_diff if math.isfinite(b.max_logprob_diff) else None}}


def windows(ids: np.ndarray, size: int) -> list[np.ndarray]:
    """``ids`` ``[1, N]`` cut into windows of ``size`` (the last may be shorter; one of a single token is dropped)."""
    return [ids[:, s:s + size] for s in range(0, ids.shape[1], size) if ids[:, s:s + size].shape[1] > 1]


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    wide = logits.astype(np.float64)
    shifted = wide - wide.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _torch_logits(model: Any, window: np.ndarray) -> np.ndarray:
    import torch

    ids = torch.from_numpy(window).to(next(model.parameters()).device)
    with quiet_libraries(), torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits.float().cpu().numpy()


def _scored(session: PairSession, model: Any, window: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per scored position: each side's log-probability of the next token, and whether their top-1 agree."""
    ours, theirs = _log_softmax(session.prompt_logits(window))[0, :-1], _log_softmax(_torch_logits(model, window))[0, :-1]
    following = window[0, 1:]
    rows = np.arange(following.shape[0])
    return ours[rows, following], theirs[rows, following], ours.argmax(-1) == theirs.argmax(-1)


def teacher_forced(session: PairSession, model: Any, ids: np.ndarray, budgets: Budgets = Budgets()) -> TeacherForced:
    """Teacher forcing of ``ids`` ``[1, N]`` (a tokenized text) through the pair and through ``model``."""
    parts = [_scored(session, model, w) for w in windows(ids, session.geometry.context)]
    ours, theirs, agree = (np.concatenate([p[i] for p in parts]) for i in range(3))
    diff = np.abs(ours - theirs)
    return TeacherForced(int(ours.size), len(parts), float(diff.max()), float(diff.mean()),
                         math.exp(-float(ours.mean())), math.exp(-float(theirs.mean())), float(agree.mean()), budgets)
