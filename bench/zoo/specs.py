"""Each zoo model as a SPEC, for ``portable export`` and the fleet: ``bench.zoo.specs:tv_resnet18``.

A name of :mod:`bench.zoo.registry` is a callable here that builds the entry with the zoo's live weights
(``bench/zoo/weights.py``) and returns ``(module, example_inputs)``. PyPI's torchvision needs its ops
registered before it (or transformers, which imports it) is imported: done at import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

__all__ = ["built", "spec"]

if importlib.util.find_spec("torchvision") is not None:
    from bench.zoo.tvops import register_torchvision_ops

    register_torchvision_ops()


def built(name: str) -> Any:
    """The entry ``name`` built as the zoo builds it (seeded weights, none all-zero, BatchNorm calibrated)."""
    from bench.zoo.registry import Built, entries
    from bench.zoo.weights import live_weights

    (entry,) = entries(name)
    made = entry.build()
    return Built(live_weights(made.module, made.args, calibrate=entry.task != "detection"), made.args, made.names)


def spec(name: str) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    """The SPEC callable of the entry ``name``."""

    def build() -> tuple[Any, tuple[Any, ...]]:
        made = built(name)
        return made.module, made.args

    build.__name__ = name
    return build


def __getattr__(name: str) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    """``bench.zoo.specs.NAME``: the SPEC callable of the zoo's model NAME (PEP 562)."""
    from bench.zoo.registry import REGISTRY, entries

    entries()
    if name not in REGISTRY:
        raise AttributeError(name)
    return spec(name)


def __dir__() -> list[str]:
    from bench.zoo.registry import REGISTRY, entries

    entries()
    return sorted(REGISTRY)
