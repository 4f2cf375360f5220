"""Each zoo model as a SPEC, for ``portable export`` and the fleet: ``bench.zoo.specs:tv_resnet18``.

A name of :mod:`bench.zoo.registry` is a callable here that builds the entry with the zoo's live weights
(``bench/zoo/weights.py``) and returns ``(module, example_inputs)``, the module's forward taking the inputs by
the registry's names (``pixel_values``, ``input_ids``, ...): ``portable export`` names a file's inputs after
forward's parameters, and the zoo's files keep the names it always gave them. PyPI's torchvision needs its
ops registered before it (or transformers, which imports it) is imported: done at import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

__all__ = ["built", "named", "spec"]

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


def named(module: Any, names: tuple[str, ...]) -> Any:
    """``module`` with forward's parameters called ``names`` (itself when they are; else a thin wrapper).

    The wrapper's forward is written out (``exec``) because its parameters' own names are what torch.export
    and so ``portable export`` name the inputs after; ``*args`` would give ``args_0``."""
    import inspect

    import torch

    if list(inspect.signature(module.forward).parameters)[:len(names)] == list(names):
        return module
    if not all(n.isidentifier() for n in names):
        raise ValueError(f"input names must be identifiers: {names}")
    params = ", ".join(names)
    scope: dict[str, Any] = {}
    exec(f"def forward(self, {params}):\n    return self.inner({params})\n", scope)  # identifiers only: checked above

    def init(self: Any, inner: Any) -> None:
        torch.nn.Module.__init__(self)
        self.inner = inner

    wrapper = type(f"{type(module).__name__}Inputs", (torch.nn.Module,), {"__init__": init, "forward": scope["forward"]})
    return wrapper(module).eval()


def spec(name: str) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    """The SPEC callable of the entry ``name``."""

    def build() -> tuple[Any, tuple[Any, ...]]:
        made = built(name)
        return named(made.module, made.names), made.args

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
