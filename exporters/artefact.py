"""The artefact step, shared by every command that writes models: ``export``, ``fix`` and the two files of a
text-generation export.

For each model file (:func:`stage`): refuse weights over the size limit, serialize it hollow (the weights
stay in the tensors' memory: :mod:`portable.exporters.serialize`), stamp portable's metadata, start writing
the bytes to a temporary file beside the target in a background thread (:class:`portable.io.StagedWrite`),
validate the model as ``portable validate`` would read that file while its fingerprint is hashed in another
thread, and append the fingerprint. A check that reads the file itself (verify's ONNX Runtime, fix's proof)
reads :meth:`Staged.readable`. :func:`commit` then renames every model onto its target, and
:meth:`Committed.write_manifest` writes the one manifest; a failure on the way removes the models written
anew, and leaving the ``with`` block without a commit (a failed check, Ctrl-C, SIGTERM) leaves no file behind.

Files that travel with a model (an export from a model folder writes its tokenizer beside the file:
:mod:`portable.hf.assets`) are staged the same way (:func:`stage_folder`: a hidden folder beside the target,
filled before the commit) and renamed into place by the same :func:`commit`, so they are written with the
model or not at all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import InternalError
from portable.exporters.fingerprint import fingerprint
from portable.exporters.serialize import Serialized, serialize
from portable.exporters.writer import check_size, check_target, write_json
from portable.io import StagedWrite
from portable.policy import Policy
from portable.report import ValidationReport

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

__all__ = ["Committed", "Staged", "StagedFolder", "commit", "manifest_path", "stage", "stage_folder"]

Stamp = Callable[["onnx.ModelProto"], None]


@dataclass(frozen=True)
class Staged:
    """One model on its way to ``path``: its hollow proto (validated, fingerprint stamped), the report,
    the fingerprint and the file's size; ``write`` holds the bytes going to the temporary file."""

    path: Path
    proto: onnx.ModelProto
    report: ValidationReport
    fingerprint: str
    size: int
    write: StagedWrite

    def readable(self) -> Path:
        """The temporary file, complete (for a check that reads the file, as a user's runtime would)."""
        return self.write.readable()


def manifest_path(path: Path) -> Path:
    """``model.onnx`` -> ``model.onnx.json``."""
    return path.with_name(path.name + ".json")


@contextlib.contextmanager
def stage(model: ir.Model, path: Path, policy: Policy, stamp: Stamp, *, force: bool,
          what: str = "the model") -> Iterator[Staged]:
    """Serialize, start writing, validate and fingerprint ``model`` for ``path`` (see the module docstring).
    A rule that crashes is portable's failure (:class:`InternalError`, exit 3, naming ``what``); the
    findings are the caller's to judge. Nothing stays on disk unless :func:`commit` is called inside."""
    check_size(model, policy.max_size_bytes)
    held = serialize(model, stamp)
    check_target(path, force)
    with StagedWrite(path, held.pieces, tail=True) as write:
        print_, report = _validate_and_fingerprint(held, path, policy, what)
        tail = _stamp_fingerprint(held.proto, print_)
        write.append(tail)
        size = held.size + len(tail)
        report = replace(report, model={**report.model, "fingerprint": print_, "size_bytes": size})
        yield Staged(path, held.proto, report, print_, size, write)


@dataclass(frozen=True)
class StagedFolder:
    """A folder of files on its way to ``path``, complete in ``files`` (a hidden folder beside the target);
    ``record`` is what filling it returned, for the manifest."""

    path: Path
    files: Path
    record: dict[str, Any]


@contextlib.contextmanager
def stage_folder(path: Path, fill: Callable[[Path], dict[str, Any]], *, force: bool) -> Iterator[StagedFolder]:
    """``fill`` writes the files into a hidden folder beside ``path``; :func:`commit` renames it onto ``path``.
    Left without a commit, nothing stays on disk (the old folder, if any, is kept)."""
    check_target(path, force, folder=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.") as tmp:
        files = Path(tmp) / "files"
        files.mkdir()
        yield StagedFolder(path, files, fill(files))


@dataclass(frozen=True)
class Committed:
    """Models renamed onto their targets, waiting for their manifest (:meth:`write_manifest`)."""

    paths: tuple[Path, ...]
    new: tuple[Path, ...]  # the ones that did not exist before: removed again if the manifest fails

    def write_manifest(self, manifest: Mapping[str, Any], at: Path | None = None) -> Path:
        """Write the one manifest (by default beside the first model); on a failure remove the models
        written anew, so no model is left without its manifest."""
        target = at or manifest_path(self.paths[0])
        try:
            write_json(target, dict(manifest))
        except BaseException:
            _remove(self.new)
            raise
        return target


def commit(staged: Sequence[Staged], folders: Sequence[StagedFolder] = ()) -> Committed:
    """Rename every staged model onto its target (each waits for its bytes to be on disk), then every staged
    folder (an old one at the target goes into the staging folder, removed with it); a failure removes the ones
    this commit had written anew. The manifest comes next: :meth:`Committed.write_manifest`."""
    new = tuple(s.path for s in staged if not s.path.exists()) + tuple(f.path for f in folders if not f.path.exists())
    done: list[Path] = []
    try:
        for item in staged:
            item.write.commit()
            done.append(item.path)
        for folder in folders:
            if folder.path.exists():
                os.replace(folder.path, folder.files.parent / "old")
            os.replace(folder.files, folder.path)
            done.append(folder.path)
    except BaseException:
        _remove([p for p in done if p in new])
        raise
    return Committed(tuple(p for p in done if p.is_file()), new)


def _remove(paths: Sequence[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _validate_and_fingerprint(held: Serialized, path: Path, policy: Policy, what: str) -> tuple[str, ValidationReport]:
    """Validate the model, and hash its fingerprint in a thread meanwhile, from the weights' bytes in
    place (hashlib releases the GIL), so the 0.4 s of a 440 MB model's sha256 overlaps the rules
    instead of coming before them."""
    from portable.validators import validate_held

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="portable-fingerprint")
    hashing: list[Future[str]] = []

    def start(proto: onnx.ModelProto, payloads: Mapping[int, memoryview]) -> None:
        hashing.append(pool.submit(fingerprint, proto, payloads))
    try:
        report = validate_held(held.proto, held.payloads, held.pieces, str(path), policy, parsed=start)
        if report.error is not None:  # a rule crashed: portable's failure, not the model's (exit 3)
            raise InternalError(f"validating {what} failed: {report.error}", path=str(path))
        return hashing[0].result(), report
    finally:
        pool.shutdown(wait=False)  # a failed check does not wait for the hash


def _stamp_fingerprint(proto: onnx.ModelProto, print_: str) -> bytes:
    """Add the fingerprint to ``proto`` and return it serialized as a ModelProto of that one
    ``metadata_props`` entry: appended to the bytes already written, it parses as the same model
    with the entry last (protobuf merges a concatenated message's repeated fields), so the weights
    need not be serialized again. The fingerprint covers no metadata, so the validated bytes differ
    from the file by that entry alone."""
    import onnx

    entry = onnx.StringStringEntryProto(key="portable.fingerprint", value=print_)
    proto.metadata_props.append(entry)
    tail = onnx.ModelProto()
    tail.metadata_props.append(entry)
    return bytes(tail.SerializeToString(deterministic=True))
