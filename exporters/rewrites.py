"""Rewrite rules for what is left once shapes are static, in onnxscript's pattern-rule form.

Each rule is a pattern, a condition and a replacement (:class:`onnxscript.rewriter.pattern.RewriteRule`),
applied by onnxscript's rewriter (:class:`~portable.exporters.passes.StaticRewritePass`). They cover
what onnxscript's own rules leave: its ``UnsqueezeUnsqueeze`` takes one axis each, its no-op rules
take scalars only (and compare within a tolerance), it has no rule for a ``Reshape`` that keeps its
input's shape, an ``Unsqueeze`` after a ``Reshape``, a ``Slice`` of a ``Slice`` or a ``Transpose`` between two
``Reshape`` s that only merge and split back whole axes (attention's ``k.transpose(-2, -1)``). Every rule keeps
the numbers exactly (data movement, a multiplication by one, an addition of an integer zero or of
``-0.0``) and holds for every batch: a symbolic dim only ever matches a ``0`` (copy) or ``-1``
(infer) in a shape, never the number the probes fixed it to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

if TYPE_CHECKING:
    from onnxscript.rewriter.pattern import RewriteRule

__all__ = ["exact_no_op_rules", "portable_rules"]


def portable_rules() -> list[RewriteRule]:
    """Every rule of this module (an explicit list: the order is the order they are tried in)."""
    from onnxscript.rewriter.pattern import RewriteRule

    return [
        RewriteRule(_reshape, _identity, _keeps_shape, name="NoOpReshape"),
        RewriteRule(_unsqueeze_twice, _one_unsqueeze, _merged_axes_known, name="UnsqueezeUnsqueeze"),
        RewriteRule(_unsqueezed_reshape, _one_reshape, _ones_insertable, name="ReshapeUnsqueeze"),
        RewriteRule(_slice_twice, _one_slice, _disjoint_axes, name="SliceSlice", remove_nodes=False),
        RewriteRule(_reshape_transpose_reshape, _one_transpose, _moves_whole_axes, name="ReshapeTransposeReshape"),
        *exact_no_op_rules(),
    ]


def exact_no_op_rules() -> list[RewriteRule]:
    """``x * 1``, ``x + 0``, ``x - 0`` and ``x / 1`` removed only when they are exactly no-ops, in place of
    onnxscript's ``mul_by_1``/``add_0``/``sub_0``/``div_by_1``, whose constants match within a
    tolerance (``rel_tol`` 1e-5, ``abs_tol`` 1e-8): those drop ``var + 1e-12`` before a ``Sqrt`` and
    a division, which then gives NaN on a zero-variance row."""
    from onnxscript.rewriter.pattern import RewriteRule

    return [
        *RewriteRule(_mul, _identity, _times_one, name="MulByOnes").commute(),
        *RewriteRule(_add, _identity, _plus_zero, name="AddZeros").commute(),
        RewriteRule(_sub, _identity, _minus_zero, name="SubZeros"),
        RewriteRule(_div, _identity, _by_one, name="DivByOnes"),
    ]


def _identity(op: Any, x: ir.Value, **_: Any) -> ir.Value:
    return op.Identity(x)


def _ints(value: ir.Value | None) -> list[int] | None:
    """The integers of a constant 1-D (or scalar) integer tensor, else None."""
    tensor = ir.convenience.get_const_tensor(value) if value is not None else None
    if tensor is None or tensor.dtype not in (ir.DataType.INT64, ir.DataType.INT32):
        return None
    return [int(v) for v in np.atleast_1d(tensor.numpy()).ravel()]


def _allowzero(node: ir.Node) -> bool:
    attr = node.attributes.get("allowzero")
    return bool(attr.as_int()) if attr is not None else False


# --- a Reshape that keeps its input's shape


def _reshape(op: Any, x: ir.Value, shape: ir.Value) -> ir.Value:
    return op.Reshape(x, shape)


def _keeps_shape(context: Any, x: ir.Value, shape: ir.Value, **_: Any) -> bool:
    """Every target dim copies (``0``), equals the static input dim, or is the one ``-1`` left
    to infer: the output's shape is the input's at every batch."""
    target, dims = _ints(shape), x.shape
    if target is None or dims is None or len(target) != len(dims) or target.count(-1) > 1:
        return False
    if any(d == 0 for d in dims if isinstance(d, int)):
        return False  # an empty tensor: -1 would not infer
    copies = not _allowzero(context.root)
    return all(t == -1 or (t == 0 and copies) or (isinstance(d, int) and t == d) for t, d in zip(target, dims))


# --- a Transpose between a Reshape that merges axes and one that splits them again (attention's k.T)


def _reshape_transpose_reshape(op: Any, x: ir.Value, shape1: ir.Value, shape2: ir.Value) -> ir.Value:
    merged = op.Reshape(x, shape1, _allow_other_attributes=True, _outputs=["merged"])
    moved = op.Transpose(merged, _allow_other_attributes=True, _outputs=["moved"])
    return op.Reshape(moved, shape2, _allow_other_attributes=True, _outputs=["split"])


def _moves_whole_axes(context: Any, x: ir.Value, **bound: ir.Value) -> bool:
    return _whole_axes_perm(x, bound) is not None


def _whole_axes_perm(x: ir.Value, bound: dict[str, ir.Value]) -> tuple[int, ...] | None:
    """The one ``perm`` of ``x``'s axes that gives the three nodes' output at batches 1, 2, 3 and 5 (static
    dims but a leading batch symbol): the nodes then only move whole axes, at every batch. ``x`` of rank 4
    at most, or no more than the Transpose's: targets limit a Transpose's rank (docs/fix.md, rank-limit)."""
    first, second, perm = _ints(bound["shape1"]), _ints(bound["shape2"]), _perm_of(bound["moved"])
    dims = list(x.shape) if x.shape is not None else []
    if first is None or second is None or perm is None or not 1 < len(dims) <= max(4, len(perm)):
        return None
    rest = [d for d in dims[1:] if isinstance(d, int)]
    if len(rest) != len(dims) - 1:
        return None
    zeros = [_allowzero(v.producer()) for v in (bound["merged"], bound["split"])]  # type: ignore[arg-type]
    batches = (dims[0],) if isinstance(dims[0], int) else (1, 2, 3, 5)
    found = {_perm_at([batch, *rest], [first, second], perm, zeros) for batch in batches}
    return found.pop() if len(found) == 1 and None not in found else None


def _perm_of(value: ir.Value) -> tuple[int, ...] | None:
    node = value.producer()
    attr = node.attributes.get("perm") if node is not None else None
    return tuple(attr.as_ints()) if attr is not None else None


def _perm_at(dims: list[int], targets: list[list[int]], perm: tuple[int, ...], zeros: list[bool]) -> Any:
    """The axes' permutation equal to reshape, transpose, reshape of a ``dims`` array, or None (also above
    ``_MOVED_MAX`` elements: the check holds the array)."""
    if not 0 < int(np.prod(dims)) <= _MOVED_MAX:
        return None
    start = np.arange(int(np.prod(dims))).reshape(dims)
    try:
        middle = start.reshape(_target(start.shape, targets[0], zeros[0]))
        moved = middle.transpose(perm)
        out = moved.reshape(_target(moved.shape, targets[1], zeros[1]))
    except ValueError:
        return None
    candidate = _axes_by_stride(start, out)
    return candidate if candidate is not None and np.array_equal(start.transpose(candidate), out) else None


_MOVED_MAX = 1 << 24


def _axes_by_stride(start: np.ndarray, out: np.ndarray) -> tuple[int, ...] | None:
    """The source axis of each of ``out``'s axes, read from the index step one position along it (``start`` is
    ``arange`` in C order, so a step is a source axis's stride); size-1 axes take the size-1 source axes in order."""
    if out.ndim != start.ndim:
        return None
    strides = [s // start.itemsize for s in start.strides]
    ones = [i for i, d in enumerate(start.shape) if d == 1]
    axes: list[int] = []
    for axis, size in enumerate(out.shape):
        if size == 1:
            axes.append(ones.pop(0) if ones else -1)
            continue
        step = int(out[tuple(int(a == axis) for a in range(out.ndim))] - out[(0,) * out.ndim])
        found = [i for i, d in enumerate(start.shape) if d == size and strides[i] == step and i not in axes]
        axes.append(found[0] if found else -1)
    return tuple(axes) if sorted(axes) == list(range(start.ndim)) else None


def _target(shape: tuple[int, ...], target: list[int], allowzero: bool) -> list[int]:
    """Reshape's ``0`` (a copy of the input's dim, unless ``allowzero``) made explicit for NumPy."""
    return [shape[i] if t == 0 and not allowzero else t for i, t in enumerate(target)]


def _one_transpose(op: Any, x: ir.Value, **bound: ir.Value) -> ir.Value:
    perm = _whole_axes_perm(x, bound)
    assert perm is not None and x.shape is not None  # the condition checked both
    out = op.Transpose(x, perm=list(perm))
    out.shape, out.type = ir.Shape([x.shape[p] for p in perm]), x.type
    return out


# --- Unsqueeze of an Unsqueeze


def _unsqueeze_twice(op: Any, x: ir.Value, axes1: ir.Value, axes2: ir.Value) -> ir.Value:
    return op.Unsqueeze(op.Unsqueeze(x, axes1), axes2)


def _merged_axes(x: ir.Value, axes1: ir.Value, axes2: ir.Value) -> list[int] | None:
    """The one ``axes`` of both Unsqueezes, in the output's (non-negative) positions."""
    first, second = _ints(axes1), _ints(axes2)
    if first is None or second is None or x.shape is None:
        return None
    middle = len(x.shape) + len(first)
    out = middle + len(second)
    inserted = {a % out for a in second}
    kept = [i for i in range(out) if i not in inserted]  # where the middle tensor's dims land
    return sorted(inserted | {kept[a % middle] for a in first})


def _merged_axes_known(context: Any, x: ir.Value, axes1: ir.Value, axes2: ir.Value, **_: Any) -> bool:
    return _merged_axes(x, axes1, axes2) is not None


def _one_unsqueeze(op: Any, x: ir.Value, axes1: ir.Value, axes2: ir.Value, **_: Any) -> ir.Value:
    axes = _merged_axes(x, axes1, axes2)
    return op.Unsqueeze(x, op.Constant(value=ir.tensor(np.array(axes, dtype=np.int64))))


# --- Unsqueeze of a Reshape's output: one Reshape with the ones written in its shape


def _unsqueezed_reshape(op: Any, x: ir.Value, shape: ir.Value, axes: ir.Value) -> ir.Value:
    return op.Unsqueeze(op.Reshape(x, shape, _outputs=["reshaped"]), axes)


def _with_ones(shape: ir.Value, axes: ir.Value, allowzero: bool) -> list[int] | None:
    """The Reshape shape with a 1 at each unsqueezed axis; None when a copying ``0`` would move
    (it copies the input dim at its own position)."""
    target, inserted = _ints(shape), _ints(axes)
    if target is None or inserted is None:
        return None
    out = len(target) + len(inserted)
    ones = {a % out for a in inserted}
    positions = [i for i in range(out) if i not in ones]
    if not allowzero and any(t == 0 and p != i for i, (t, p) in enumerate(zip(target, positions))):
        return None
    merged = [1] * out
    for p, t in zip(positions, target):
        merged[p] = t
    return merged


def _ones_insertable(context: Any, x: ir.Value, shape: ir.Value, axes: ir.Value, reshaped: ir.Value,
                     **_: Any) -> bool:
    producer = reshaped.producer()
    return producer is not None and _with_ones(shape, axes, _allowzero(producer)) is not None


def _one_reshape(op: Any, x: ir.Value, shape: ir.Value, axes: ir.Value, reshaped: ir.Value, **_: Any) -> ir.Value:
    producer = reshaped.producer()
    allowzero = _allowzero(producer) if producer is not None else False
    merged = _with_ones(shape, axes, allowzero)
    return op.Reshape(x, op.Constant(value=ir.tensor(np.array(merged, dtype=np.int64))), allowzero=int(allowzero))


# --- Slice of a Slice on other axes: one Slice


def _slice_twice(op: Any, x: ir.Value, starts1: ir.Value, ends1: ir.Value, axes1: ir.Value, steps1: ir.Value,
                 starts2: ir.Value, ends2: ir.Value, axes2: ir.Value, steps2: ir.Value) -> ir.Value:
    return op.Slice(op.Slice(x, starts1, ends1, axes1, steps1), starts2, ends2, axes2, steps2)


def _slices(x: ir.Value, *inputs: ir.Value) -> list[list[int]] | None:
    """starts, ends, axes (non-negative) and steps of both Slices, joined; None unless every
    input is constant and the two Slices cut different axes."""
    parts = [_ints(v) for v in inputs]
    ints = [p for p in parts if p is not None]
    if len(ints) != len(parts) or x.shape is None:
        return None
    rank = len(x.shape)
    s1, e1, a1, t1, s2, e2, a2, t2 = ints
    first, second = [a % rank for a in a1], [a % rank for a in a2]
    if len({*first, *second}) != len(first) + len(second):
        return None
    return [s1 + s2, e1 + e2, first + second, t1 + t2]


def _disjoint_axes(context: Any, x: ir.Value, **bound: ir.Value) -> bool:
    return _slices(x, *_slice_inputs(bound)) is not None


def _slice_inputs(bound: dict[str, ir.Value]) -> list[ir.Value]:
    names = ("starts1", "ends1", "axes1", "steps1", "starts2", "ends2", "axes2", "steps2")
    return [bound[n] for n in names]


def _one_slice(op: Any, x: ir.Value, **bound: ir.Value) -> ir.Value:
    joined = _slices(x, *_slice_inputs(bound))
    assert joined is not None  # the condition held
    constants = [op.Constant(value=ir.tensor(np.array(v, dtype=np.int64))) for v in joined]
    return op.Slice(x, *constants)


# --- Mul by a tensor of ones, Add of a tensor of zeros, that does not broadcast x


def _mul(op: Any, x: ir.Value, c: ir.Value) -> ir.Value:
    return op.Mul(x, c)


def _add(op: Any, x: ir.Value, c: ir.Value) -> ir.Value:
    return op.Add(x, c)


def _sub(op: Any, x: ir.Value, c: ir.Value) -> ir.Value:
    return op.Sub(x, c)


def _div(op: Any, x: ir.Value, c: ir.Value) -> ir.Value:
    return op.Div(x, c)


def _by_one(context: Any, x: ir.Value, c: ir.Value, **_: Any) -> bool:
    return _times_one(context, x, c)


def _minus_zero(context: Any, x: ir.Value, c: ir.Value, **_: Any) -> bool:
    """Zeros of an integer type, or ``+0.0`` (``x - 0.0`` is ``x``, ``-0.0`` included; ``x - -0.0`` is not)."""
    array = _neutral(x, c)
    if array is None or np.any(array != 0):
        return False
    return bool(np.issubdtype(array.dtype, np.integer) or not np.any(np.signbit(array)))


def _times_one(context: Any, x: ir.Value, c: ir.Value, **_: Any) -> bool:
    array = _neutral(x, c)
    return array is not None and bool(np.all(array == 1))


def _plus_zero(context: Any, x: ir.Value, c: ir.Value, **_: Any) -> bool:
    """Zeros of an integer type, or ``-0.0`` (``-0.0 + 0.0`` is ``+0.0``; ``x + -0.0`` is ``x``)."""
    array = _neutral(x, c)
    if array is None or np.any(array != 0):
        return False
    return bool(np.issubdtype(array.dtype, np.integer) or np.all(np.signbit(array)))


def _neutral(x: ir.Value, c: ir.Value) -> np.ndarray | None:
    """The values of constant ``c`` (compared exactly by the callers: onnxscript's scalar rules
    allow a tolerance) when broadcasting it leaves ``x``'s shape and type as they are."""
    tensor = ir.convenience.get_const_tensor(c)
    if tensor is None or x.shape is None or tensor.dtype != x.dtype:
        return None
    array = tensor.numpy()
    if array.ndim > len(x.shape):
        return None
    dims = list(x.shape)[len(x.shape) - array.ndim:]
    keeps = all(n == 1 or (isinstance(d, int) and n == d) for n, d in zip(array.shape, dims))
    return array if keeps else None
