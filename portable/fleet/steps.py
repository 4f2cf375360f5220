"""The step registry: a step is data (its name, what it needs) and a function, listed explicitly.

A plug-in (``[defaults] plugins = ["bench.zoo.step"]``) is a module that calls :func:`register` when
imported; the driver and every worker import the fleet's plug-ins before they look a step up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from portable.errors import ConfigError
from portable.fleet import builtin
from portable.fleet.records import StepContext, StepOutcome

__all__ = ["EXPORT", "STEPS", "Step", "load_plugins", "ordered", "register", "resources"]

EXPORT = "export"


@dataclass(frozen=True)
class Step:
    """One step of a fleet. ``needs_file``: it works on the export's file (skipped when there is none);
    ``on_device``: it runs on the model's ``device`` (a GPU for ``cuda``: a Ray task asks for one);
    ``depends``: the settings its result depends on (with its own ``args``): a change of another setting
    does not run it again."""

    name: str
    run: Callable[[StepContext], StepOutcome]
    about: str
    needs_file: bool = True
    on_device: bool = False
    cpus: float = 1.0
    depends: tuple[str, ...] = ("batch", "targets", "device")


STEPS: dict[str, Step] = {step.name: step for step in (
    Step(EXPORT, builtin.export, "portable export (an .onnx file: portable fix, or nothing when portable)", needs_file=False,
         depends=("batch",)),
    Step("validate", builtin.validate, "portable validate --target: the contract and each target's offline verdict",
         depends=("targets",)),
    Step("live", builtin.live, "portable validate --target --live: the runtimes installed here asked", depends=("targets",)),
    Step("quantize", builtin.quantize, "portable quantize: int8 accuracy and latency ratio", depends=()),
    Step("compare", builtin.compare, "portable compare: parity against the model's PyTorch", on_device=True,
         depends=("device",)),
)}


def register(step: Step) -> None:
    """Add a plug-in step (a name already taken by another function is refused)."""
    known = STEPS.get(step.name)
    if known is not None and known.run is not step.run:
        raise ConfigError(f"step {step.name!r} is registered twice")
    STEPS[step.name] = step


def load_plugins(modules: Sequence[str]) -> None:
    """Import each plug-in module (it registers its steps); one that cannot be imported is a usage error."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"plug-in {name!r} cannot be imported: {exc}") from None


def ordered(names: Sequence[str], where: str, path: str | None = None) -> tuple[str, ...]:
    """``names`` checked against the registry, in the registry's order (export first)."""
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        raise ConfigError(f"unknown step {unknown[0]!r} in {where} (known: {', '.join(STEPS)})", path=path)
    return tuple(n for n in STEPS if n in names)


def resources(step: Step, device: str) -> tuple[float, float]:
    """(CPUs, GPUs) the step asks for on a model with ``device``."""
    return step.cpus, 1.0 if step.on_device and device.startswith("cuda") else 0.0
