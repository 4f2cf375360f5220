"""Exporting from a SPEC or a Hugging Face model folder (what the CLI and ``make demo`` call)."""

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

__all__ = ["bind_inputs", "export_folder", "export_spec", "load_for_export"]


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


def load_for_export(spec: str, inputs: Sequence[str | CliInput], weights: str | Path | None = None, *,
                    task: str | None = None, shapes: Sequence[str] = (), trust_remote_code: bool = False,
                    ) -> tuple[Any, tuple[Any, ...], tuple[str, ...] | None, Path]:
    """Module, example inputs, input names (from ``-i``) and the provenance root of a SPEC, or of a model
    folder (its task's module and inputs at ``shapes``)."""
    from portable.hf.folder import is_folder_reference
    from portable.spec import load_spec, load_weights

    if is_folder_reference(spec):
        loaded = _folder(spec, inputs, weights, task, shapes, trust_remote_code)
        return loaded.module, loaded.args, loaded.names, loaded.plan.folder.path

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


def _folder(spec: str, inputs: Sequence[str | CliInput], weights: str | Path | None, task: str | None,
            shapes: Sequence[str], trust_remote_code: bool) -> Any:
    """A model folder loaded for export (``-i`` refused: a folder's inputs are its task's)."""
    from portable.hf.load import load_folder

    if inputs:
        raise UsageError("-i: a model folder's inputs are its task's (input_ids, attention_mask, ...; pixel_values): "
                         "size them with --shape sequence_length=N or --shape height=H --shape width=W")
    return load_folder(spec, task, shapes, trust_remote_code, weights)


def export_folder(folder: str, output: str | Path, *, task: str | None = None, shapes: Sequence[str] = (),
                  trust_remote_code: bool = False, batch: str | int = "dynamic", precision: str = "fp32",
                  policy: Policy | None = None, verify: bool = True, force: bool = False, quiet: bool = True,
                  phases: Phases | None = None, tolerances: ToleranceTable | None = None) -> Any:
    """Export a Hugging Face model folder (or a hub id in the local cache) for ``task`` (None: the folder's own)
    at ``shapes`` (``["sequence_length=128"]``), its tokenizer or image processor written beside the file
    (:mod:`portable.hf.assets`); returns the :class:`ExportResult`."""
    from portable.exporters.api import export
    from portable.exporters.writer import check_target
    from portable.hf.assets import Sidecar, sidecar_path

    phases = phases or Phases(quiet)
    check_target(Path(output), force)  # exit 2 before the model loads
    check_target(sidecar_path(Path(output)), force, folder=True)
    with phases.phase("load"):
        loaded = _folder(folder, (), None, task, shapes, trust_remote_code)
        if loaded.task == "text-generation":
            raise UsageError("text-generation exports a prefill/decode pair: use `portable export FOLDER --task "
                             "text-generation` (or portable.exporters.textgen.export_text_generation)")
        sidecar = Sidecar.of(loaded, Path(output))
    return export(loaded.module, loaded.args, output, batch=batch, precision=precision, policy=policy,
                  input_names=loaded.names, root=loaded.plan.folder.path, verify=verify, force=force, phases=phases,
                  spec=folder, tolerances=tolerances, sidecar=sidecar)


def export_spec(spec: str, output: str | Path, inputs: Sequence[str | CliInput] = (), *, batch: str | int = "dynamic",
                precision: str = "fp32", weights: str | Path | None = None, policy: Policy | None = None,
                verify: bool = True, force: bool = False, quiet: bool = True, phases: Phases | None = None,
                tolerances: ToleranceTable | None = None, task: str | None = None, shapes: Sequence[str] = (),
                trust_remote_code: bool = False) -> Any:
    """Load ``spec`` and export it to ``output``; returns the :class:`ExportResult`. A model folder goes to
    :func:`export_folder` (``task``, ``shapes``, ``trust_remote_code`` are its)."""
    from portable.exporters.api import export
    from portable.hf.folder import is_folder_reference

    if is_folder_reference(spec):
        if inputs or weights is not None:
            _folder(spec, inputs, weights, task, (), False)  # the usage error of -i / --weights with a folder
        return export_folder(spec, output, task=task, shapes=shapes, trust_remote_code=trust_remote_code, batch=batch,
                             precision=precision, policy=policy, verify=verify, force=force, quiet=quiet,
                             phases=phases, tolerances=tolerances)
    if shapes or trust_remote_code or task not in (None, "model"):
        raise UsageError("--shape, --trust-remote-code and --task NAME (other than text-generation) are for a model "
                         "folder; a SPEC's inputs are -i NAME=1x3x224x224")
    phases = phases or Phases(quiet)
    with phases.phase("load"):
        module, args, names, root = load_for_export(spec, inputs, weights)
    return export(module, args, output, batch=batch, precision=precision, policy=policy, input_names=names,
                  root=root, verify=verify, force=force, phases=phases, spec=spec, tolerances=tolerances)
