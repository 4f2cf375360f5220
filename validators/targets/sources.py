"""Where each profile's upstream files come from: pinned (repository, path, commit, git blob), read
from the source cache or from the installed onnxruntime wheel.

The raw upstream files are never committed. They are cached under ``shared/targets/sources/``
beside the checkout (``$PORTABLE_TARGET_SOURCES`` overrides it) as ``owner+name/path``; the
generator checks each file's git blob id against the pinned one, so a profile always says which
bytes it was made from. The NNAPI and CoreML tables and the usability checker ship in the
onnxruntime wheel: those are read from the installed package, pinned by its version and build commit.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from portable.validators.targets.profile import Source

__all__ = ["CACHE_ENV", "Pinned", "SourceMissing", "blob_id", "cache_dir", "read", "wheel_file"]

CACHE_ENV = "PORTABLE_TARGET_SOURCES"
_ROOT = Path(__file__).resolve().parents[2]  # the checkout (validators/targets/ -> repository root)


class SourceMissing(LookupError):
    """An upstream file that is not in the cache (or the wheel): the profile cannot be regenerated here."""


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what ``git hash-object`` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id, not security


def cache_dir() -> Path | None:
    """``$PORTABLE_TARGET_SOURCES``, else the first ``shared/targets/sources`` in the checkout or beside
    it (``../shared``, ``../../shared``: a worktree's), else None."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    for folder in (_ROOT, *_ROOT.parents):
        candidate = folder / "shared" / "targets" / "sources"
        if candidate.is_dir():
            return candidate
    return None


@dataclass(frozen=True)
class Pinned:
    """One upstream file at one commit; ``blob`` None for a wheel file (its id is computed)."""

    repository: str
    path: str
    commit: str
    blob: str | None
    via: str = ""
    wheel: str | None = None  # path inside the onnxruntime package, when the wheel ships it
    local: str | None = None  # a file portable measured itself, under validators/targets/ (measured/...)

    @property
    def url(self) -> str:
        return self.url_at(self.commit)

    def url_at(self, commit: str) -> str:
        return f"https://github.com/{self.repository}/blob/{commit}/{self.path}"

    def cached(self, root: Path) -> Path:
        return root / self.repository.replace("/", "+") / self.path


def wheel_file(relative: str) -> Path:
    """A file of the installed onnxruntime package."""
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise SourceMissing("onnxruntime is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise SourceMissing(f"the onnxruntime wheel has no {relative}")
    return path


def wheel_build() -> tuple[str, str]:
    """The installed onnxruntime's version and build commit (``get_build_info()``'s git-commit-id)."""
    import onnxruntime

    found = re.search(r"git-commit-id=(\w+)", onnxruntime.get_build_info())
    return onnxruntime.__version__, found.group(1) if found else "unknown"


def read(pin: Pinned, override: Path | None = None) -> tuple[str, Source]:
    """The file's text and its provenance. ``override`` (``--source``) replaces the pinned file: its
    blob is then recorded as read, and the provenance says so."""
    if override is not None:
        data = override.read_bytes()
        return _decode(data), _source(pin, blob_id(data), f"read from {override} (not the pinned copy)")
    if pin.local is not None:
        return _pinned_bytes(pin, Path(__file__).parent / pin.local)
    if pin.wheel is not None:
        version, commit = wheel_build()
        data = wheel_file(pin.wheel).read_bytes()
        via = f"the onnxruntime {version} wheel (onnxruntime/{pin.wheel}), built from commit {commit}"
        return _decode(data), Source(pin.repository, pin.path, commit, pin.url_at(commit), blob_id(data), via)
    root = cache_dir()
    path = pin.cached(root) if root is not None else None
    if path is None or not path.is_file():
        raise SourceMissing(f"{pin.repository}/{pin.path} is not in the source cache "
                            f"({root or 'none found'}; set ${CACHE_ENV} or see docs/targets.md)")
    return _pinned_bytes(pin, path)


def _pinned_bytes(pin: Pinned, path: Path) -> tuple[str, Source]:
    """The text of ``path``, which must be the pinned bytes (its git blob id)."""
    data = path.read_bytes()
    if blob_id(data) != pin.blob:
        raise ValueError(f"{path}: git blob {blob_id(data)} is not the pinned {pin.blob} of {pin.repository}@{pin.commit[:12]}")
    return _decode(data), _source(pin, pin.blob or "", pin.via)


def _source(pin: Pinned, blob: str, via: str) -> Source:
    return Source(pin.repository, pin.path, pin.commit, pin.url, blob, via)


def _decode(data: bytes) -> str:
    return data.decode("utf-8")
