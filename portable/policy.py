"""The portability contract as data, and where it is loaded from.

A :class:`Policy` is read from ``[tool.portable]`` in the nearest ``pyproject.toml``
or from a ``--config FILE.toml`` (its top level, or its ``[tool.portable]`` table).
Keys are kebab-case; an unknown key or a bad value raises :class:`ConfigError`
naming the key (exit 2).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from portable.errors import ConfigError
from portable.findings import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["DEFAULT_DTYPES", "GIB", "Policy", "dtype_name", "find_config", "load_policy"]

GIB = 1024**3
DEFAULT_DTYPES = ("float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool")
_RULE_ID = re.compile(r"^PORT\d{3}$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KiB|MB|MiB|GB|GiB)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3, "gib": GIB}


@dataclass(frozen=True)
class Policy:
    """What a portable model must honour. Frozen: derive variants with :meth:`with_`."""

    opset: int = 18
    allowed_domains: tuple[str, ...] = ("",)
    # "dynamic": dim 0 of graph inputs/outputs may be one shared symbol (or an int);
    # "static": dim 0 must be an integer too.
    batch: str = "dynamic"
    external_data: bool = False
    max_size_bytes: int = 2 * GIB
    allowed_dtypes: tuple[str, ...] = DEFAULT_DTYPES
    select: tuple[str, ...] = ()  # empty: every rule that is on by default
    ignore: tuple[str, ...] = ()
    severity: tuple[tuple[str, Severity], ...] = ()  # per-rule overrides
    ort: bool = False  # enables the opt-in PORT014 (ONNX Runtime session)
    strict: bool = False  # warnings fail too
    targets: tuple[str, ...] = ()  # target profiles to check against (PORT201+); empty: none
    max_partitions: int | None = None  # gate: more partitions on a target is an error (PORT203)
    no_fallback: bool = False  # gate: any node a target leaves to its fallback is an error (PORT203)
    fail_on: str | None = None  # gate: "partial" or "unsupported": a node of that verdict or worse is an error (PORT203)
    targets_live: bool = False  # also ask the installed runtimes (ONNX Runtime CPU, OpenVINO)
    exit_zero: bool = False  # --exit-zero: findings are reported but never fail the run (an unreadable model still does)
    source: str = field(default="defaults", compare=False)

    def with_(self, **changes: Any) -> Policy:
        return replace(self, **changes)

    def severity_for(self, rule_id: str, default: Severity) -> Severity:
        return dict(self.severity).get(rule_id, default)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("source")
        data["severity"] = {rule: sev.value for rule, sev in self.severity}
        for key in ("allowed_domains", "allowed_dtypes", "select", "ignore", "targets"):
            data[key] = list(data[key])
        return data


def _rule_ids(key: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"'{key}' must be a list of rule ids such as [\"PORT004\"]")
    bad = [v for v in items if not _RULE_ID.match(v.upper())]
    if bad:
        raise ConfigError(f"'{key}' has bad rule id(s) {', '.join(bad)}: expected PORTnnn")
    return tuple(v.upper() for v in items)


def target_names(key: str, value: Any) -> tuple[str, ...]:
    """Target names (a list, or one comma-separated string; ``all`` is every target), in the
    registry's order; an unknown name is a usage error naming the known ones."""
    from portable.validators.targets import TARGETS  # the registry lives with the profiles

    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"'{key}' must be a list of target names such as [\"qnn\", \"tensorrt\"]")
    names = {n.strip().lower() for item in items for n in item.split(",") if n.strip()}
    if "all" in names:
        names = (names - {"all"}) | set(TARGETS)
    unknown = sorted(names - set(TARGETS))
    if unknown:
        raise ConfigError(f"'{key}': unknown target(s) {', '.join(unknown)} (known: {', '.join(TARGETS)}, or all)")
    return tuple(t for t in TARGETS if t in names)


def _str_list(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"'{key}' must be a list of strings")
    return tuple(value)


def dtype_name(elem_type: int) -> str:
    """The NumPy-style name of an ONNX element type: ``float32``, ``float64``, ``bfloat16``, ``bool``."""
    import onnx  # local: keeps policy import cheap

    if elem_type not in onnx.TensorProto.DataType.values():
        return f"unknown({elem_type})"
    name: str = onnx.TensorProto.DataType.Name(elem_type).lower()
    return {"float": "float32", "double": "float64"}.get(name, name)


def _dtypes(key: str, value: Any) -> tuple[str, ...]:
    import onnx

    names = _str_list(key, value)
    known = {dtype_name(v) for v in onnx.TensorProto.DataType.values()}
    bad = [n for n in names if n.lower() not in known]
    if bad:
        raise ConfigError(f"'{key}' has unknown element type(s): {', '.join(bad)}")
    return tuple(n.lower() for n in names)


def parse_size(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"'{key}' must be a size such as 2147483648 or \"2GiB\"")
    if isinstance(value, int) and value > 0:
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if not match:
        raise ConfigError(f"'{key}' must be a size such as 2147483648 or \"2GiB\", got {value!r}")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "b").lower()])


def _int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"'{key}' must be a positive integer, got {value!r}")
    return value


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"'{key}' must be true or false, got {value!r}")
    return value


FAIL_ON_KINDS = ("partial", "unsupported")  # `--fail-on`: the verdict kinds a gate can start from


def _fail_on(key: str, value: Any) -> str:
    if value not in FAIL_ON_KINDS:
        raise ConfigError(f"'{key}' must be one of {', '.join(FAIL_ON_KINDS)}, got {value!r}")
    return str(value)


def _batch(key: str, value: Any) -> str:
    if value not in ("dynamic", "static"):
        raise ConfigError(f"'{key}' must be \"dynamic\" or \"static\", got {value!r}")
    return str(value)


def _severity(key: str, value: Any) -> tuple[tuple[str, Severity], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"'{key}' must be a table such as {{ PORT013 = \"error\" }}")
    out = []
    for rule, sev in value.items():
        (rule_id,) = _rule_ids(f"{key}.{rule}", [rule])
        try:
            out.append((rule_id, Severity.parse(str(sev))))
        except ValueError as exc:
            raise ConfigError(f"'{key}.{rule}': {exc}") from None
    return tuple(sorted(out))


# TOML key -> (Policy field, parser)
_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "opset": ("opset", _int),
    "allowed-domains": ("allowed_domains", _str_list),
    "batch": ("batch", _batch),
    "external-data": ("external_data", _bool),
    "max-size": ("max_size_bytes", parse_size),
    "allowed-dtypes": ("allowed_dtypes", _dtypes),
    "select": ("select", _rule_ids),
    "ignore": ("ignore", _rule_ids),
    "severity": ("severity", _severity),
    "ort": ("ort", _bool),
    "strict": ("strict", _bool),
    "targets": ("targets", target_names),
    "max-partitions": ("max_partitions", _int),
    "no-fallback": ("no_fallback", _bool),
    "fail-on": ("fail_on", _fail_on),
    "targets-live": ("targets_live", _bool),
}


def policy_from_mapping(table: Mapping[str, Any], *, source: str = "mapping") -> Policy:
    """Build a policy from a ``[tool.portable]``-style table (kebab-case keys)."""
    changes: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _KEYS:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"unknown key '{key}' in {source} (known keys: {known})")
        attr, parse = _KEYS[key]
        changes[attr] = parse(key, value)
    return Policy(source=source, **changes)


def find_config(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.portable]`` table, from ``start`` upwards.
    A ``pyproject.toml`` that is not valid TOML is a configuration error, not silently skipped."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{candidate} is not valid TOML: {exc}") from None
        tool = data.get("tool")
        if isinstance(tool, Mapping) and "portable" in tool:
            return candidate
    return None


def load_policy(config: str | Path | None = None, *, discover: bool = True) -> Policy:
    """Load the policy from ``config``, else from the nearest ``pyproject.toml``, else defaults."""
    path = Path(config) if config is not None else (find_config() if discover else None)
    if path is None:
        return Policy()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    tool = data.get("tool")
    if "tool" in data and not isinstance(tool, Mapping):
        raise ConfigError(f"'tool' in {path} must be a table")
    table = tool.get("portable", {}) if isinstance(tool, Mapping) else data
    if not isinstance(table, Mapping):
        raise ConfigError(f"[tool.portable] in {path} must be a table")
    return policy_from_mapping(table, source=str(path))


def merge_cli(policy: Policy, **overrides: Iterable[str] | bool | int | None) -> Policy:
    """Apply command-line overrides (``--select``, ``--ignore``, ``--strict``, ``--ort``, ``--target``,
    ``--max-partitions``, ``--no-fallback``, ``--fail-on``, ``--live``, ``--exit-zero``)."""
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None or value == () or value is False:
            continue
        if key in ("select", "ignore"):
            changes[key] = _rule_ids(f"--{key}", [v for item in value for v in str(item).split(",") if v])  # type: ignore[union-attr]
        elif key == "targets":
            changes[key] = target_names("--target", list(value))  # type: ignore[arg-type]
        else:
            changes[key] = value
    return policy.with_(**changes) if changes else policy
