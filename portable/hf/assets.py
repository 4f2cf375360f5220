"""The tokenizer and image processor travel with the file: export writes them beside it, in ``NAME.hf/``
(``-o NAME.onnx``), through transformers' own ``save_pretrained`` (so ``AutoTokenizer.from_pretrained("NAME.hf")``
loads them as they are), and records them in the manifest (``preprocessing``: the folder, each file's sha256,
the settings the file was made for). The tokenizer is saved with ``model_max_length`` set to the file's static
sequence length; an image processor whose output size is not the file's is refitted to it before saving.

:func:`recorded` finds them again for a file: in its manifest, or in the manifest of the file it was made from
(``quantize``'s ``quantization.source``; quantize also copies them beside its own file: :func:`copy_recorded`).
:meth:`Recorded.encode` and :meth:`Recorded.pixels` turn raw text and images into the file's inputs, for
``quantize --calibration``, ``compare --text`` and the Python API (:func:`inputs_for`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import InputError, UsageError, one_line

__all__ = ["SIDECAR_SUFFIX", "Recorded", "Sidecar", "copy_recorded", "files_record", "inputs_for", "recorded",
           "recorded_source", "sidecar_path"]

SIDECAR_SUFFIX = ".hf"
_CHAIN = 4  # manifests followed back through quantize's sources


def sidecar_path(model: Path) -> Path:
    """``m.onnx`` -> ``m.hf`` (beside it)."""
    return model.with_name(model.name.removesuffix(".onnx") + SIDECAR_SUFFIX)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_record(folder: Path) -> dict[str, str]:
    """Each file of ``folder`` (a ``NAME.hf/``) and its sha256, for the manifest's ``preprocessing.files``."""
    return {p.name: _sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}


def _fit_processor(processor: Any, height: int, width: int) -> None:
    """The processor's output size set to the file's: its crop when it crops (the resize scaled alike), else its
    resize target; checked on a blank image, so a processor that cannot make that size is refused at export."""
    from portable.hf.shapes import size_dict, sized_like

    size = size_dict(getattr(processor, "size", None))
    crop = size_dict(getattr(processor, "crop_size", None))
    if getattr(processor, "do_center_crop", False) and crop:
        scale = height / crop.get("height", height)
        processor.crop_size = sized_like(processor.crop_size, {"height": height, "width": width})
        processor.size = sized_like(processor.size, {k: round(v * scale) for k, v in size.items()})
    elif "height" in size and "width" in size:
        processor.size = sized_like(processor.size, {"height": height, "width": width})
    elif "shortest_edge" in size and height == width:
        processor.size = sized_like(processor.size, {**size, "shortest_edge": height})


def _pixels_shape(processor: Any) -> tuple[int, ...]:
    blank = np.zeros((97, 131, 3), np.uint8)
    return tuple(processor(images=[blank], return_tensors="np")["pixel_values"].shape[1:])


@dataclass(frozen=True)
class Sidecar:
    """What an export from a folder writes beside the file (``path``: ``NAME.hf``; None when the folder has
    neither a tokenizer nor an image processor) and records in its manifest (``source``: the folder, the task,
    the dims and where each came from)."""

    path: Path | None
    source: dict[str, Any]
    tokenizer: Any = None
    processor: Any = None

    @classmethod
    def of(cls, model: Any, output: Path) -> Sidecar:
        """The sidecar of a :class:`portable.hf.load.FolderModel` exported to ``output``; the processor refitted."""
        has = model.tokenizer is not None or model.processor is not None
        if model.processor is not None and "height" in model.dims:
            height, width = model.dims["height"].value, model.dims["width"].value
            _fit_processor(model.processor, height, width)
            made = _pixels_shape(model.processor)
            if made[-2:] != (height, width):
                raise UsageError(f"the folder's image processor makes {made[-2]}x{made[-1]} images, not the file's "
                                 f"{height}x{width}: export at its size (no --shape height/width)")
        return cls(sidecar_path(output) if has else None, model.record(), model.tokenizer, model.processor)

    def write(self, folder: Path) -> dict[str, Any]:
        """Save the tokenizer and processor into ``folder``; the manifest's ``preprocessing`` record."""
        from portable.quiet import quiet_libraries

        record: dict[str, Any] = {"folder": self.path.name if self.path else None}
        length = self.source["dims"].get("sequence_length", {}).get("value")
        with quiet_libraries():
            if self.tokenizer is not None:
                self.tokenizer.model_max_length = length
                self.tokenizer.save_pretrained(str(folder))
                record["tokenizer"] = {"class": type(self.tokenizer).__name__, "max_length": length,
                                       "padding": "max_length", "truncation": True}
            if self.processor is not None:
                self.processor.save_pretrained(str(folder))
                record["image_processor"] = _processor_record(self.processor)
        record["files"] = files_record(folder)
        return record


_PROCESSOR_KEYS = ("do_resize", "size", "resample", "do_center_crop", "crop_size", "crop_pct", "do_rescale",
                   "rescale_factor", "do_normalize", "image_mean", "image_std")


def _processor_record(processor: Any) -> dict[str, Any]:
    settings = processor.to_dict()
    return {"class": type(processor).__name__, **{k: settings[k] for k in _PROCESSOR_KEYS if k in settings}}


@dataclass(frozen=True)
class Recorded:
    """A file's recorded preprocessing: the folder it lies in, the manifest's record, and the manifest it was
    read from (the file's own, or its source's)."""

    folder: Path
    record: dict[str, Any]
    manifest: Path

    @property
    def where(self) -> str:
        return f"{self.folder} (recorded in {self.manifest.name})"

    @property
    def has_tokenizer(self) -> bool:
        return "tokenizer" in self.record

    @property
    def has_processor(self) -> bool:
        return "image_processor" in self.record

    def tokenizer(self) -> Any:
        return self._load("AutoTokenizer")

    def processor(self) -> Any:
        return self._load("AutoImageProcessor")

    def _load(self, auto: str) -> Any:
        from portable.hf.folder import require_transformers
        from portable.quiet import quiet_user_code

        transformers = require_transformers()
        try:
            with quiet_user_code():
                return getattr(transformers, auto).from_pretrained(str(self.folder), local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - the folder was changed or removed since the export
            raise InputError(f"cannot load the recorded preprocessing: {one_line(exc)}", path=str(self.folder)) from None

    def encode(self, texts: Sequence[str], names: Sequence[str], length: int) -> dict[str, np.ndarray]:
        """``texts`` tokenized at ``length`` (padded, truncated), the arrays the file's inputs ``names`` take."""
        tokenizer = self.tokenizer()
        batch = tokenizer(list(texts), padding="max_length", truncation=True, max_length=length, return_tensors="np")
        missing = [n for n in names if n not in batch]
        if missing:
            raise UsageError(f"the recorded tokenizer makes {', '.join(batch)}, not the file's input {missing[0]!r}",
                             path=str(self.folder))
        return {n: np.asarray(batch[n]).astype(np.int64) for n in names}

    def pixels(self, images: Sequence[Any], size: tuple[int, int]) -> np.ndarray:
        """PIL images as ``[N, 3, H, W]`` float32 through the recorded image processor; its size must be the file's."""
        processor = self.processor()
        arrays = processor(images=list(images), return_tensors="np")["pixel_values"]
        if tuple(arrays.shape[-2:]) != tuple(size):
            raise UsageError(f"the recorded image processor makes {arrays.shape[-2]}x{arrays.shape[-1]} images, the "
                             f"file takes {size[0]}x{size[1]}", path=str(self.folder))
        return np.ascontiguousarray(arrays, dtype=np.float32)


def _manifest(model: Path) -> dict[str, Any] | None:
    path = model.with_name(model.name + ".json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _source_path(model: Path, source: Path) -> Path:
    """A quantized file's source as its manifest names it (relative to where quantize ran, unknown here): as
    given from here, else beside the quantized file."""
    if source.is_absolute():
        return source
    candidates = [Path.cwd() / source, model.parent / source.name]
    return next((c for c in candidates if c.with_name(c.name + ".json").is_file()), candidates[0])


def _chain(model: str | Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``model``'s manifest, then the manifest of the file it was quantized from, and so on."""
    path = Path(model)
    for _ in range(_CHAIN):
        manifest = _manifest(path)
        if manifest is None:
            return
        yield path, manifest
        source = (manifest.get("quantization") or {}).get("source")
        if not source:
            return
        path = _source_path(path, Path(source))


def recorded_source(model: str | Path) -> dict[str, Any]:
    """Where the file (or the file it was quantized from) came from: the folder, task and dims its export
    recorded (``{}`` for a file made otherwise)."""
    for _, manifest in _chain(model):
        if isinstance(manifest.get("source"), Mapping):
            return dict(manifest["source"])
    return {}


def recorded(model: str | Path) -> Recorded | None:
    """The preprocessing recorded for ``model`` (or for the file it was quantized from); None when there is none."""
    for path, manifest in _chain(model):
        record = manifest.get("preprocessing")
        if isinstance(record, Mapping) and record.get("folder"):
            folder = path.parent / str(record["folder"])
            if not folder.is_dir():
                raise InputError(f"the manifest records the preprocessing in {folder.name}/, which is not there",
                                 path=str(path.with_name(path.name + ".json")))
            return Recorded(folder, dict(record), path.with_name(path.name + ".json"))
    return None


def copy_recorded(found: Recorded, files: Path, name: str) -> dict[str, Any]:
    """``found``'s files copied into ``files`` (a quantized file's own ``NAME.hf/``, named ``name``), so that the
    file travels with its tokenizer or image processor as an exported one does; the record, for its manifest."""
    for path in sorted(found.folder.iterdir()):
        if path.is_file():
            shutil.copy2(path, files / path.name)
    return {**found.record, "folder": name, "files": files_record(files)}


def inputs_for(model: str | Path, text: Sequence[str] | None = None, images: Sequence[Any] | None = None,
               ) -> dict[str, np.ndarray]:
    """The file's inputs for raw ``text`` (strings) or ``images`` (paths or PIL images), through the tokenizer or
    image processor its export recorded: ``{input name: array}``, ready for ONNX Runtime."""
    from portable.runners.inputs import graph_io

    found = recorded(model)
    if found is None:
        raise UsageError("no tokenizer or image processor is recorded for this file (export it from a model folder)",
                         path=str(model))
    specs = graph_io(model)[0]
    if text is not None:
        if not found.has_tokenizer:
            raise UsageError("the file's recorded preprocessing has no tokenizer", path=str(model))
        return found.encode(text, [s.name for s in specs], _static(specs[0], 1))
    if images is None or not found.has_processor:
        raise UsageError("give text=[...] or images=[...] the recorded preprocessing takes", path=str(model))
    from portable.quantization.images import open_rgb

    pictures = [open_rgb(Path(i)) if isinstance(i, (str, Path)) else i for i in images]
    return {specs[0].name: found.pixels(pictures, (_static(specs[0], 2), _static(specs[0], 3)))}


def _static(spec: Any, axis: int) -> int:
    """A dim of the file's input that must be fixed (the contract's)."""
    dim = spec.shape[axis] if axis < len(spec.shape) else None
    if not isinstance(dim, int):
        raise UsageError(f"input {spec.name!r} has shape {list(spec.shape)}: its dim {axis} must be static")
    return dim
