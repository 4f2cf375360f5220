"""Model inputs: what the ONNX graph declares, and identical seeded feeds for every runner.

Feeds are made once per batch size and handed to every runner, so all runners see the
same bytes: floats from a standard normal, integers uniform in ``[low, high)`` (cut to what
the type holds), bools fair coin flips, strings seeded words of 1-8 letters and digits; or
the user's ``.npz`` (keys are input names, or ``arr_0``... in input order).
Integer inputs are drawn per input (:func:`draws`, which the reports quote): a range given
(``--int-range NAME=LOW:HIGH``); else what the graph does with the input
(:mod:`portable.runners.constraints`: token ids over their whole embedding table, a padding
mask as real padding, each row ones then zeros); else the example input's own
``[min, max + 1)``; else one range for all. ``portable export``'s verify uses the same
generator and the same analysis, so the two give the same numbers on the same model, batch and seed.

The types NumPy lacks come as ml_dtypes arrays (onnx's own mapping: float8, float4, int4/uint4,
int2/uint2; bfloat16 is drawn in float32 for the runners, PyTorch reading no ml_dtypes array,
and :func:`as_declared` makes it bfloat16). Only ``graph_io(..., every_type=True)`` (the proof
of ``portable fix``) declares those and strings: onnx.reference runs them, and ONNX Runtime
through :func:`run_onnxruntime`. Complex tensors stay refused: ONNX Runtime 1.32 has no complex
tensor type ("MLDataType for: tensor(complex64) is not currently registered").
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from portable.errors import InputError, UsageError
from portable.runners.constraints import MASK_DRAW

if TYPE_CHECKING:
    from portable.runners.constraints import Constraint

__all__ = ["MASK_DRAW", "STRING", "Draw", "as_declared", "device_value", "dims_from_examples", "draws", "from_ort_value",
           "graph_io", "host_array", "InputSpec", "int_ranges_from_examples", "io_of_proto", "is_ml_dtype", "load_npz",
           "make_feeds", "numpy_dtype", "ort_value", "OutputSpec", "padding_mask", "parse_dims", "parse_int_range",
           "parse_int_ranges", "run_onnxruntime", "tensor_leaves"]

Dim = int | str | None
STRING = "string"  # the dtype name of a string tensor; NumPy holds it as an object array
_LETTERS = string.ascii_letters + string.digits  # what seeded strings are made of


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
            elif f"{self.name}:{axis}" in dims:  # an unnamed dim, sized as INPUT:AXIS
                out.append(dims[f"{self.name}:{axis}"])
            else:
                raise UsageError(f"input {self.name!r} axis {axis} is symbolic ({dim!r}): give its size "
                                 f"with --dim {dim or f'{self.name}:{axis}'}=SIZE, or a reference with example inputs")
        return tuple(out)

    @property
    def static_batch(self) -> int | None:
        return self.shape[0] if self.shape and isinstance(self.shape[0], int) else None


@dataclass(frozen=True)
class OutputSpec:
    name: str
    dtype: str


@functools.cache
def _numpy_dtypes() -> dict[str, np.dtype]:
    """Every dtype name to its dtype, from onnx's table of element types (ml_dtypes' for the types NumPy lacks)."""
    from onnx import helper

    found = {}
    for elem_type in helper.get_all_tensor_dtypes():
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
        except (KeyError, ValueError, TypeError):
            continue
        found[dtype.name] = dtype
    found.pop("object", None)  # a string tensor's dtype name is STRING
    return {**found, STRING: np.dtype(object)}


def numpy_dtype(name: str) -> np.dtype:
    """The dtype of a dtype name of :class:`InputSpec` (``string``: object)."""
    return _numpy_dtypes()[name]


def is_ml_dtype(dtype: np.dtype) -> bool:
    """A dtype ml_dtypes adds to NumPy (bfloat16, float8, int4...); ``kind`` cannot tell (float8_e5m2's is 'f')."""
    return dtype.isbuiltin == 2


def _dtype(elem_type: int, name: str, every_type: bool = False) -> str:
    """The dtype name of an ONNX element type the runners can feed and compare: bool, integers,
    floats and bfloat16; with ``every_type`` also strings and ml_dtypes' float8, float4, int4/uint4,
    int2/uint2 (complex is refused)."""
    from onnx import TensorProto, helper

    if every_type and elem_type == TensorProto.STRING:
        return STRING
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        dtype = None
    native = dtype is not None and not is_ml_dtype(dtype) and dtype.kind in "biuf"
    extended = dtype is not None and is_ml_dtype(dtype) and (every_type or dtype.name == "bfloat16")
    if dtype is None or not (native or extended):
        raise InputError(f"value {name!r} has an unsupported element type {elem_type}")
    return dtype.name


def graph_io(model_path: str | Path, *, every_type: bool = False) -> tuple[list[InputSpec], list[OutputSpec]]:
    """The graph's inputs (initializers excluded) and outputs, without loading weights: the
    validators' lean loader leaves large payloads in the file (and names any unreadable file).
    ``every_type``: strings, float8, float4 and 4-/2-bit integers too (the runners of ``compare``,
    which feed PyTorch as well, refuse them here; the proof of ``fix`` takes them)."""
    from portable.validators.loading import load_model_file

    loaded = load_model_file(model_path)
    loaded.close()  # only the graph's signature is read below
    return io_of_proto(loaded.proto, every_type=every_type)


def io_of_proto(model: Any, *, every_type: bool = False) -> tuple[list[InputSpec], list[OutputSpec]]:
    """The inputs (initializers excluded) and outputs of an ``onnx.ModelProto``."""
    inits = {i.name for i in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        ttype = value.type.tensor_type
        shape = tuple(_dim(d) for d in ttype.shape.dim)
        inputs.append(InputSpec(value.name, _value_dtype(value, every_type), shape))
    outputs = [OutputSpec(v.name, _value_dtype(v, every_type)) for v in model.graph.output]
    return inputs, outputs


def _dim(dim: Any) -> Dim:
    """A dim as the runners read it: an integer, a symbol, or None (unnamed; a negative ``dim_value``, which
    some converters write for "unknown" (tract's quantized test cases: -1), is unknown too)."""
    if dim.HasField("dim_value"):
        return int(dim.dim_value) if dim.dim_value >= 0 else None
    return dim.dim_param or None


def _value_dtype(value: Any, every_type: bool) -> str:
    kind = value.type.WhichOneof("value")
    if kind not in (None, "tensor_type"):  # a sequence, map or optional
        raise InputError(f"value {value.name!r} is a {kind.removesuffix('_type')}, not a tensor: the runners "
                         "feed and compare tensors only")
    return _dtype(value.type.tensor_type.elem_type, value.name, every_type)


def _random(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], int_range: tuple[int, int],
            float_range: tuple[float, float] | None = None) -> np.ndarray:
    if dtype == STRING:
        return _strings(rng, shape)
    target = numpy_dtype(dtype)
    if target.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)  # a 0-d comparison gives numpy.bool_, not an array
    import onnx_ir as ir

    kind = ir.DataType.from_numpy(target)
    if kind.is_floating_point():
        values = rng.standard_normal(shape) if float_range is None else rng.uniform(*float_range, size=shape)
        if float(kind.min) >= 0:  # float8_e8m0fnu has no sign (nor zero): a negative value would be NaN
            values = np.abs(values)
        return np.asarray(values).astype(np.float32 if dtype == "bfloat16" else target)
    if kind.is_integer():
        low, high = max(int_range[0], int(kind.min)), min(int_range[1], int(kind.max) + 1)
        if low >= high:  # the range misses the type (int2 holds -2..1): its whole range
            low, high = int(kind.min), int(kind.max) + 1
        return np.asarray(rng.integers(low, high, size=shape)).astype(target)
    raise InputError(f"cannot make random inputs of dtype {dtype}")


def _strings(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Seeded words of 1-8 letters (both cases) and digits, as the object array ONNX Runtime takes."""
    lengths = rng.integers(1, 9, size=int(np.prod(shape)))
    letters = "".join(_LETTERS[i] for i in rng.integers(0, len(_LETTERS), size=int(lengths.sum())))
    ends = np.cumsum(lengths)
    words = [letters[end - length:end] for end, length in zip(ends, lengths)]
    return np.array(words, dtype=object).reshape(shape)


@dataclass(frozen=True)
class Draw:
    """How one input's seeded values are drawn, and why (the reports say it: :meth:`describe`)."""

    ints: tuple[int, int] | None = None  # integers in [low, high), when the input is an integer one
    floats: tuple[float, float] | None = None  # uniform in [low, high); None: standard normal
    mask: bool = False  # a padding mask: each row ones then zeros (:func:`padding_mask`)
    why: str = ""

    def describe(self, dtype: str) -> str:
        """``integers in [0, 1000): indices of Gather 'g' into axis 0 of size 1000``, ``standard normal``..."""
        if self.mask:
            return f"{MASK_DRAW}: {self.why}"
        if dtype == STRING:
            return "seeded words of 1-8 letters and digits"
        if dtype == "bool":
            return "fair coin flips"
        if numpy_dtype(dtype).kind in "iu" and self.ints is not None:
            return f"integers in [{self.ints[0]}, {self.ints[1]}): {self.why}"
        if self.floats is not None:
            return f"uniform in [{self.floats[0]:g}, {self.floats[1]:g}): {self.why}"
        return "standard normal"

    def to_dict(self, dtype: str) -> dict[str, Any]:
        return {"drawn": self.describe(dtype), "range": list(self.ints) if self.ints else None, "mask": self.mask}


def draws(specs: Sequence[InputSpec], *, int_range: tuple[int, int] = (0, 10),
          int_ranges: Mapping[str, tuple[int, int]] | None = None,
          constraints: Mapping[str, Sequence[Constraint]] | None = None,
          observed: Mapping[str, tuple[int, int]] | None = None) -> dict[str, Draw]:
    """How :func:`make_feeds` draws each input. An integer input: from ``int_ranges[name]`` when given (the
    user's ``--int-range NAME=``); else as its ``constraints`` say (:mod:`portable.runners.constraints`: a
    padding mask, or the range its consumers allow); else from ``observed[name]`` (the example input's own
    range); else from ``int_range``. A float input with a constraint (a ``Resize``'s scales): uniformly in it."""
    given, seen, limits = int_ranges or {}, observed or {}, constraints or {}
    return {s.name: _draw(s.name, given.get(s.name), limits.get(s.name, ()), seen.get(s.name), int_range)
            for s in specs}


def _draw(name: str, given: tuple[int, int] | None, found: Sequence[Constraint], seen: tuple[int, int] | None,
          default: tuple[int, int]) -> Draw:
    ints, floats = _constrained(name, found)
    reasons = "; ".join(c.why for c in found)
    if given is not None:
        return Draw(given, floats, why="given (--int-range)")
    if any(c.mask for c in found):
        return Draw((0, 2), mask=True, why="; ".join(c.why for c in found if c.mask))
    if ints is not None:
        return Draw(ints, floats, why=reasons)
    if seen is not None:
        return Draw(seen, floats, why="the example input's own range")
    return Draw(default, floats, why=reasons or "the range for every integer input")


def make_feeds(specs: Sequence[InputSpec], batch: int, *, seed: int = 0, dims: Mapping[str, int] | None = None,
               int_range: tuple[int, int] = (0, 10),
               int_ranges: Mapping[str, tuple[int, int]] | None = None,
               constraints: Mapping[str, Sequence[Constraint]] | None = None,
               observed: Mapping[str, tuple[int, int]] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for one batch size; the same seed and batch always give the same bytes, each input
    drawn as :func:`draws` says. A symbol at dim 0 of an input is the batch wherever it appears (a cache's
    ``batch_size`` at dim 1).
    """
    rng = np.random.default_rng([seed, batch])
    sizes = {**{s.shape[0]: batch for s in specs if s.shape and isinstance(s.shape[0], str)}, **(dims or {})}
    how = draws(specs, int_range=int_range, int_ranges=int_ranges, constraints=constraints, observed=observed)
    feeds = {}
    for s in specs:
        draw, shape = how[s.name], s.resolve(batch, sizes)
        if draw.mask:
            feeds[s.name] = padding_mask(rng, s.dtype, shape)
        else:
            feeds[s.name] = _random(rng, s.dtype, shape, draw.ints or int_range, draw.floats)
    return feeds


def padding_mask(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Real padding: along the last axis each row holds ones then zeros, ``1..L-1`` ones (at least one of
    each, so neither a mask that keeps ones nor one that masks them leaves a row empty; a row of one: 1)."""
    length = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1])) if shape else 1
    kept = rng.integers(1, max(length, 2), size=rows)
    mask = np.arange(length)[None, :] < kept[:, None]
    return mask.reshape(shape).astype(np.float32 if dtype == "bfloat16" else numpy_dtype(dtype))


def _constrained(name: str, found: Sequence[Constraint]) -> tuple[tuple[int, int] | None, tuple[float, float] | None]:
    """The integer and the float range ``found`` allows (None: unconstrained); constraints that disagree:
    the first one's."""
    from portable.runners.constraints import intersect

    if not found:
        return None, None
    low, high = intersect(found) or (found[0].low, found[0].high)
    ints = (int(np.ceil(low)), int(np.ceil(high))) if int(np.ceil(low)) < int(np.ceil(high)) else None
    floating = [c for c in found if c.floats]
    floats = (intersect(floating) or (floating[0].low, floating[0].high)) if floating else None
    return ints, floats


def as_declared(specs: Sequence[InputSpec], feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The feeds in the graph's own dtypes: bfloat16, drawn and read in float32 for the runners, becomes
    ml_dtypes' bfloat16, which onnx.reference and ONNX Runtime's OrtValues take."""
    return {s.name: np.asarray(feeds[s.name]).astype(numpy_dtype(s.dtype), copy=False) for s in specs}


def run_onnxruntime(session: Any, feeds: Mapping[str, Any]) -> list[np.ndarray]:
    """An ONNX Runtime session run on feeds of every dtype here; the outputs as NumPy (or ml_dtypes) arrays.

    ONNX Runtime's NumPy path (``session.run``) takes strings but no ml_dtypes array ("Numpy_type 260
    can't be converted to MLDataType") and returns none (float8e4m3fn comes back as uint8, the others
    raise "No corresponding Numpy type"); its OrtValues take and give every other type but no strings
    ("only supported from non-string numpy arrays"). So strings go through ``session.run``, the rest
    through OrtValues.
    """
    if any(np.asarray(value).dtype.kind == "O" for value in feeds.values()):
        return [np.asarray(o) for o in session.run(None, dict(feeds))]
    values = [ort_value(np.asarray(value)) for value in feeds.values()]
    outputs = session.run_with_ort_values(None, dict(zip(feeds, values)))
    return [from_ort_value(o) for o in outputs]


def ort_value(array: np.ndarray) -> Any:
    """An ``onnxruntime.OrtValue`` holding the array (it borrows a NumPy array's memory: keep both alive).

    ml_dtypes' 8- and 16-bit types go in through ``ortvalue_from_numpy_with_onnx_type``, which keeps
    the bytes and takes the ONNX type. A 4- or 2-bit tensor is packed, two or four to a byte, which
    that function does not do (it reads an int4 array's first bytes as packed pairs): onnx packs it
    (``numpy_helper.from_array``) into an OrtValue of the right shape and type.
    """
    import onnxruntime as ort

    array = np.require(array, requirements="C")  # np.ascontiguousarray would make a 0-d array 1-d
    if not is_ml_dtype(array.dtype):
        return ort.OrtValue.ortvalue_from_numpy(array)
    import onnx_ir as ir

    elem_type = ir.DataType.from_numpy(array.dtype)
    if elem_type.bitwidth >= 8:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array, int(elem_type))
    return _packed(array, int(elem_type))


def _packed(array: np.ndarray, elem_type: int) -> Any:
    import ctypes

    import onnxruntime as ort
    from onnx import numpy_helper

    data = numpy_helper.from_array(array).raw_data
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem_type)
    if value.tensor_size_in_bytes() != len(data):
        raise InputError(f"ONNX Runtime holds a {array.dtype} tensor of shape {list(array.shape)} in "
                         f"{value.tensor_size_in_bytes()} bytes, onnx packs it in {len(data)}")
    if data:
        ctypes.memmove(value.data_ptr(), data, len(data))  # a CPU OrtValue: data_ptr is host memory
    return value


def from_ort_value(value: Any) -> np.ndarray:
    """A CPU ``OrtValue`` as a NumPy array; the types NumPy lacks as ml_dtypes arrays.

    ``OrtValue.numpy()`` has no NumPy type for them; the documented ``data_ptr()`` and
    ``tensor_size_in_bytes()`` give the bytes, which onnx reads as a tensor's raw data
    (``numpy_helper.to_array``, which unpacks int4 and int2).
    """
    import onnx_ir as ir

    elem_type = ir.DataType(value.element_type())
    if elem_type == ir.DataType.STRING or not is_ml_dtype(elem_type.numpy()):
        return np.asarray(value.numpy())
    import ctypes

    from onnx import helper, numpy_helper

    size = value.tensor_size_in_bytes()
    data = ctypes.string_at(value.data_ptr(), size) if size else b""
    return numpy_helper.to_array(helper.make_tensor("", int(elem_type), value.shape(), data, raw=True))


def device_value(array: np.ndarray, device: str) -> Any:
    """An ``OrtValue`` on ``device`` (``cpu``, ``cuda``) holding a copy of the array, of any type
    ``ort_value`` takes (bfloat16 included, which ``ortvalue_from_numpy`` refuses): the host value
    is copied across by ``OrtValue.update_inplace``, the documented device-to-device copy."""
    import onnxruntime as ort

    host = ort_value(np.array(array, order="C", copy=True))
    if device == "cpu":
        return host
    value = ort.OrtValue.ortvalue_from_shape_and_type(host.shape(), host.element_type(), device, 0)
    value.update_inplace(host)
    return value


def host_array(value: Any) -> np.ndarray:
    """An ``OrtValue`` on any device as a NumPy array (copied to the host first if on a device)."""
    import onnxruntime as ort

    if value.device_name().lower() != "cpu":
        host = ort.OrtValue.ortvalue_from_shape_and_type(value.shape(), value.element_type(), "cpu", 0)
        host.update_inplace(value)
        value = host
    return from_ort_value(value)


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
    """The array cast to the declared dtype, if its kind and shape fit the graph input. Strings come as
    NumPy str arrays (an object array would need pickle); float8, float4 and 4-/2-bit inputs as their
    values (float32, int8...), rounded to the declared type as the model would cast them."""
    text = array.dtype.kind in "US"
    if text != (spec.dtype == STRING) or not (text or array.dtype.kind in "biuf"):
        raise InputError(f"input {spec.name!r} has dtype {array.dtype}, the model expects {spec.dtype}", path=path)
    fixed = [(axis, dim) for axis, dim in enumerate(spec.shape) if isinstance(dim, int)]
    if array.ndim != len(spec.shape) or any(array.shape[axis] != dim for axis, dim in fixed):
        expected = "x".join(str(d) if isinstance(d, int) else str(d or "?") for d in spec.shape)
        raise InputError(f"input {spec.name!r} has shape {'x'.join(map(str, array.shape))}, "
                         f"the model expects {expected}", path=path)
    return array.astype(numpy_dtype(spec.dtype) if spec.dtype != "bfloat16" else np.float32)


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
