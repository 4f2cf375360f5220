"""The zoo's entries: a name, a builder of (module, example inputs, input names), the expected outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["PORTABLE", "QUANTIZED", "REGISTRY", "TARGETS", "Built", "Entry", "entries"]

PORTABLE = "portable"  # static apart from the batch: must export with --batch dynamic, validate and verify
TARGETS = ("hf_bert", "hf_gpt2", "tv_convnext_tiny", "tv_swin_t")  # issue 11: all of these must pass
# issue 24: the CNNs and encoders quantized (ResNet, MobileNetV3, EfficientNet, ConvNeXt, ViT, BERT)
QUANTIZED = ("tv_resnet18", "tv_mobilenet_v3_small", "tv_efficientnet_b0", "tv_convnext_tiny", "tv_vit", "hf_bert")


@dataclass(frozen=True)
class Built:
    """What a builder returns: the module (random weights, seeded), example inputs at batch 2, their names."""

    module: Any
    args: tuple[Any, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """One zoo model. ``expected``: ``portable`` or ``refused: PORTnnn`` (why in ``note``)."""

    name: str
    family: str  # torchvision, timm, transformers
    task: str
    build: Callable[[], Built]
    expected: str = PORTABLE
    note: str = ""
    timeout_s: int = 900
    quantize: bool = False  # issue 24: also quantized to int8 QDQ (`portable quantize`), its cost measured


def _all() -> tuple[Entry, ...]:
    from bench.zoo.models_hf import HF
    from bench.zoo.models_vision import TIMM, TORCHVISION

    return TORCHVISION + TIMM + HF


REGISTRY: dict[str, Entry] = {}


def entries(only: str | None = None) -> list[Entry]:
    """Every entry, or those named in ``only`` (comma-separated; an unknown name is an error)."""
    if not REGISTRY:
        REGISTRY.update((e.name, replace(e, quantize=e.name in QUANTIZED)) for e in _all())
    if not only:
        return list(REGISTRY.values())
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise SystemExit(f"unknown zoo model(s): {', '.join(unknown)} (known: {', '.join(REGISTRY)})")
    return [REGISTRY[n] for n in names]
