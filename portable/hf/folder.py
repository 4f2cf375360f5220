"""A Hugging Face model folder (``save_pretrained``'s, or a sentence-transformers one) as portable reads it:
found on disk or in the local Hugging Face cache (never downloaded), its ``config.json`` read and checked
before anything is loaded (a folder without one, a model type transformers does not know, remote code
without ``--trust-remote-code``: each one line, exit 2)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable.errors import InputError, UsageError

__all__ = ["HF_HINT", "Folder", "is_folder_reference", "read_folder", "read_json", "require_transformers"]

HF_HINT = "pip install 'portable-onnx[hf]'"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def require_transformers() -> Any:
    """transformers, or the one line that says which extra brings it (exit 2)."""
    try:
        import transformers
    except ImportError:
        raise UsageError(f"a model folder needs transformers, which is not installed here: {HF_HINT}") from None
    return transformers


def is_folder_reference(text: str) -> bool:
    """A model folder, or what can only be one or a hub id (no ``:``, so not a SPEC): the folder path takes it
    (and says "no such folder" for a path that is not there)."""
    return Path(text).is_dir() or (":" not in text and not text.endswith(".py"))


@dataclass(frozen=True)
class Folder:
    """A model folder: where it is, what the user called it, its config.json, and its sentence-transformers
    ``modules.json`` when it has one."""

    path: Path  # the transformer's folder (config.json, the weights)
    root: Path  # the folder given: the same, or a sentence-transformers folder around it
    given: str
    config: dict[str, Any]
    modules: tuple[dict[str, Any], ...] | None

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))

    @property
    def sentence_transformers(self) -> bool:
        return self.modules is not None

    @property
    def remote_code(self) -> bool:
        return "auto_map" in self.config


def _cached(hub_id: str) -> Path:
    """A hub id's snapshot in the local cache; portable never downloads (one line, exit 2)."""
    if not _HUB_ID.match(hub_id):
        raise UsageError(f"no such folder {hub_id!r} (a model folder holds config.json and the weights; a SPEC is "
                         "package.module:callable or file.py:callable)")
    require_transformers()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(hub_id, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, or not a valid id: the same answer
        raise UsageError(f"{hub_id!r} is not a folder here nor a model in the local Hugging Face cache, and portable "
                         f"never downloads: pass the model's folder (save_pretrained's, or `huggingface-cli download "
                         f"{hub_id} --local-dir DIR`, then DIR), or a SPEC package.module:callable") from None


def read_json(path: Path) -> Any:
    """A JSON file of the folder; one line (exit 3) when it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read: {type(exc).__name__}: {exc}", path=str(path)) from None


def _transformer_path(modules: list[dict[str, Any]], root: Path) -> Path:
    """Where a sentence-transformers folder keeps its transformer (the root, or ``0_Transformer``)."""
    for module in modules:
        if str(module.get("type", "")).endswith(".Transformer"):
            return root / str(module.get("path", ""))
    return root


def read_folder(text: str, trust_remote_code: bool = False) -> Folder:
    """The folder ``text`` names, its config.json checked: present, a model type transformers knows, no remote
    code unless trusted. Reads JSON only (no weights, no torch)."""
    root = Path(text) if Path(text).is_dir() else _cached(text)
    modules = read_json(root / "modules.json") if (root / "modules.json").is_file() else None
    if modules is not None and not isinstance(modules, list):
        raise InputError("modules.json is not a list of modules", path=str(root / "modules.json"))
    path = _transformer_path(modules, root) if modules is not None else root
    if not (path / "config.json").is_file():
        raise UsageError("no config.json: not a Hugging Face model folder (save_pretrained writes config.json and "
                         "the weights; a SPEC is package.module:callable)", path=str(path))
    config = read_json(path / "config.json")
    if not isinstance(config, dict):
        raise InputError("config.json is not a JSON object", path=str(path / "config.json"))
    folder = Folder(path, root, text, config, tuple(modules) if modules is not None else None)
    _check_known(folder, trust_remote_code)
    return folder


def _check_known(folder: Folder, trust_remote_code: bool) -> None:
    """Remote code refused unless trusted (it runs the folder's Python); a model type transformers knows."""
    if folder.remote_code and not trust_remote_code:
        raise UsageError(f"config.json's auto_map loads the folder's own Python code ({', '.join(folder.config['auto_map'])}): "
                         "pass --trust-remote-code if you trust it", path=str(folder.path))
    if folder.remote_code:
        return
    transformers = require_transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if folder.model_type not in CONFIG_MAPPING_NAMES:
        what = f"model type {folder.model_type!r}" if folder.model_type else "no model_type"
        raise UsageError(f"config.json has {what}, which transformers {transformers.__version__} does not know "
                         "(a newer transformers may; remote code needs --trust-remote-code)", path=str(folder.path))
