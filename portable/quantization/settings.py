"""What one quantization run does, resolved once from the target's defaults and the user's flags."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from portable.errors import UsageError
from portable.quantization.targets import TargetDefaults, target_defaults

__all__ = ["CONFIDENT", "DEFAULT_FLOOR", "DEFAULT_GOAL", "EIGHT_BIT_TYPES", "LINEAR_OPS", "METHODS", "MIN_CONFIDENT",
           "SCOPES", "Budgets", "Floor", "Settings", "resolve_settings"]

EIGHT_BIT_TYPES = ("uint8", "int8")  # opset 18 holds no other integer Q/DQ type (PORT030)
# activation ranges: ONNX Runtime's calibrators (minmax, entropy, percentile), the least-MSE range per tensor from
# its histograms (mse, ranges.py), or auto: min-max or MSE, whichever measures better on the calibration data
METHODS = ("auto", "minmax", "entropy", "percentile", "mse")
# What is quantized: "all" (every op ONNX Runtime's QDQ quantizer takes), "linear" (the inputs and weights of
# LINEAR_OPS only, SmoothQuant's W8A8 recipe: "we keep the activation of element-wise operators such as
# Softmax and LayerNorm in FP16", Xiao et al., ICML 2023, section 4), "auto" ("linear" for a model with a
# LayerNormalization on a target that takes float between layers, else "all")
SCOPES = ("auto", "all", "linear")
LINEAR_OPS = ("MatMul", "Gemm", "Conv", "Gather")  # Gather: an embedding table, int8 behind its DequantizeLinear


@dataclass(frozen=True)
class Floor:
    """What the default floor (or the default goal) asks of each kind of output (``judging.py`` decides the kind):
    logits, the top-1 agreement (%) on the confident band (the float model's top-1 probability at least
    ``CONFIDENT``) and the SQNR over every held-out sample; embeddings, the mean cosine; other tensors, the SQNR.
    Logits with fewer than ``MIN_CONFIDENT`` confident held-out samples are judged as a tensor (top-1 agreement
    there would judge noise on inputs the model cannot classify)."""

    top1_confident_pct: float
    logits_sqnr_db: float
    cosine: float
    sqnr_db: float

    def to_dict(self) -> dict[str, Any]:
        return {"logits": {"min_top1_confident_pct": self.top1_confident_pct, "min_sqnr_db": self.logits_sqnr_db,
                           "confident": CONFIDENT, "min_confident_samples": MIN_CONFIDENT},
                "embedding": {"min_cosine": self.cosine}, "tensor": {"min_sqnr_db": self.sqnr_db}}


CONFIDENT = 0.5  # the float model's top-1 probability from which a held-out sample is in the confident band
MIN_CONFIDENT = 8  # fewer confident samples than this: logits are judged as a tensor (by SQNR) by the floor


@dataclass(frozen=True)
class Budgets:
    """Accuracy budgets: the least SQNR (dB) of every output, the most top-1 disagreement (%), the least mean
    cosine of every output's vectors along its last axis (an encoder's token or sentence embeddings). ``floor``:
    no budget was given, and each output is judged by its kind's figure (``Floor``: the default floor, or the
    default goal the precision search aims at)."""

    min_sqnr_db: float | None = None
    max_top1_drop_pct: float | None = None
    min_cosine: float | None = None  # the mean cosine of every output's last-axis vectors (embeddings)
    floor: Floor | None = None  # the default floor or goal (DEFAULT_FLOOR, DEFAULT_GOAL): no budget was given

    @property
    def given(self) -> bool:
        return self.floor is None and any(v is not None for v in (self.min_sqnr_db, self.max_top1_drop_pct,
                                                                  self.min_cosine))

    def to_dict(self) -> dict[str, Any]:
        return {"min_sqnr_db": self.min_sqnr_db, "max_top1_drop_pct": self.max_top1_drop_pct,
                "min_cosine": self.min_cosine, "default_floor": self.floor is not None,
                "floor": self.floor.to_dict() if self.floor is not None else None}


# With no budget given, a result below these is not written (docs/quantize.md, "What the floor judges"):
# - logits: 95 % top-1 agreement where the float model is sure (its top-1 probability >= 0.5), and 10 dB SQNR
#   over every sample (a noise under a third of the signal's amplitude: the output still follows the float one).
#   Trained EfficientNet-Lite0 on 240 held-out photo crops: all-int8 100 % on its 41 confident crops (82.9 % on
#   the 199 unsure ones), 15.2 dB; the broken per-tensor file 80.5 % and 4.5 dB;
# - embeddings: a mean cosine of 0.99 (trained all-MiniLM-L6-v2 all-int8: 0.992 on its real tokens; per-tensor
#   weights 0.954; every op int8 without SmoothQuant or float islands 0.40);
# - other tensors: 20 dB, a noise a tenth of the signal's amplitude.
# A budget of the user's own replaces the floor (--min-sqnr 0 writes whatever keeps the noise below the signal).
DEFAULT_FLOOR = Budgets(floor=Floor(95.0, 10.0, 0.99, 20.0))
# With no budget given and real calibration data, an all-int8 result that misses this goal runs the precision
# search toward it; what it finds is then judged by the floor. Logits: 98 % on the confident band and 20 dB (the
# figures an int8 convnet is expected to hold; Lite0 all-int8 15.2 dB, with 3 convolutions float 22.1 dB); an
# embedding's goal is its floor (a trial per node kept float is minutes on a 110M-parameter encoder).
DEFAULT_GOAL = Budgets(floor=Floor(98.0, 20.0, 0.99, 20.0))


@dataclass(frozen=True)
class Settings:
    """The quantizer's choices, and which of them the user set (the rest are the target's)."""

    target: TargetDefaults
    activations: str
    weights: str
    per_channel: bool
    method: str
    exclude: tuple[str, ...] = ()
    from_user: tuple[str, ...] = ()  # names of the fields the user's flags set
    extra: dict[str, Any] = field(default_factory=dict)
    bias_correction: bool = True  # portable.quantization.correction before ONNX Runtime's quantizer
    smoothing: bool = True  # portable.quantization.smoothing (LayerNorm -> MatMul) before it
    float_islands: bool = True  # portable.quantization.islands: sentinel and outlier tensors left float
    scope: str = "auto"  # SCOPES
    symbolic_shape: bool = True  # quant_pre_process's symbolic shape inference (False: ONNX's alone; steps.py)
    adaround: bool | None = None  # portable.quantization.adaround; None: off (opt-in, adaround_for says why)
    equalization: bool | None = None  # portable.quantization.equalize; None: kept where it measures better
    logits_headroom: bool = True  # portable.quantization.ranges: a logits output's calibrated top doubled
    logits: tuple[str, ...] = ()  # the outputs judged as logits (the run's judging.py): what logits_headroom widens

    def adaround_for(self, op_types: set[str]) -> bool:
        """``adaround`` with None decided: off for every model, ``--adaround`` opts in. Measured end to end on
        EfficientNet-Lite0 with 80 calibration crops (bench/quantize_trained_bench.py, docs/quantize.md), every
        layer learned made the held-out logits 4.1 dB worse than round-to-nearest (11.36 vs 15.50 dB), though
        each layer's own output error fell to 0.66x nearest's: until that is understood it is not a default."""
        return bool(self.adaround) and bool(op_types)

    def per_channel_for(self, op_type: str) -> bool:
        """Whether this op type's weights are quantized per channel (the target may take some per-tensor only)."""
        return self.per_channel and op_type not in self.target.per_tensor_ops

    def resolved_scope(self, op_types: set[str]) -> str:
        """``scope`` with "auto" decided for a model of these op types."""
        if self.scope != "auto":
            return self.scope
        return "linear" if self.target.float_between_layers and "LayerNormalization" in op_types else "all"

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target.name, "activations": self.activations, "weights": self.weights,
                "per_channel": self.per_channel, "activations_per_tensor": True, "method": self.method,
                "exclude": list(self.exclude), "set_by_user": list(self.from_user),
                "from_target": [k for k in ("activations", "weights", "per_channel") if k not in self.from_user],
                "extra_options": dict(self.extra), "bias_correction": self.bias_correction,
                "smoothing": self.smoothing, "float_islands": self.float_islands, "scope": self.scope,
                "shape_inference": "symbolic" if self.symbolic_shape else "onnx",
                "adaround": self.adaround, "equalization": self.equalization,
                "logits_headroom": self.logits_headroom, "logits_outputs": list(self.logits),
                "target_defaults": self.target.to_dict()}


def _choice(flag: str, value: str | None, allowed: Sequence[str]) -> str | None:
    if value is None:
        return None
    if value.lower() not in allowed:
        raise UsageError(f"--{flag} {value!r}: choose from {', '.join(allowed)} (opset 18 holds 8-bit Q/DQ only)")
    return value.lower()


def resolve_settings(target: str | None = None, *, activations: str | None = None, weights: str | None = None,
                     per_channel: bool | None = None, method: str | None = None,
                     exclude: Iterable[str] = (), bias_correction: bool = True, smoothing: bool = True,
                     float_islands: bool = True, scope: str | None = None, adaround: bool | None = None,
                     equalization: bool | None = None, logits_headroom: bool = True) -> Settings:
    """The target's defaults with the user's flags on top (``None``: not given)."""
    base = target_defaults(target)
    activations_type = _choice("activation-type", activations, EIGHT_BIT_TYPES)
    weights_type = _choice("weight-type", weights, EIGHT_BIT_TYPES)
    given = tuple(k for k, v in (("activations", activations_type), ("weights", weights_type),
                                 ("per_channel", per_channel)) if v is not None)
    weights_type = weights_type or base.weights
    per_channel = base.per_channel if per_channel is None else per_channel
    # a weight type of the user's own is quantized as ONNX Runtime does by default: symmetric when signed
    extra = {"ActivationSymmetric": base.activation_symmetric,
             "WeightSymmetric": base.weight_symmetric if weights_type == base.weights else weights_type == "int8",
             **base.extra}
    return Settings(base, activations_type or base.activations, weights_type, bool(per_channel),
                    _choice("method", method, METHODS) or "auto",
                    tuple(dict.fromkeys(e for e in exclude if e)), given, extra, bool(bias_correction),
                    bool(smoothing), bool(float_islands), _choice("scope", scope, SCOPES) or "auto",
                    adaround=adaround, equalization=equalization, logits_headroom=bool(logits_headroom))
