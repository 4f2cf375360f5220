"""Exporting from a SPEC (what the CLI and ``make demo`` call)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError
from portable.exporters.inputs import CliInput, parse_input
from portable.exporters.provenance import project_root
from portable.policy import Policy
from portable.progress import Phases

if TYPE_CHECKING:
    from portable.runners.tolerances import ToleranceTable

__all__ = ["bind_inputs", "export_spec", "load_for_export"]


def _parameters(module: Any) -> list[inspect.Parameter] | None:
    """forward's named parameters in order; None when it takes ``*args`` (nothing to bind names to)."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]


def bind_inputs(module: Any, specs: Sequence[CliInput], examples: Sequence[Any] | None) -> list[CliInput]:
    """``-i NAME=...`` bound to forward's parameter NAME, in forward's order (not the order given): a name
    that is not a parameter, twice the same, or a required parameter left out is a usage error listing
    forward's names; a dtype not given is the example input's at that parameter (int64 token ids stay
    int64), else float32."""
    params = _parameters(module)
    if params is None:
        return list(specs)
    names = [p.name for p in params]
    given = {s.name: s for s in specs}
    real = ", ".join(names) or "none"
    unknown = [s.name for s in specs if s.name not in names]
    if unknown:
        raise UsageError(f"-i {unknown[0]}: not an input of {type(module).__name__}.forward (its inputs: {real})")
    if len(given) != len(specs):
        raise UsageError(f"-i: an input given twice ({', '.join(s.name for s in specs)})")
    missing = [p.name for p in params if p.name not in given and p.default is inspect.Parameter.empty]
    if missing:
        raise UsageError(f"-i: {', '.join(missing)} not given, and forward has no default for it (its inputs: {real})")
    bound = [p for p in params if p.name in given]
    skipped = [p.name for p in params[:params.index(bound[-1])] if p.name not in given]
    if skipped:
        raise UsageError(f"-i: {', '.join(skipped)} not given, but forward takes it before "
                         f"{bound[-1].name} (its inputs: {real})")
    example = dict(zip(names, examples or ()))
    return [_with_example_dtype(given[p.name], example.get(p.name)) for p in bound]


def _with_example_dtype(spec: CliInput, example: Any) -> CliInput:
    if spec.dtype_given or example is None or not hasattr(example, "dtype"):
        return spec
    return replace(spec, dtype=str(example.dtype).removeprefix("torch."))


def load_for_export(spec: str, inputs: Sequence[str | CliInput], weights: str | Path | None = None,
                    ) -> tuple[Any, tuple[Any, ...], tuple[str, ...] | None, Path]:
    """Module, example inputs, input names (from ``-i``) and the provenance root of a SPEC."""
    from portable.spec import load_spec, load_weights

    loaded = load_spec(spec)
    if weights is not None:
        load_weights(loaded.module, weights)
    specs = [parse_input(i) if isinstance(i, str) else i for i in inputs]
    if specs:
        specs = bind_inputs(loaded.module, specs, loaded.example_inputs)
        args = tuple(s.tensor(seed=k) for k, s in enumerate(specs))
        names: tuple[str, ...] | None = tuple(s.name for s in specs)
    elif loaded.example_inputs is not None:
        args, names = loaded.example_inputs, None
    else:
        raise UsageError(f"SPEC {spec!r} gives no example inputs: pass -i NAME=1x3x224x224[:dtype]")
    return loaded.module, args, names, project_root(loaded.root)


def export_spec(spec: str, output: str | Path, inputs: Sequence[str | CliInput] = (), *, batch: str | int = "dynamic",
                precision: str = "fp32", weights: str | Path | None = None, policy: Policy | None = None,
                verify: bool = True, force: bool = False, quiet: bool = True, phases: Phases | None = None,
                tolerances: ToleranceTable | None = None) -> Any:
    """Load ``spec`` and export it to ``output``; returns the :class:`ExportResult`."""
    from portable.exporters.api import export

    phases = phases or Phases(quiet)
    with phases.phase("load"):
        module, args, names, root = load_for_export(spec, inputs, weights)
    return export(module, args, output, batch=batch, precision=precision, policy=policy, input_names=names,
                  root=root, verify=verify, force=force, phases=phases, spec=spec, tolerances=tolerances)
