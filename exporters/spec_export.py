"""Exporting from a SPEC (what the CLI and ``make demo`` call)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError
from portable.exporters.inputs import CliInput, parse_input
from portable.exporters.provenance import project_root
from portable.policy import Policy
from portable.progress import Phases

if TYPE_CHECKING:
    from portable.runners.tolerances import ToleranceTable

__all__ = ["export_spec", "load_for_export"]


def load_for_export(spec: str, inputs: Sequence[str | CliInput], weights: str | Path | None = None,
                    ) -> tuple[Any, tuple[Any, ...], tuple[str, ...] | None, Path]:
    """Module, example inputs, input names (from ``-i``) and the provenance root of a SPEC."""
    from portable.spec import load_spec, load_weights

    loaded = load_spec(spec)
    if weights is not None:
        load_weights(loaded.module, weights)
    specs = [parse_input(i) if isinstance(i, str) else i for i in inputs]
    if specs:
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
