"""``portable.quantize``: a portable float model in, a portable int8 QDQ model out, its cost measured."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from portable.errors import UsageError
from portable.policy import Policy, load_policy
from portable.quantization.plan import DEFAULT_BATCH, DEFAULT_EVAL_SAMPLES, DEFAULT_SAMPLES, DEFAULT_SEARCH_LIMIT, Plan
from portable.quantization.result import QuantizeFailed, QuantizeResult
from portable.quantization.settings import DEFAULT_FLOOR, Budgets, resolve_settings

__all__ = ["DEFAULT_BATCH", "DEFAULT_EVAL_SAMPLES", "DEFAULT_SAMPLES", "QuantizeFailed", "QuantizeResult", "quantize"]


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    return value


def _preprocess(value: str | None, calibration: str | Path | None, eval_data: str | Path | None) -> str | None:
    """--preprocess checked before any model is read: a known preset, and a folder to apply it to."""
    from portable.quantization.images import PREPROCESS

    if value is None:
        return None
    if value not in PREPROCESS:
        raise UsageError(f"--preprocess {value!r}: choose from {', '.join(PREPROCESS)}")
    if not any(p is not None and Path(p).is_dir() for p in (calibration, eval_data)):
        raise UsageError(f"--preprocess {value}: for --calibration/--eval given as a folder of images")
    return value


def _judge(judge: Mapping[str, str] | None) -> dict[str, str]:
    from portable.quantization.judging import parse_judge

    return parse_judge([f"{k}={v}" for k, v in (judge or {}).items()])


def _search_limit(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"search_limit must be 0 or more, got {value!r}")
    return value


def _budgets(min_sqnr: float | None, max_top1_drop: float | None, min_cosine: float | None = None) -> Budgets:
    """The user's budgets; with neither given, the default floor (a result below it is not written)."""
    if max_top1_drop is not None and not 0 <= max_top1_drop <= 100:
        raise UsageError(f"--max-top1-drop {max_top1_drop}: a percentage, 0 to 100")
    if min_cosine is not None and not -1 <= min_cosine <= 1:
        raise UsageError(f"--min-cosine {min_cosine}: a cosine, -1 to 1")
    if min_sqnr is None and max_top1_drop is None and min_cosine is None:
        return DEFAULT_FLOOR
    return Budgets(min_sqnr, max_top1_drop, min_cosine)


def quantize(model: str | Path, output: str | Path, *, calibration: str | Path | None = None,
             eval_data: str | Path | None = None, samples: int = DEFAULT_SAMPLES,
             eval_samples: int = DEFAULT_EVAL_SAMPLES, batch: int = DEFAULT_BATCH, seed: int = 0,
             target: str | None = None, activations: str | None = None, weights: str | None = None,
             per_channel: bool | None = None, method: str | None = None, exclude: Iterable[str] = (),
             int_ranges: Mapping[str, tuple[int, int]] | None = None, min_sqnr: float | None = None,
             max_top1_drop: float | None = None, min_cosine: float | None = None, latency: bool = True, per_node: bool = True,
             timing: Any = None, policy: Policy | None = None, force: bool = False,
             quiet: bool = True, bias_correction: bool = True, smoothing: bool = True,
             float_islands: bool = True, scope: str | None = None, adaround: bool | None = None,
             equalization: bool | None = None, search_limit: int = DEFAULT_SEARCH_LIMIT,
             preprocess: str | None = None, judge: Mapping[str, str] | None = None,
             logits_headroom: bool = True) -> QuantizeResult:
    """Quantize the portable model at ``model`` to 8-bit QDQ with ONNX Runtime, write it to ``output``.

    Calibration: the user's ``calibration`` .npz (keys: input names, samples on a leading axis;
    its last quarter is held out unless ``eval_data`` gives the held-out samples), else ``samples``
    seeded ones (``eval_samples`` more held out). ``target`` picks the defaults of
    :data:`portable.quantization.targets.TARGETS`; ``activations``, ``weights``, ``per_channel``
    and ``method`` override them. ``min_sqnr`` (dB, every output) and ``max_top1_drop`` (%, every
    output judged as logits) and ``min_cosine`` (the mean cosine of every output's last-axis
    vectors: an encoder's embeddings) are budgets; given one, the precision search keeps up to
    ``search_limit`` of the most sensitive nodes in float until they hold
    (:mod:`portable.quantization.search`). With none, the default floor judges each output by its kind's
    figure (:data:`portable.quantization.settings.DEFAULT_FLOOR`: logits 95 % top-1 agreement where the float
    model is sure and 10 dB, embeddings a mean cosine of 0.99, other tensors 20 dB); with real
    ``calibration`` data, an all-int8 result that misses the default goal
    (:data:`portable.quantization.settings.DEFAULT_GOAL`: logits 98 % and 20 dB) runs the search toward it
    first (``search_limit=0``: no search). Before ONNX Runtime's quantizer, ``smoothing`` runs :mod:`portable.quantization.smoothing`
    (LayerNorm -> MatMul), ``float_islands`` keeps out the tensors of :mod:`portable.quantization.islands`
    (masking sentinels, outlier channels), ``equalization`` runs :mod:`portable.quantization.equalize` (None: kept
    where it measures better on the calibration data), ``adaround`` :mod:`portable.quantization.adaround` (None: off,
    ``Settings.adaround_for`` says why) and ``bias_correction`` :mod:`portable.quantization.correction`;
    ``logits_headroom`` keeps the outputs judged as logits from saturating at the calibration's largest logit
    (:data:`portable.quantization.ranges.LOGITS_HEADROOM`; with the ranges portable computes, ``method`` "auto" or
    "mse"). ``scope`` ("auto", "all", "linear": :data:`portable.quantization.settings.SCOPES`) says what is quantized.
    ``judge`` (output name -> "logits", "embedding" or "tensor") overrides what judges an output
    (:mod:`portable.quantization.judging` decides it otherwise, and the report says why).

    Returns the result once written. Raises :class:`QuantizeFailed` (exit 1, nothing written) when
    the quantized model fails the contract or a budget; :class:`portable.errors.UsageError` (exit
    2) for bad arguments, a non-portable input or calibration data that does not fit it;
    :class:`portable.errors.InputError` (exit 3) for an unreadable file.
    """
    from portable.quantization.run import run

    plan = Plan(Path(model), Path(output),
                resolve_settings(target, activations=activations, weights=weights, per_channel=per_channel,
                                 method=method, exclude=exclude, bias_correction=bias_correction,
                                 smoothing=smoothing, float_islands=float_islands, scope=scope,
                                 adaround=adaround, equalization=equalization, logits_headroom=logits_headroom),
                _budgets(min_sqnr, max_top1_drop, min_cosine), policy or load_policy(),
                Path(calibration) if calibration is not None else None,
                Path(eval_data) if eval_data is not None else None, _positive("samples", samples),
                _positive("eval_samples", eval_samples), _positive("batch", batch), int(seed), dict(int_ranges or {}),
                latency, per_node, timing, preprocess=_preprocess(preprocess, calibration, eval_data),
                search_limit=_search_limit(search_limit), judge=_judge(judge))
    return run(plan, quiet=quiet, force=force)
