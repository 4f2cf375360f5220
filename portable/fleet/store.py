"""The results store, a folder only the driver writes:

    RESULTS/fleet.json              the last run: the fleet file, its models and settings, the engine, the counts
    RESULTS/records/NAME/STEP.json  one record per (model, step), each written atomically (portable.io)
    RESULTS/models/NAME/model.onnx  the portable file of each model (its export)

A record replaces the one before it whole or not at all: a run that is killed leaves every record either
as it was or complete. What a result depends on is hashed into its ``key``; the next run skips a step whose
stored record has the same key (:data:`~portable.fleet.records.DONE`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from portable.fleet.records import StepRecord
from portable.io import atomic_write_bytes, atomic_write_text

__all__ = ["Store", "file_digest", "key_of", "source_digest"]

SMALL = 64 * 1024**2  # files above this are known by size and mtime, not read (a model folder's weights)


def key_of(*parts: Any) -> str:
    """sha256 of the parts as canonical JSON."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _stat_or_hash(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}" if stat.st_size > SMALL else file_digest(path)


def source_digest(model: str) -> str:
    """What the model's result depends on besides its settings: the file, the folder's files, the SPEC's
    Python file (a ``package.module`` SPEC: its module's file, where Python finds one)."""
    path = Path(model.rpartition(":")[0] if ".py:" in model else model)
    if path.is_file():
        return _stat_or_hash(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return key_of([(str(p.relative_to(path)), _stat_or_hash(p)) for p in files])
    return _module_digest(model)


def _module_digest(model: str) -> str:
    import importlib.util

    module = model.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    origin = getattr(spec, "origin", None)
    return _stat_or_hash(Path(origin)) if origin and os.path.isfile(origin) else f"unresolved:{model}"


class Store:
    """The records and files of one results folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def record_path(self, model: str, step: str) -> Path:
        return self.root / "records" / model / f"{step}.json"

    def artefact_path(self, model: str) -> Path:
        return self.root / "models" / model / "model.onnx"

    def get(self, model: str, step: str) -> StepRecord | None:
        path = self.record_path(model, step)
        try:
            return StepRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, record: StepRecord) -> None:
        atomic_write_text(self.record_path(record.model, record.step), json.dumps(record.to_dict(), indent=1, default=str) + "\n")

    def put_artefact(self, model: str, data: bytes | None = None, source: str | Path | None = None) -> str:
        """Store a model's file (its bytes, or moved from ``source``); its sha256."""
        target = self.artefact_path(model)
        if data is not None:
            atomic_write_bytes(target, data)
        elif source is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)  # the scratch folder is under the store: same file system, atomic
        return file_digest(target)

    def records(self) -> Iterator[StepRecord]:
        for path in sorted((self.root / "records").glob("*/*.json")):
            record = self.get(path.parent.name, path.stem)
            if record is not None:
                yield record

    def write_run(self, meta: Mapping[str, Any]) -> None:
        atomic_write_text(self.root / "fleet.json", json.dumps(dict(meta), indent=1, default=str) + "\n")

    def run_meta(self) -> dict[str, Any]:
        try:
            data = json.loads((self.root / "fleet.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def scratch(self, *parts: str) -> Path:
        """A scratch folder under the store (same file system as the files moved into it)."""
        folder = self.root.joinpath(".scratch", *parts)
        folder.mkdir(parents=True, exist_ok=True)
        return folder
