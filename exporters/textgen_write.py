"""The text-generation export's artefact: two graphs and one manifest (and, from a model folder, its tokenizer's
folder ``NAME.hf/``), all written or none.

Each graph is exported into a staging folder beside the targets (``.NAME.textgen-XXXX``, the same
file system, so a rename is atomic); only when both graphs and the pair passed every check does
:func:`write_pair` move them onto their targets and write the manifest. A failure on the way
(a rename refused, the manifest's write) puts back what was there before and removes what was
new, so the folder holds the old pair or the new one, never half of each. SIGKILL cannot be
caught: its staging folder (never a target) stays behind, named as above.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable.errors import UsageError
from portable.exporters.writer import check_target, write_json
from portable.io import terminate_as_interrupt

__all__ = ["PairTargets", "staging", "write_pair"]

MANIFEST_SUFFIX = ".textgen.json"  # the runners' PairFiles reads the same name


@dataclass(frozen=True)
class PairTargets:
    """``NAME.prefill.onnx``, ``NAME.decode.onnx`` and ``NAME.textgen.json`` of ``-o NAME`` (or ``NAME.onnx``)."""

    prefill: Path
    decode: Path
    manifest: Path

    @classmethod
    def of(cls, output: str | Path) -> PairTargets:
        path = Path(output)
        stem = path.name.removesuffix(".onnx")
        if not stem:
            raise UsageError(f"bad output name {str(output)!r}: expected NAME or NAME.onnx")
        return cls(path.with_name(f"{stem}.prefill.onnx"), path.with_name(f"{stem}.decode.onnx"),
                   path.with_name(stem + MANIFEST_SUFFIX))

    @property
    def files(self) -> tuple[Path, Path, Path]:
        return (self.prefill, self.decode, self.manifest)

    def tokenizer(self, force: bool) -> Path:
        """``NAME.hf/`` beside the pair (as a single-graph export writes ``NAME.hf/``), checked before any work."""
        from portable.hf.assets import SIDECAR_SUFFIX

        target = self.manifest.with_name(self.manifest.name.removesuffix(MANIFEST_SUFFIX) + SIDECAR_SUFFIX)
        check_target(target, force, folder=True)
        return target

    def check(self, force: bool) -> None:
        """Before any work: the folder exists and no target is there (unless ``force``)."""
        for path in self.files:
            check_target(path, force)


@contextlib.contextmanager
def staging(targets: PairTargets) -> Iterator[Path]:
    """A hidden folder beside the targets for the graphs being made; removed with whatever is left in it."""
    with tempfile.TemporaryDirectory(dir=targets.prefill.parent, prefix=f".{targets.prefill.name}.textgen-") as folder:
        yield Path(folder)


def write_pair(staged: Sequence[tuple[Path, Path]], manifest: Path, content: dict[str, Any], force: bool) -> None:
    """Move each staged graph onto its target and write the manifest, all or nothing (module docstring).
    Each graph has been through the artefact step already (:func:`portable.exporters.api.export` into the
    staging folder: size check, validation, fingerprint, atomic write); what is left is moving the finished
    files (and a folder written whole: the tokenizer) together, with the old pair kept aside until the new one
    is whole."""
    for source, target in staged:
        check_target(target, force, folder=source.is_dir())
    check_target(manifest, force)
    existing = [(t, t.with_name(f".{t.name}.{os.getpid()}.old")) for t in (*(t for _, t in staged), manifest) if t.exists()]
    backed: list[tuple[Path, Path]] = []
    moved: list[Path] = []
    with terminate_as_interrupt():
        try:
            for target, backup in existing:
                os.replace(target, backup)
                backed.append((target, backup))
            for source, target in staged:
                os.replace(source, target)
                moved.append(target)
            write_json(manifest, content)
        except BaseException:
            for target in moved:
                _remove(target)
            for target, backup in backed:
                os.replace(backup, target)
            raise
        for _, backup in backed:
            _remove(backup)


def _remove(path: Path) -> None:
    """A file, or a folder written whole (the tokenizer beside the pair)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
