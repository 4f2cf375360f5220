"""What one quantization run does, resolved once from the target's defaults and the user's flags."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from portable.errors import UsageError
from portable.quantization.targets import TargetDefaults, target_defaults

__all__ = ["DEFAULT_FLOOR", "EIGHT_BIT_TYPES", "METHODS", "Budgets", "Settings", "resolve_settings"]

EIGHT_BIT_TYPES = ("uint8", "int8")  # opset 18 holds no other integer Q/DQ type (PORT030)
METHODS = ("minmax", "entropy", "percentile")


@dataclass(frozen=True)
class Budgets:
    """Accuracy budgets: the least SQNR (dB) of every output, the most top-1 disagreement (%)."""

    min_sqnr_db: float | None = None
    max_top1_drop_pct: float | None = None
    floor: bool = False  # True: no budget was given, these are the default floor (DEFAULT_FLOOR)

    @property
    def given(self) -> bool:
        return not self.floor and (self.min_sqnr_db is not None or self.max_top1_drop_pct is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"min_sqnr_db": self.min_sqnr_db, "max_top1_drop_pct": self.max_top1_drop_pct,
                "default_floor": self.floor}


# With no budget given, a result below these is not written: 20 dB is a noise a tenth of the signal's
# amplitude; 90 % top-1 agreement on logits. A budget of the user's own replaces both (--min-sqnr 0 writes
# whatever keeps the noise below the signal).
DEFAULT_FLOOR = Budgets(20.0, 10.0, floor=True)


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

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target.name, "activations": self.activations, "weights": self.weights,
                "per_channel": self.per_channel, "activations_per_tensor": True, "method": self.method,
                "exclude": list(self.exclude), "set_by_user": list(self.from_user),
                "from_target": [k for k in ("activations", "weights", "per_channel") if k not in self.from_user],
                "extra_options": dict(self.extra), "bias_correction": self.bias_correction,
                "target_defaults": self.target.to_dict()}


def _choice(flag: str, value: str | None, allowed: Sequence[str]) -> str | None:
    if value is None:
        return None
    if value.lower() not in allowed:
        raise UsageError(f"--{flag} {value!r}: choose from {', '.join(allowed)} (opset 18 holds 8-bit Q/DQ only)")
    return value.lower()


def resolve_settings(target: str | None = None, *, activations: str | None = None, weights: str | None = None,
                     per_channel: bool | None = None, method: str | None = None,
                     exclude: Iterable[str] = (), bias_correction: bool = True) -> Settings:
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
                    _choice("method", method, METHODS) or "minmax",
                    tuple(dict.fromkeys(e for e in exclude if e)), given, extra, bool(bias_correction))
