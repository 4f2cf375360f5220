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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import UsageError, one_line
from portable.runners.generation import PairFiles, PairSession, Trace, float64_logits, prompt_ids, torch_generate
from portable.runners.generation_latency import measure_generation, measure_torch_generation
from portable.runners.generation_report import (
    GenerationComparison,
    GenerationReport,
    compare_traces,
    failed_reference,
    spread,
    tolerance_for,
)
from portable.runners.teacher_forced import Budgets, teacher_forced
from portable.runners.timing import TimingConfig
from portable.runners.tolerances import ToleranceTable
from portable.spec import LoadedSpec

__all__ = ["DEFAULT_PROMPT", "DEFAULT_TOKENS", "Text", "compare_text_generation", "text_for"]

DEFAULT_TOKENS = 32
DEFAULT_PROMPT = 20  # not a multiple of the default prefill block (32): the padded block is exercised
DYNAMIC_BATCH = 3  # a dynamic pair is proven at a batch it was not traced at (the exporter traces at 2)
Progress = Callable[[str], None]


def compare_text_generation(pair: str | Path | PairFiles, model: Any, *, tokens: int = DEFAULT_TOKENS,
                            prompt_length: int | None = None, seed: int = 0, compile: bool = True,
                            tolerances: ToleranceTable | None = None, timing: TimingConfig | None = None,
                            progress: Progress | None = None, text: Text | None = None,
                            device: str = "cpu", cuda_graph: bool = False) -> GenerationReport:
    """Greedy generation of ``tokens`` tokens from a seeded prompt (or ``text.prompt``) through the pair in
    ONNX Runtime and through ``model.generate``, and teacher forcing over ``text.teacher`` when given; see
    the module docstring. ``model``: the transformers causal LM the pair was exported from (eval mode is set
    for the call). ``device``: ``cpu``, or ``cuda``: the pair on ONNX Runtime's CUDA provider (cache on the
    GPU), the model on the same GPU, and the timing of eager and compiled ``generate`` there too."""
    say = progress or (lambda _msg: None)
    files = pair if isinstance(pair, PairFiles) else PairFiles.find(pair)
    if files.quantization and (text is None or text.teacher is None):  # before any session is made
        raise UsageError("a weight-only pair is judged by budgets on real text: give --text FILE (docs/llm.md)")
    session = _pair_session(files, device, cuda_graph)
    model = _on(model, device)
    prompt = _prompt(session, model, tokens, prompt_length, seed, text)
    say(f"ONNX Runtime ({device}): {tokens} greedy token(s) after a prompt of {prompt.shape[1]}")
    ours = session.generate(prompt, tokens)
    exact = _Float64(model, prompt, ours, tolerances, say)
    comparisons = [_against(ours, model, prompt, tokens, compiled, tolerances, say, exact, device) for compiled in
                   ((False, True) if compile else (False,))]
    latency = _latency(session, model, prompt, tokens, timing, device, compile, say) if timing is not None else None
    setup = {"seed": None if text and text.prompt is not None else seed, "tokens": tokens,
             "prompt_length": prompt.shape[1], "context": session.geometry.context,
             "prefill_tokens": session.geometry.prefill_tokens, "float64": exact.note, "device": device,
             "cuda_graph": cuda_graph, "reference_precision": _precision_of(model)}
    report = _report(files, prompt, ours, comparisons, latency, setup)
    if files.quantization:  # a weight-only pair: its logits move by design, the text's budgets judge it
        report = replace(report, judged_by="budgets")
    return _with_text(report, session, model, text, say) if text is not None else report


def _precision_of(model: Any) -> str:
    """The reference's own floating type, as the export names it (fp32, fp16, bf16)."""
    dtype = str(next((p.dtype for p in model.parameters() if p.is_floating_point()), "torch.float32"))
    return {"torch.float16": "fp16", "torch.bfloat16": "bf16"}.get(dtype, "fp32")


def _pair_session(files: PairFiles, device: str, cuda_graph: bool = False) -> PairSession:
    if device not in ("cpu", "cuda"):
        raise UsageError(f"device {device!r}: text generation runs on cpu or cuda")
    if device == "cpu":
        return PairSession(files, cuda_graph=cuda_graph)
    import torch

    if not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device here (torch.cuda.is_available() is False)")
    # strict fp32 as PyTorch's CUDA matmuls are by default: the CUDA provider's TF32 off (its default is on)
    return PairSession(files, providers=(("CUDAExecutionProvider", {"use_tf32": "0"}),), device="cuda",
                       cuda_graph=cuda_graph)


def _on(model: Any, device: str) -> Any:
    """The reference on ``device`` (the CLI's own copy; a caller's model on the CPU stays there)."""
    return model if device == "cpu" else model.to(device)


def _latency(session: PairSession, model: Any, prompt: np.ndarray, tokens: int, timing: TimingConfig, device: str,
             compile: bool, say: Progress) -> dict[str, Any]:
    """ONNX Runtime's generation timed; on a GPU, eager and compiled ``generate`` on the same GPU beside it."""
    say(f"timing ONNX Runtime's generation ({device})")
    name = f"onnxruntime-{device}"
    out = {name: measure_generation(session, prompt, tokens, timing, runner=name).to_dict()}
    if device == "cuda":
        for compiled in (False, True) if compile else (False,):
            say(f"timing PyTorch generate ({'compiled, reduce-overhead' if compiled else 'eager'}) on the GPU")
            figures = measure_torch_generation(model, prompt, tokens, timing, compiled=compiled, device=device)
            out[figures.runner] = figures.to_dict()
    return out


@dataclass(frozen=True)
class Text:
    """Real text for the proof, tokenized by the model's own tokenizer: a ``prompt`` ``[1, L]`` to generate
    from, a ``teacher`` text ``[1, N]`` to score by teacher forcing, and ``decode`` to show the texts."""

    prompt: np.ndarray | None = None
    teacher: np.ndarray | None = None
    decode: Callable[[Sequence[int]], str] | None = None
    budgets: tuple[float | None, float | None, float | None] = (None, None, None)  # as given; None: the default


def text_for(spec: str | LoadedSpec, model: Any, prompt: str | None, text_file: str | Path | None,
             budgets: tuple[float | None, float | None, float | None] = (None, None, None)) -> Text | None:
    """``--prompt``'s and ``--text``'s token ids by the model's own tokenizer (``portable.spec.load_tokenizer``),
    or None when neither is given."""
    if prompt is None and text_file is None:
        return None
    from portable.spec import load_tokenizer

    if prompt is not None and not prompt.strip():
        raise UsageError("--prompt: the text is empty")
    tokenizer = load_tokenizer(spec, model)
    _check_vocabulary(tokenizer, model, spec.spec if isinstance(spec, LoadedSpec) else spec)
    ids = lambda words: np.array([tokenizer(words)["input_ids"]], np.int64)  # noqa: E731
    teacher = ids(Path(text_file).read_text(encoding="utf-8")) if text_file else None
    if teacher is not None and teacher.shape[1] < 2:
        raise UsageError(f"--text {text_file}: fewer than 2 tokens, nothing to score")
    return Text(ids(prompt) if prompt is not None else None, teacher, lambda t: str(tokenizer.decode(list(t))),
                budgets)


def _check_vocabulary(tokenizer: Any, model: Any, spec: str) -> None:
    """A tokenizer whose ids the model has no row for is another model's: a usage error before any work."""
    size, vocab = len(tokenizer), _vocab(model)
    if size > vocab:
        raise UsageError(f"the tokenizer of {spec} has {size} tokens and the model {vocab}: it is not this model's "
                         "tokenizer (its ids would index past the embedding)")


def _prompt(session: PairSession, model: Any, tokens: int, length: int | None, seed: int, text: Text | None) -> np.ndarray:
    """The prompt: the text's (repeated over a dynamic pair's proof batch), or seeded ids of ``length``."""
    geometry = session.geometry
    rows = geometry.batch or DYNAMIC_BATCH
    if text is not None and text.prompt is not None:
        session.check_fits(text.prompt.shape[1], tokens)
        return np.repeat(text.prompt, rows, axis=0)
    length = length if length is not None else min(DEFAULT_PROMPT, geometry.context - tokens + 1)
    session.check_fits(length, tokens)
    return prompt_ids(rows, length, _vocab(model), seed)


def _with_text(report: GenerationReport, session: PairSession, model: Any, text: Text, say: Progress) -> GenerationReport:
    texts = None
    if text.decode is not None:
        texts = {"prompt": text.decode(report.prompt[0]), "onnxruntime": text.decode(report.tokens[0])}
        texts |= {c.reference: text.decode(c.tokens[0]) for c in report.comparisons if c.tokens}
    forced = None
    if text.teacher is not None:
        say(f"teacher forcing over {text.teacher.shape[1]} tokens of text (ONNX Runtime and PyTorch)")
        budgets = Budgets.of(report.judged_by == "budgets", *text.budgets, precision=_precision_of(model))
        forced = teacher_forced(session, model, text.teacher, budgets)
    return replace(report, texts=texts, teacher_forced=forced)


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
        # float16 logits too: the reference is then the model in float16, and float64 runs those same weights
        floating = bool(ours.logits) and ours.logits[0].dtype in (np.float32, np.float16)
        self.applies = floating and not given
        self.note = "not needed" if self.applies else ("--atol/--rtol as given (no float64 calibration)" if given
                                                       else "default tolerances only (float32 and float16 logits only)")
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
             say: Progress, exact: _Float64, device: str = "cpu") -> GenerationComparison:
    name = "torch-compiled" if compiled else "torch-eager"
    tolerance = tolerance_for(ours.logits, table)
    say(f"PyTorch generate ({'torch.compile, static cache' if compiled else 'eager'})")
    was_training = model.training
    model.eval()
    try:
        theirs = torch_generate(model, prompt, tokens, compiled=compiled, device=device)
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
