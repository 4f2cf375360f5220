"""Model inputs: what the ONNX graph declares, and identical seeded feeds for every runner.

Feeds are made once per batch size and handed to every runner, so all runners see the
same bytes: floats from a standard normal, integers uniform in ``[low, high)``, bools fair
coin flips; or the user's ``.npz`` (keys are input names, or ``arr_0``... in input order).
Integer ranges are per input: given (``--int-range NAME=LOW:HIGH``), else the example
input's own ``[min, max + 1)`` (an all-ones attention mask stays all ones, token ids stay
in their vocabulary), else one range for all. ``portable export``'s verify uses the same
generator, so the two give the same numbers on the same model, batch and seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import InputError, UsageError

__all__ = ["InputSpec", "OutputSpec", "dims_from_examples", "graph_io", "int_ranges_from_examples", "io_of_proto",
           "load_npz", "make_feeds", "parse_dims", "parse_int_range", "parse_int_ranges", "tensor_leaves"]

Dim = int | str | None


@dataclass(frozen=True)
class InputSpec:
    """A graph input: name, dtype name and shape (ints, symbolic names, or None)."""

    name: str
    dtype: str
    shape: tuple[Dim, ...]

    def resolve(self, batch: int, dims: Mapping[str, int]) -> tuple[int, ...]:
        """The concrete shape: axis 0 (if symbolic) is the batch; other symbols from ``dims``."""
        out = []
        for axis, dim in enumerate(self.shape):
            if isinstance(dim, int):
                out.append(dim)
            elif axis == 0:
                out.append(batch)
            elif dim in dims:
                out.append(dims[dim])  # type: ignore[index]
            else:
                raise UsageError(f"input {self.name!r} axis {axis} is symbolic ({dim!r}): give its size "
                                 f"with --dim {dim or 'NAME'}=SIZE, or a reference with example inputs")
        return tuple(out)

    @property
    def static_batch(self) -> int | None:
        return self.shape[0] if self.shape and isinstance(self.shape[0], int) else None


@dataclass(frozen=True)
class OutputSpec:
    name: str
    dtype: str


def _dtype(elem_type: int, name: str) -> str:
    """The NumPy dtype name of an ONNX element type the runners can feed and compare: bool, integers,
    floats and bfloat16 (strings, complex and float8 are refused)."""
    from onnx import helper

    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError):
        dtype = None
    if dtype is None or not (dtype.kind in "biuf" or dtype.name == "bfloat16"):
        raise InputError(f"value {name!r} has an unsupported element type {elem_type}")
    return dtype.name


def graph_io(model_path: str | Path) -> tuple[list[InputSpec], list[OutputSpec]]:
    """The graph's inputs (initializers excluded) and outputs, without loading weights: the
    validators' lean loader leaves large payloads in the file (and names any unreadable file)."""
    from portable.validators.lean import release
    from portable.validators.loading import load_model_file

    model = load_model_file(model_path).proto
    release(model)  # only the graph's signature is read below
    return io_of_proto(model)


def io_of_proto(model: Any) -> tuple[list[InputSpec], list[OutputSpec]]:
    """The inputs (initializers excluded) and outputs of an ``onnx.ModelProto``."""
    inits = {i.name for i in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        ttype = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in ttype.shape.dim)
        inputs.append(InputSpec(value.name, _dtype(ttype.elem_type, value.name), shape))
    outputs = [OutputSpec(v.name, _dtype(v.type.tensor_type.elem_type, v.name)) for v in model.graph.output]
    return inputs, outputs


def _random(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], int_range: tuple[int, int]) -> np.ndarray:
    kind = np.dtype(dtype).kind if dtype != "bfloat16" else "f"
    if kind == "f":
        return rng.standard_normal(shape).astype(dtype if dtype != "bfloat16" else "float32")
    if kind in "iu":
        return rng.integers(int_range[0], int_range[1], size=shape).astype(dtype)
    if kind == "b":
        return rng.random(shape) < 0.5
    raise InputError(f"cannot make random inputs of dtype {dtype}")


def make_feeds(specs: Sequence[InputSpec], batch: int, *, seed: int = 0, dims: Mapping[str, int] | None = None,
               int_range: tuple[int, int] = (0, 10),
               int_ranges: Mapping[str, tuple[int, int]] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for one batch size; the same seed and batch always give the same bytes.

    An integer input is drawn from ``int_ranges[name]`` when given, else from ``int_range``.
    """
    rng = np.random.default_rng([seed, batch])
    ranges = int_ranges or {}
    return {s.name: _random(rng, s.dtype, s.resolve(batch, dims or {}), ranges.get(s.name, int_range)) for s in specs}


def load_npz(path: str | Path, specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """Inputs from a ``.npz``, cast to the declared dtypes."""
    try:
        with np.load(str(path)) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001 - unreadable npz
        raise InputError(f"cannot read inputs: {type(exc).__name__}: {exc}", path=str(path)) from None
    feeds = {}
    for index, spec in enumerate(specs):
        key = spec.name if spec.name in arrays else f"arr_{index}"
        if key not in arrays:
            raise InputError(f"no array for input {spec.name!r} (keys: {sorted(arrays)})", path=str(path))
        feeds[spec.name] = _checked(arrays[key], spec, str(path))
    return feeds


def _checked(array: np.ndarray, spec: InputSpec, path: str) -> np.ndarray:
    """The array cast to the declared dtype, if its kind and shape fit the graph input."""
    if array.dtype.kind not in "biuf":
        raise InputError(f"input {spec.name!r} has dtype {array.dtype}, the model expects {spec.dtype}", path=path)
    fixed = [(axis, dim) for axis, dim in enumerate(spec.shape) if isinstance(dim, int)]
    if array.ndim != len(spec.shape) or any(array.shape[axis] != dim for axis, dim in fixed):
        expected = "x".join(str(d) if isinstance(d, int) else str(d or "?") for d in spec.shape)
        raise InputError(f"input {spec.name!r} has shape {'x'.join(map(str, array.shape))}, "
                         f"the model expects {expected}", path=path)
    return array.astype(spec.dtype if spec.dtype != "bfloat16" else "float32")


def dims_from_examples(specs: Sequence[InputSpec], examples: Sequence[Any] | None) -> dict[str, int]:
    """Sizes of symbolic non-batch axes, read from the reference's example inputs (by position)."""
    dims: dict[str, int] = {}
    for spec, example in zip(specs, tensor_leaves(examples)):
        shape = tuple(getattr(example, "shape", ()))
        for axis, dim in enumerate(spec.shape):
            if axis > 0 and isinstance(dim, str) and axis < len(shape):
                dims.setdefault(dim, int(shape[axis]))
    return dims


def tensor_leaves(examples: Any) -> list[Any]:
    """The tensor leaves of example inputs (lists, tuples, dicts, nested), in the order the
    exporter makes them graph inputs; arrays count as tensors."""
    if examples is None:
        return []
    from torch.utils import _pytree

    return [leaf for leaf in _pytree.tree_leaves(examples) if hasattr(leaf, "shape") and hasattr(leaf, "dtype")]


def _int_example(example: Any) -> bool:
    dtype = getattr(example, "dtype", None)
    if dtype is None or str(dtype) in ("torch.bool", "bool"):
        return False
    floating = getattr(dtype, "is_floating_point", None)
    return floating is False or getattr(dtype, "kind", "") in ("i", "u")


def int_ranges_from_examples(specs: Sequence[InputSpec], examples: Any) -> dict[str, tuple[int, int]]:
    """``[min, max + 1)`` of each integer example input, keyed by the graph input it feeds (by position)."""
    ranges = {}
    for spec, example in zip(specs, tensor_leaves(examples)):
        if _int_example(example) and int(np.prod(example.shape)) > 0:
            ranges[spec.name] = (int(example.min()), int(example.max()) + 1)
    return ranges


def parse_dims(values: Sequence[str]) -> dict[str, int]:
    """``--dim NAME=SIZE`` values."""
    dims = {}
    for text in values:
        name, sep, size = text.partition("=")
        if not sep or not name or not size.isdigit() or int(size) < 1:
            raise UsageError(f"--dim {text!r}: expected NAME=SIZE with SIZE >= 1")
        dims[name] = int(size)
    return dims


def parse_int_range(text: str | None) -> tuple[int, int] | None:
    """``--int-range LOW:HIGH`` (HIGH exclusive)."""
    if text is None:
        return None
    low, sep, high = text.partition(":")
    try:
        lo, hi = int(low), int(high)
    except ValueError:
        raise UsageError(f"--int-range {text!r}: expected LOW:HIGH or NAME=LOW:HIGH") from None
    if not sep or hi <= lo:
        raise UsageError(f"--int-range {text!r}: HIGH must be greater than LOW")
    return lo, hi


def parse_int_ranges(values: Sequence[str]) -> tuple[tuple[int, int] | None, dict[str, tuple[int, int]]]:
    """Repeated ``--int-range [NAME=]LOW:HIGH``: the range for all integer inputs (the last bare
    one, or None) and the per-input ranges by name."""
    default: tuple[int, int] | None = None
    per_input: dict[str, tuple[int, int]] = {}
    for text in values:
        name, sep, rest = text.rpartition("=")
        if sep and not name:
            raise UsageError(f"--int-range {text!r}: expected LOW:HIGH or NAME=LOW:HIGH")
        rng = parse_int_range(rest if sep else text)
        if sep and rng is not None:
            per_input[name] = rng
        else:
            default = rng
    return default, per_input
