"""Calibration and held-out samples: the user's ``.npz``, or seeded data shaped like the inputs.

The ``.npz`` format: one array per graph input, keyed by the input's name, the samples
stacked on a leading axis that takes the place of the batch dim: an input declared
``[batch, 3, 224, 224]`` is given as ``[N, 3, 224, 224]`` (N samples; a model with a static
batch B takes them B at a time, so N is a multiple of B). Every array has the same N.

Seeded data (the default) is a standard normal for float inputs; an integer input that
indexes a constant table (token ids into an embedding) is drawn from the table's rows, any
other integer input is all ones (an attention mask with no padding); ``int_ranges`` overrides
either. It is not the user's data distribution: the report says so.

Text, as users hold it: ``.txt`` (one sample a line, blank lines skipped) or ``.jsonl`` (one JSON object a
line, its ``text`` field), tokenized by the tokenizer the file's export recorded (``portable.hf.assets``:
``NAME.hf/``, named in the manifest) at the file's own static sequence length; a folder of images without
``--preprocess`` goes through the recorded image processor (``images.py``). The report says where each
setting came from.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from portable.errors import InputError, UsageError

__all__ = ["CALIBRATION_SEED_SALT", "HELD_OUT_SEED_SALT", "TEXT_SUFFIXES", "Reader", "Samples", "held_out_split",
           "index_ranges", "load_samples", "read_texts", "seeded_samples"]

CALIBRATION_SEED_SALT, HELD_OUT_SEED_SALT = 1, 2  # two streams of one seed: held-out samples are never calibration's
ALL_ONES = (1, 2)  # the range of an integer input that indexes no table: all ones (a mask without padding)
TEXT_SUFFIXES = (".txt", ".jsonl")


@dataclass(frozen=True)
class Samples:
    """``arrays[name]``: that input's samples on a leading axis; ``batch``: how many go in per run."""

    arrays: dict[str, np.ndarray]
    batch: int
    source: str
    static: bool = False  # the model's batch is fixed: every run takes exactly ``batch`` samples
    preprocess: dict[str, Any] | None = None  # a folder of images: what was done to them (images.py)

    @property
    def count(self) -> int:
        return int(next(iter(self.arrays.values())).shape[0]) if self.arrays else 0

    def batches(self) -> list[dict[str, np.ndarray]]:
        return [{k: v[i:i + self.batch] for k, v in self.arrays.items()} for i in range(0, self.count, self.batch)]

    def take(self, start: int, stop: int, source: str | None = None) -> Samples:
        return Samples({k: v[start:stop] for k, v in self.arrays.items()}, self.batch, source or self.source,
                       self.static, self.preprocess)


class Reader:
    """ONNX Runtime's ``CalibrationDataReader`` protocol (``get_next``, duck-typed by its
    ``__subclasshook__``) over the batches of some samples."""

    def __init__(self, samples: Samples) -> None:
        self._batches: Iterator[dict[str, np.ndarray]] = iter(samples.batches())

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self._batches


def _dims(spec: Any) -> tuple[int, ...]:
    """An input's dims after the batch axis, which must be static (the contract's PORT008)."""
    rest = tuple(spec.shape[1:])
    if not spec.shape or not all(isinstance(d, int) for d in rest):
        raise UsageError(f"input {spec.name!r} has shape {list(spec.shape)}: quantize needs a batch axis and "
                         "static dims after it (run `portable fix --dim NAME=SIZE`)")
    return rest


def index_ranges(proto: onnx.ModelProto) -> dict[str, tuple[int, int]]:
    """Integer inputs used directly as the indices of a ``Gather`` on an initializer: ``[0, rows)``."""
    tables = {t.name: int(t.dims[0]) for t in proto.graph.initializer if t.dims}
    ranges: dict[str, tuple[int, int]] = {}
    for node in proto.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[0] in tables:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            if axis == 0:
                ranges.setdefault(node.input[1], (0, tables[node.input[0]]))
    return ranges


def seeded_samples(specs: Sequence[Any], count: int, *, seed: int, salt: int, batch: int, static: bool,
                   int_ranges: Mapping[str, tuple[int, int]]) -> Samples:
    """``count`` seeded samples of every input (see the module docstring)."""
    from portable.runners.inputs import numpy_dtype

    rng = np.random.default_rng([seed, salt])
    arrays = {}
    for spec in specs:
        shape, dtype = (count, *_dims(spec)), numpy_dtype(spec.dtype)
        if dtype.kind == "f":
            arrays[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            arrays[spec.name] = np.ones(shape, dtype=bool)
        else:
            low, high = int_ranges.get(spec.name, ALL_ONES)
            arrays[spec.name] = rng.integers(low, high, size=shape).astype(dtype)
    return Samples(arrays, batch, f"seeded (seed {seed}, stream {salt})", static)


def _read(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise UsageError("no such file", path=str(path))
    try:
        with np.load(str(path), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001 - not an npz, a truncated zip, a pickled object array
        raise InputError(f"cannot read samples: {type(exc).__name__}: {exc}", path=str(path)) from None


def _checked(array: np.ndarray, spec: Any, where: str) -> np.ndarray:
    from portable.runners.inputs import numpy_dtype

    expected = (spec.shape[0] if isinstance(spec.shape[0], int) else "N", *_dims(spec))
    if array.shape[1:] != tuple(expected[1:]) or array.ndim != len(expected):
        shown = "x".join(map(str, array.shape)) or "a scalar"
        raise UsageError(f"input {spec.name!r}: samples of shape {shown}, the model takes "
                         f"{'x'.join(map(str, ('N', *expected[1:])))} (N samples on the leading axis)", path=where)
    wanted = numpy_dtype(spec.dtype)
    if array.dtype.kind not in ("f" if wanted.kind == "f" else "biu"):
        raise UsageError(f"input {spec.name!r}: samples of dtype {array.dtype}, the model takes {wanted}", path=where)
    return array.astype(wanted, copy=False)


def _recorded(model: Path | None) -> Any:
    """The preprocessing the model's export recorded (``portable.hf.assets``), or None."""
    if model is None:
        return None
    from portable.hf.assets import recorded

    return recorded(model)


def read_texts(path: Path) -> list[str]:
    """``.txt``: one sample a line (blank lines skipped); ``.jsonl``: each line's ``text`` field."""
    if not path.is_file():
        raise UsageError("no such file", path=str(path))
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    if path.suffix != ".jsonl":
        return lines
    texts = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"line {number}: not JSON ({exc})", path=str(path)) from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise UsageError(f"line {number}: a .jsonl sample is an object with a 'text' string", path=str(path))
        texts.append(record["text"])
    return texts


def _text_arrays(path: Path, specs: Sequence[Any], model: Path | None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Text samples tokenized by the file's recorded tokenizer at the file's static sequence length."""
    found = _recorded(model)
    if found is None or not found.has_tokenizer:
        raise UsageError(f"a {path.suffix} file is text, and {model.name if model else 'the model'} has no recorded "
                         "tokenizer to make its inputs (export it from a model folder, which writes NAME.hf/ beside "
                         "it; or give an .npz keyed by the input names)", path=str(path))
    texts = read_texts(path)
    if not texts:
        raise UsageError("no text in the file", path=str(path))
    first = specs[0]
    length = _dims(first)[0] if _dims(first) else 1
    arrays = found.encode(texts, [s.name for s in specs], int(length))
    tokenizer = found.record["tokenizer"]
    return arrays, {"preprocess": "tokenizer", "samples": len(texts), "tokenizer": tokenizer.get("class"),
                    "from": found.where, "max_length": int(length), "max_length_from": f"the file's input {first.name}",
                    "padding": "max_length", "truncation": True}


def _arrays(path: Path, specs: Sequence[Any], preprocess: str | None, model: Path | None = None,
            ) -> tuple[dict[str, np.ndarray], dict[str, Any] | None]:
    """An .npz's arrays, text tokenized by the recorded tokenizer, or a folder's images as
    :mod:`portable.quantization.images` makes them (by ``--preprocess``, else by the recorded image processor)."""
    if path.is_dir():
        found = _recorded(model) if preprocess is None else None
        if found is not None and found.has_processor:
            from portable.quantization.images import load_recorded_folder

            return load_recorded_folder(path, specs, found)
        if preprocess is None:
            raise UsageError("a folder of images needs --preprocess imagenet|inception|none (how the model's "
                             "training normalized its inputs); the model records no image processor", path=str(path))
        from portable.quantization.images import load_image_folder

        return load_image_folder(path, specs, preprocess)
    if preprocess is not None:
        raise UsageError(f"--preprocess {preprocess}: for a folder of images; an .npz holds the inputs as they are",
                         path=str(path))
    if path.suffix in TEXT_SUFFIXES:
        return _text_arrays(path, specs, model)
    return _read(path), None


def _where(path: str | Path, prepared: dict[str, Any] | None, preprocess: str | None) -> str:
    """The samples' source as the report names it, with where their preprocessing came from."""
    if prepared is None:
        return str(path)
    if prepared["preprocess"] == "tokenizer":
        return (f"{path} ({prepared['samples']} texts, tokenized by {prepared['tokenizer']} from {prepared['from']}, "
                f"at the file's sequence length {prepared['max_length']})")
    if prepared["preprocess"] == "recorded":
        return f"{path} ({prepared['images']} images, by the image processor from {prepared['from']})"
    return f"{path} ({prepared['images']} images, --preprocess {preprocess})"


def load_samples(path: str | Path, specs: Sequence[Any], batch: int, static: bool,
                 preprocess: str | None = None, model: str | Path | None = None) -> Samples:
    """The user's samples (the module docstring's format, a text file, or a folder of images), checked against
    the graph inputs; fed ``batch`` at a time (``static``: the model's own batch, so the count must be a
    multiple of it). ``model``: the file whose recorded tokenizer or image processor makes text and images its
    inputs."""
    arrays, prepared = _arrays(Path(path), specs, preprocess, Path(model) if model is not None else None)
    where = _where(path, prepared, preprocess)
    names = [s.name for s in specs]
    if not arrays:
        raise UsageError("the .npz holds no arrays (expected one per input: " + ", ".join(names) + ")", path=where)
    missing, extra = [n for n in names if n not in arrays], sorted(set(arrays) - set(names))
    if missing or extra:
        raise UsageError(f"the .npz's keys must be the input names {names}: missing {missing}, unknown {extra}",
                         path=where)
    checked = {s.name: _checked(arrays[s.name], s, where) for s in specs}
    counts = {n: int(a.shape[0]) for n, a in checked.items()}
    if len(set(counts.values())) != 1 or not next(iter(counts.values())):
        raise UsageError(f"every input needs the same number of samples, at least 1 (got {counts})", path=where)
    if static and next(iter(counts.values())) % batch:
        raise UsageError(f"the model's batch is static ({batch}): give a multiple of {batch} samples", path=where)
    return Samples(checked, batch, where, static, prepared)


def held_out_split(samples: Samples) -> tuple[Samples, Samples]:
    """The user's calibration samples less the last quarter (at least one sample, or one batch of a
    static-batch model), which is held out for the accuracy measurement."""
    unit = samples.batch if samples.static else 1
    units = samples.count // unit
    if units < 2:
        raise UsageError(f"{samples.count} sample(s) cannot be split into calibration and held-out samples: give "
                         "more, or the held-out ones apart (--eval FILE.npz)", path=samples.source)
    cut = (units - max(1, units // 4)) * unit
    return (samples.take(0, cut, f"{samples.source} [0:{cut}]"),
            samples.take(cut, samples.count, f"{samples.source} [{cut}:{samples.count}] (held out)"))
