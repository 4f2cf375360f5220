"""A fleet file (``FLEET.toml``) read and checked before any work: models, steps, targets, limits.

    [defaults]
    targets = ["ort-cpu", "qnn"]        # or "all"
    steps = ["export", "validate", "live", "quantize", "compare"]
    timeout-s = 900                     # per step
    memory-gb = 6                       # per step
    plugins = ["bench.zoo.step"]        # modules that register more steps

    [defaults.args]                     # extra command-line arguments, per step
    quantize = ["--samples", "16"]

    [[model]]
    name = "resnet"
    model = "models/resnet.py:build"    # a SPEC, a model folder or an .onnx file
    inputs = ["x=1x3x224x224"]          # as export's -i; task and shape as export's --task and --shape
    steps = ["export", "validate"]      # any default may be overridden per model

Every mistake is a :class:`~portable.errors.ConfigError` (exit 2) naming the file, the line where one is
known, and the key.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from portable.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Fleet", "ModelEntry", "Settings", "load_fleet", "parse_fleet"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SETTING_KEYS = ("targets", "steps", "timeout-s", "memory-gb", "batch", "device", "retries", "args")
MODEL_KEYS = ("name", "model", "inputs", "task", "shape", *SETTING_KEYS)
DEFAULT_KEYS = (*SETTING_KEYS, "plugins")


@dataclass(frozen=True)
class Settings:
    """What a model is checked with: its defaults, overridden by its own keys."""

    steps: tuple[str, ...] = ("export", "validate")
    targets: tuple[str, ...] = ()
    timeout_s: float = 900.0
    memory_gb: float = 6.0
    batch: str = "dynamic"
    device: str = "cpu"
    retries: int = 1  # the Ray engine's max_retries: a worker or node that dies is tried again
    args: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (step, extra arguments)

    def args_for(self, step: str) -> tuple[str, ...]:
        return dict(self.args).get(step, ())

    def to_dict(self) -> dict[str, Any]:
        return {"steps": list(self.steps), "targets": list(self.targets), "timeout_s": self.timeout_s,
                "memory_gb": self.memory_gb, "batch": self.batch, "device": self.device, "retries": self.retries,
                "args": {k: list(v) for k, v in self.args}}


@dataclass(frozen=True)
class ModelEntry:
    """One ``[[model]]``: its name, the model as export takes it, and its settings."""

    name: str
    model: str
    inputs: tuple[str, ...] = ()
    task: str | None = None
    shape: tuple[str, ...] = ()  # NAME=VALUE, as export's --shape
    settings: Settings = field(default_factory=Settings)

    @property
    def is_onnx(self) -> bool:
        """An ONNX file from elsewhere: its export is ``portable fix`` (nothing when already portable)."""
        return self.model.lower().endswith(".onnx")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "inputs": list(self.inputs), "task": self.task,
                "shape": list(self.shape), "settings": self.settings.to_dict()}


@dataclass(frozen=True)
class Fleet:
    """The whole file: its models in file order and the plug-in modules that register steps."""

    path: str
    models: tuple[ModelEntry, ...]
    plugins: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # run these models only (``--only``); the results still describe the whole fleet

    def selected(self) -> tuple[ModelEntry, ...]:
        return tuple(e for e in self.models if not self.only or e.name in self.only)


def load_fleet(path: str | Path) -> Fleet:
    """Read and check ``path``; every problem is one line, exit 2."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("fleet file not found", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the fleet file: {exc}", path=str(path)) from None
    return parse_fleet(text, path)


def parse_fleet(text: str, path: str | Path = "FLEET.toml") -> Fleet:
    """The fleet in ``text`` (relative model paths are taken from ``path``'s folder)."""
    where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_toml_error(exc, text), path=where) from None
    unknown = sorted(set(data) - {"defaults", "model"})
    if unknown:
        raise ConfigError(f"unknown table or key {unknown[0]!r} (expected [defaults] and [[model]])", path=where)
    defaults = _table(data.get("defaults", {}), "defaults", where)
    _known(defaults, DEFAULT_KEYS, "defaults", where)
    plugins = _strings(defaults.get("plugins", []), "defaults.plugins", where)
    base = _settings(Settings(), defaults, "defaults", where)
    models = data.get("model", [])
    if not isinstance(models, list) or not models:
        raise ConfigError("no [[model]] entries", path=where)
    folder = Path(path).parent
    entries = tuple(_model(m, i, base, folder, where) for i, m in enumerate(models))
    _unique(entries, where)
    return Fleet(where, entries, plugins)


def _toml_error(exc: Exception, text: str) -> str:
    """tomllib's message (it gives the line and column) and the key written on that line, where one is."""
    message = str(exc)
    found = re.search(r"line (\d+)", message)
    if not found:
        return f"not valid TOML: {message}"
    number = int(found.group(1))
    lines = text.splitlines()[:number]
    for index in range(len(lines) - 1, -1, -1):  # the key whose value the error is in: on the line, or above it
        key = re.match(r"\s*([A-Za-z0-9_.\"'-]+)\s*=", lines[index])
        if key:
            at = "" if index == number - 1 else f" (its value began at line {index + 1})"
            return f"not valid TOML at line {number}, key {key.group(1).strip(chr(34) + chr(39))!r}{at}: {message}"
        if index < number - 1 and lines[index].lstrip().startswith("["):  # a table above: no key to name
            break
    return f"not valid TOML at line {number}: {message}"


def _table(value: Any, key: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"'{key}' must be a table", path=where)
    return value


def _known(table: Mapping[str, Any], keys: tuple[str, ...], what: str, where: str) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise ConfigError(f"unknown key '{what}.{unknown[0]}' (known: {', '.join(keys)})", path=where)


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"'{key}' must be a list of strings", path=where)
    return tuple(value)


def _number(value: Any, key: str, where: str, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(f"'{key}' must be a number >= {minimum:g}, not {value!r}", path=where)
    return float(value)


def _settings(base: Settings, table: Mapping[str, Any], what: str, where: str) -> Settings:
    """``base`` with the keys ``table`` gives (steps and targets are checked later, against the registries)."""
    changes: dict[str, Any] = {}
    for key in ("steps", "targets"):
        if key in table:
            changes[key] = _strings(table[key], f"{what}.{key}", where)
    for key, minimum in (("timeout-s", 1.0), ("memory-gb", 0.1)):
        if key in table:
            changes[key.replace("-s", "_s").replace("-gb", "_gb")] = _number(table[key], f"{what}.{key}", where, minimum=minimum)
    if "retries" in table:
        changes["retries"] = int(_number(table["retries"], f"{what}.retries", where, minimum=0))
    for key in ("batch", "device"):
        if key in table:
            changes[key] = _word(table[key], f"{what}.{key}", where)
    if "args" in table:
        args = _table(table["args"], f"{what}.args", where)
        changes["args"] = tuple(sorted((dict(base.args) | {k: _strings(v, f"{what}.args.{k}", where)
                                                           for k, v in args.items()}).items()))
    return replace(base, **changes)


def _word(value: Any, key: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"'{key}' must be a string, not {value!r}", path=where)
    return str(value)


def _model(table: Any, index: int, base: Settings, folder: Path, where: str) -> ModelEntry:
    what = f"model[{index}]"
    table = _table(table, what, where)
    _known(table, MODEL_KEYS, what, where)
    for key in ("name", "model"):
        if not isinstance(table.get(key), str) or not table[key]:
            raise ConfigError(f"'{what}.{key}' is required (a string)", path=where)
    name = table["name"]
    if not NAME.match(name):
        raise ConfigError(f"'{what}.name' {name!r}: use letters, digits, '_', '.' and '-' only", path=where)
    task = table.get("task")
    if task is not None and not isinstance(task, str):
        raise ConfigError(f"'{what}.task' must be a string", path=where)
    inputs = _strings(table.get("inputs", []), f"{what}.inputs", where)
    shape = _shape(table.get("shape", []), f"{what}.shape", where)
    return ModelEntry(name=name, model=_located(table["model"], folder), inputs=inputs, task=task, shape=shape,
                      settings=_settings(base, table, what, where))


def _shape(value: Any, key: str, where: str) -> tuple[str, ...]:
    """``{sequence_length = 128}`` or ``["sequence_length=128"]``: NAME=VALUE strings."""
    if isinstance(value, Mapping):
        return tuple(f"{k}={v}" for k, v in value.items())
    return _strings(value, key, where)


def _located(model: str, folder: Path) -> str:
    """A path (an .onnx file, a folder, ``file.py:callable``) found beside the fleet file, made absolute;
    anything else (``package.module:callable``, a path that does not exist) as written."""
    head, sep, tail = model.rpartition(":") if ".py:" in model else (model, "", "")
    candidate = folder / head
    if not Path(head).is_absolute() and candidate.exists():
        return str(candidate.resolve()) + sep + tail
    return model


def _unique(entries: tuple[ModelEntry, ...], where: str) -> None:
    seen: set[str] = set()
    for entry in entries:
        if entry.name in seen:
            raise ConfigError(f"model {entry.name!r} is named twice", path=where)
        seen.add(entry.name)
