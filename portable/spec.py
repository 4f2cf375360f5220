"""Loading a model from a SPEC (``package.module:callable`` or ``path/to/file.py:callable``), or from a
Hugging Face model folder (:mod:`portable.hf`: :func:`load_reference` takes either).

A SPEC imports and runs user code, like any model-loading tool: only point it at
code you trust. Weights load through safetensors or ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from portable.errors import InputError, UsageError, one_line

if TYPE_CHECKING:
    import torch

__all__ = ["LoadedSpec", "load_reference", "load_spec", "load_tokenizer", "load_weights", "parse_spec"]


@dataclass(frozen=True)
class LoadedSpec:
    """What a SPEC's callable gave: the module, its example inputs if it returned some, and
    the folder that source paths are made relative to."""

    spec: str
    module: torch.nn.Module
    example_inputs: tuple[Any, ...] | None
    root: Path
    namespace: ModuleType | None = field(default=None, compare=False, repr=False)  # the SPEC's module, as imported


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``target:callable``; a usage error if the form is wrong."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr or not attr.replace(".", "_").isidentifier():
        raise UsageError(f"bad SPEC {spec!r}: expected 'package.module:callable' or 'path/to/file.py:callable'")
    return target, attr


def _import_target(target: str, spec: str) -> tuple[ModuleType, Path]:
    from portable.torchvision_ops import ensure_torchvision_importable

    ensure_torchvision_importable()  # a SPEC of torchvision's (or timm's, or transformers') models imports it
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        if not path.is_file():
            raise InputError(f"no such file {target!r} (from SPEC {spec!r})")
        name = _module_name(path.resolve())
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise InputError(f"cannot import {target!r} (from SPEC {spec!r})")
        module, loader = importlib.util.module_from_spec(loader_spec), loader_spec.loader
        sys.modules[name] = module
        _exec(lambda: loader.exec_module(module), spec)
        return module, path.resolve().parent
    try:
        module = importlib.import_module(target)
    except ModuleNotFoundError as exc:
        raise InputError(f"cannot import module {target!r} from SPEC {spec!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - user code raised while importing
        raise InputError(f"importing {target!r} (SPEC {spec!r}) raised {type(exc).__name__}: {exc}") from None
    file = getattr(module, "__file__", None)
    return module, Path.cwd() if file is None else Path(file).resolve().parent


def _module_name(path: Path) -> str:
    """The file's stem, unless another module took it: stable across processes (no ``hash()``),
    since exported graphs record class names such as ``cnn.SmallResNet``."""
    taken = sys.modules.get(path.stem)
    if path.stem.isidentifier() and (taken is None or getattr(taken, "__file__", None) == str(path)):
        return path.stem
    return f"portable_spec_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"


def _exec(fn: Callable[[], Any], spec: str) -> Any:
    from portable.quiet import quiet_user_code

    try:
        with quiet_user_code():
            return fn()
    except Exception as exc:  # noqa: BLE001 - user code
        raise InputError(f"SPEC {spec!r} raised {type(exc).__name__}: {exc}") from None


@contextlib.contextmanager
def _folder_on_path(target: str) -> Iterator[None]:
    """A file SPEC's folder first on ``sys.path`` while it is imported and called, so that it can
    import its siblings (``from layers import Block``), as ``python file.py`` would (Polygraphy does
    the same); removed afterwards. A module SPEC is left to ``sys.path`` as it is."""
    if not (target.endswith(".py") or "/" in target or "\\" in target):
        yield
        return
    folder = str(Path(target).resolve().parent)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def _attribute(obj: Any, part: str, target: str, spec: str) -> Any:
    """``obj.part``; a usage error with the close names (difflib) when it has none (a typo)."""
    if hasattr(obj, part):
        return getattr(obj, part)
    names = [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None))]
    close = difflib.get_close_matches(part, names, n=3)
    if close:
        hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
    else:
        hint = f"its callables: {', '.join(names[:12]) or 'none'}"
    raise UsageError(f"SPEC {spec!r}: {target!r} has no attribute {part!r}; {hint}")


def load_spec(spec: str) -> LoadedSpec:
    """Import the SPEC's target, call it, and check that it gave an ``nn.Module``. A file SPEC's
    folder is on ``sys.path`` meanwhile; a callable that is not there is a usage error (exit 2)
    naming the close ones."""
    target, _ = parse_spec(spec)
    with _folder_on_path(target):
        return _load_spec(spec)


def _load_spec(spec: str) -> LoadedSpec:
    import torch

    target, attr = parse_spec(spec)
    module, root = _import_target(target, spec)
    obj: Any = module
    for part in attr.split("."):
        obj = _attribute(obj, part, target, spec)
    if not callable(obj):
        raise InputError(f"SPEC {spec!r}: {attr!r} is not callable")
    result = obj if isinstance(obj, torch.nn.Module) else _exec(obj, spec)
    example = None
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module):
        result, example = result
        example = tuple(example) if isinstance(example, (tuple, list)) else (example,)
    if not isinstance(result, torch.nn.Module):
        raise InputError(
            f"SPEC {spec!r} returned {type(result).__name__}, not a torch.nn.Module "
            "(return a module, or (module, example_inputs))"
        )
    return LoadedSpec(spec=spec, module=result, example_inputs=example, root=root, namespace=module)


def load_tokenizer(spec: str | LoadedSpec, model: Any = None) -> Any:
    """The model's own tokenizer: ``tokenizer()`` beside the SPEC's callable in its module (the one a
    :class:`LoadedSpec` was loaded from, not imported again), else the one transformers finds (no download)
    where the model came from (``config._name_or_path``). A usage error saying where to put one when neither
    gives it."""
    loaded = spec if isinstance(spec, LoadedSpec) else None
    spec = spec.spec if isinstance(spec, LoadedSpec) else spec
    from portable.hf.folder import is_folder_reference

    if is_folder_reference(spec):
        return _folder_tokenizer(spec)
    target, attr = parse_spec(spec)
    with _folder_on_path(target):
        module = loaded.namespace if loaded is not None and loaded.namespace is not None else _import_target(target, spec)[0]
        found = getattr(module, "tokenizer", None)
        if callable(found):
            return _exec(found, spec)
    source = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
    if source:
        with contextlib.suppress(Exception):  # not a folder or a cached hub id: the usage error below
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(source, local_files_only=True)
    where = f" nor at {source!r}" if source else ""
    raise UsageError(f"text needs the model's tokenizer: {target} has no tokenizer() beside {attr}, and transformers "
                     f"finds none{where}; add `def tokenizer(): return AutoTokenizer.from_pretrained(...)` to {target}")


def _folder_tokenizer(text: str) -> Any:
    """A model folder's own tokenizer (local files only); a usage error when the folder has none."""
    from portable.hf.folder import read_folder, require_transformers

    folder = read_folder(text, trust_remote_code=True)  # the tokenizer alone: no model code runs
    transformers = require_transformers()
    try:
        return transformers.AutoTokenizer.from_pretrained(str(folder.path), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - no tokenizer files, or broken ones
        raise UsageError(f"text needs the model's tokenizer, and the folder has none transformers can load "
                         f"({one_line(exc)})", path=str(folder.path)) from None


def load_reference(spec: str, weights: str | Path | None = None, *, task: str | None = None,
                   model: str | Path | None = None, trust_remote_code: bool = False) -> LoadedSpec:
    """A reference model: a SPEC (with ``weights``' state dict), or a model folder loaded for ``task`` (None or
    "model": the task and dims recorded for the file ``model``, else the folder's own); a folder whose config
    maps its own code only with ``trust_remote_code``."""
    from portable.hf.folder import is_folder_reference

    if not is_folder_reference(spec):
        if trust_remote_code:
            raise UsageError(f"--trust-remote-code: for a model folder (config.json and weights); {spec!r} is a SPEC, "
                             "whose code is yours to run")
        loaded = load_spec(spec)
        if weights:
            load_weights(loaded.module, weights)
        return loaded
    from portable.hf.assets import recorded_source
    from portable.hf.load import load_folder

    source = recorded_source(model) if model is not None else {}
    wanted = task if task not in (None, "model") else source.get("task")
    shapes = [f"{name}={dim['value']}" for name, dim in (source.get("dims") or {}).items()]
    found = load_folder(spec, wanted, shapes if wanted == source.get("task") else (), weights=weights,
                        trust_remote_code=trust_remote_code)
    return LoadedSpec(spec=spec, module=found.module, example_inputs=found.args or None, root=found.plan.folder.path)


def load_weights(module: torch.nn.Module, path: str | Path) -> None:
    """Load a state dict from ``.safetensors`` or a ``.pt``/``.pth`` file (``weights_only=True``)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise InputError("no such weights file", path=str(path))
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            with warnings.catch_warnings():  # torch warns about pickle protocols before refusing
                warnings.simplefilter("ignore")
                state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable weights file
        raise InputError(f"cannot read weights: {one_line(exc)}",
                         path=str(path)) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise InputError("not a state dict (expected a mapping of names to tensors)", path=str(path))
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise InputError(f"weights do not fit the model: {one_line(exc, typed=False)}", path=str(path)) from None
