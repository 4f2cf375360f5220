"""What a graph does with its inputs, as ranges their seeded values must keep (issue 26).

Random integers in ``[0, 10)`` break a graph that indexes with them (a token id into an embedding
``Gather`` of 5 rows: "indices element out of data bounds"), divides by them (a zero divisor of an
integer ``Mod``), or reads them as axes, scales or shapes. Before drawing, each graph input's consumers
are walked (through ops that pass values on unchanged: ``Cast``, ``Identity``, ``Reshape``,
``Unsqueeze``, ``Squeeze``, ``Flatten``, ``Transpose``) and each consumer that reads values in a range
gives one :class:`Constraint`; the input is drawn in the intersection (``make_feeds(..., constraints=)``).

A padding mask (issue 48) is a constraint of its own (``mask``): an integer or bool input named as
transformers names it (``attention_mask``, ``encoder_attention_mask``...), or one whose values reach a
``Softmax`` through a ``Where`` or ``Mul`` (the attention path; :data:`_MASK_PATH` lists the ops a mask
passes through on the way) is drawn as real padding, each row ones then zeros, never values up to 7 that
no tokenizer makes. An input that indexes a table is not a mask (token ids compared with the pad id on
the way to the attention are ids first).

One analysis, used by ``fix``'s proof, ``compare``, ``compare --runtime`` and export's verify (where it
comes before the ranges of the SPEC's own example inputs, which a model traced on ``-i``'s random
integers or on an unpadded batch does not limit). Shapes come from initializers and onnx's shape
inference; a dim neither gives is left unconstrained (nothing is guessed).

The walk is hand-written: neither onnx nor onnx-ir has an analysis of the value ranges an op accepts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MASK_DRAW", "MASK_NAMES", "Constraint", "constraints_of", "describe", "intersect"]

MASK_DRAW = "a padding mask: each row ones then zeros, at least one of each"  # how inputs.py draws a mask
MASK_NAMES = ("attention_mask",)  # transformers' names end so (attention_mask, encoder_attention_mask...)
# ops a mask's values pass through on their way to the attention: cast, moved, gathered, inverted, compared,
# combined and scaled (HF's eager ``(1 - mask) * min`` added to the scores; sdpa's boolean ``Where``)
_MASK_PATH = {"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Expand", "Tile",
              "Slice", "Concat", "Gather", "GatherND", "GatherElements", "Not", "And", "Or", "Xor", "Equal", "Less",
              "Greater", "LessOrEqual", "GreaterOrEqual", "Sub", "Neg", "Add", "Mul", "Where"}
_MASK_DATA_ONLY = {"Reshape", "Unsqueeze", "Squeeze", "Expand", "Tile", "Slice", "Gather", "GatherND",
                   "GatherElements"}  # their other inputs are shapes, axes or indices: no mask flows on from there
_MASK_USES = {"Where", "Mul"}  # the use that makes a value on the way to a Softmax a mask
_MASK_DEPTH = 16  # nodes walked from the input at most: a mask reaches its Softmax in a few
_INDICES = "indices of"  # how an index constraint's reason begins (an input that indexes is no mask)
_PASS_THROUGH = {"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose"}
_DIVISORS = {"Mod", "Div"}


@dataclass(frozen=True)
class Constraint:
    """Input ``input``'s values are drawn in ``[low, high)``, because of ``why`` (a consumer named)."""

    input: str
    low: float
    high: float
    why: str
    floats: bool = False  # True: applies to a float input too (scales); else to integer inputs only
    mask: bool = False  # True: a padding mask, drawn as each row's ones then zeros (``low``/``high``: 0, 2)

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "low": self.low, "high": self.high, "why": self.why, "mask": self.mask}


def intersect(found: Sequence[Constraint]) -> tuple[float, float] | None:
    """The range every constraint allows; None when they disagree (then the first one is kept)."""
    low, high = max(c.low for c in found), min(c.high for c in found)
    return (low, high) if low < high else None


def describe(constraints: Mapping[str, Sequence[Constraint]]) -> dict[str, list[str]]:
    """For a report: each constrained input, its range and the reasons."""
    return {name: [_said(c) for c in found] for name, found in constraints.items()}


def _said(c: Constraint) -> str:
    return f"{MASK_DRAW}: {c.why}" if c.mask else f"[{_num(c.low)}, {_num(c.high)}): {c.why}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def constraints_of(model: Any) -> dict[str, tuple[Constraint, ...]]:
    """The constraints of each graph input of ``model`` (an ``onnx.ModelProto``, or a path), by input name."""
    import onnx

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model), load_external_data=False)
    graph = proto.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initializers]
    consumers = _consumers(graph.node)
    shapes = _Shapes(proto)
    found: dict[str, tuple[Constraint, ...]] = {}
    for value in inputs:
        name = value.name
        rows = tuple(c for node, index in _reached(name, consumers) for c in _rules(name, node, index, shapes))
        if not any(c.why.startswith(_INDICES) for c in rows):  # ids compared with the pad id are ids first
            rows += _mask(value, consumers)
        if rows:
            found[name] = rows
    return found


def _mask(value: Any, consumers: Mapping[str, list[tuple[Any, int]]]) -> tuple[Constraint, ...]:
    """The padding-mask constraint of an integer or bool graph input, by its name or by its path to a Softmax."""
    kind = _kind(value.type.tensor_type.elem_type)
    if value.name.endswith(MASK_NAMES) and kind in ("b", "i", "u", "f"):
        return (Constraint(value.name, 0, 2, f"transformers' name {value.name!r}", mask=True),)
    path = _attention_path(value.name, consumers) if kind in ("b", "i", "u") else None
    if path is None:
        return ()
    use, softmax = path
    return (Constraint(value.name, 0, 2, f"it feeds {_label(use)} on the attention path (to {_label(softmax)})",
                       mask=True),)


def _kind(elem_type: int) -> str:
    """NumPy's kind letter of an ONNX element type ("" for one NumPy lacks)."""
    import numpy as np
    from onnx import helper

    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).kind)
    except (KeyError, TypeError, ValueError):
        return ""


def _attention_path(name: str, consumers: Mapping[str, list[tuple[Any, int]]]) -> tuple[Any, Any] | None:
    """The first ``Where``/``Mul`` and the ``Softmax`` that ``name``'s values reach through :data:`_MASK_PATH`."""
    todo: list[tuple[str, Any, int]] = [(name, None, 0)]
    seen = {name}
    while todo:
        value, use, depth = todo.pop(0)
        for node, index in consumers.get(value, []):
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type == "Softmax" and use is not None:
                return use, node
            data = index == 0 or node.op_type not in _MASK_DATA_ONLY
            if node.op_type in _MASK_PATH and data and depth < _MASK_DEPTH:
                here = use if use is not None or node.op_type not in _MASK_USES else node
                todo += [(o, here, depth + 1) for o in node.output if o and o not in seen]
                seen.update(node.output)
    return None


def _consumers(nodes: Any) -> dict[str, list[tuple[Any, int]]]:
    table: dict[str, list[tuple[Any, int]]] = {}
    for node in nodes:
        for index, value in enumerate(node.input):
            if value:
                table.setdefault(value, []).append((node, index))
    return table


def _reached(name: str, consumers: Mapping[str, list[tuple[Any, int]]]) -> Iterator[tuple[Any, int]]:
    """The consumers of ``name`` and of what the pass-through ops make of it (their data input only)."""
    todo, seen = [name], {name}
    while todo:
        value = todo.pop()
        for node, index in consumers.get(value, []):
            if node.op_type in _PASS_THROUGH and node.domain in ("", "ai.onnx") and index == 0:
                todo += [o for o in node.output if o and o not in seen]
                seen.update(node.output)
            else:
                yield node, index


class _Shapes:
    """Static shapes of values: initializers' dims, then onnx's shape inference (run once, when first asked)."""

    def __init__(self, proto: Any) -> None:
        self.proto = proto
        self.known: dict[str, tuple[int | None, ...]] = {t.name: tuple(t.dims) for t in proto.graph.initializer}
        self.inferred = False

    def of(self, value: str) -> tuple[int | None, ...] | None:
        if value not in self.known and not self.inferred:
            self._infer()
        return self.known.get(value)

    def _infer(self) -> None:
        import onnx

        self.inferred = True
        try:
            inferred = onnx.shape_inference.infer_shapes(self.proto)
        except Exception:  # noqa: BLE001 - inference refuses some graphs: then only the initializers' shapes
            inferred = self.proto
        g = inferred.graph
        for value in [*g.input, *g.value_info, *g.output]:
            t = value.type.tensor_type
            if value.type.WhichOneof("value") == "tensor_type" and t.HasField("shape"):
                dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in t.shape.dim)
                self.known.setdefault(value.name, dims)


def _attr(node: Any, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _label(node: Any) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else f"an unnamed {node.op_type}"


def _rules(name: str, node: Any, index: int, shapes: _Shapes) -> list[Constraint]:
    if node.domain not in ("", "ai.onnx"):
        return []
    rule = _RULES.get((node.op_type, index))
    return rule(name, node, shapes) if rule is not None else []


def _indices(name: str, node: Any, shapes: _Shapes) -> list[Constraint]:
    """Gather/GatherElements/ScatterElements indices: within ``[0, dim)`` of the axis of the data they index (ONNX also takes
    ``[-dim, 0)``; the non-negative half is the one every runtime and converter reads alike)."""
    data = shapes.of(node.input[0])
    if not data:
        return []
    axis = _attr(node, "axis", 0)
    axis = axis + len(data) if axis < 0 else axis
    dim = data[axis] if 0 <= axis < len(data) else None
    if not dim:
        return []
    return [Constraint(name, 0, dim, f"{_INDICES} {_label(node)} into axis {axis} of size {dim}")]


def _rank_of(position: int, what: str, extra: int = 0) -> Any:
    def rule(name: str, node: Any, shapes: _Shapes) -> list[Constraint]:
        data = shapes.of(node.input[position])
        if data is None:
            return []
        rank = len(data) + extra
        return [Constraint(name, 0, max(rank, 1), f"{what} of {_label(node)}, within rank {rank}")]

    return rule


def _fixed(low: float, high: float, what: str, floats: bool = False) -> Any:
    def rule(name: str, node: Any, shapes: _Shapes) -> list[Constraint]:
        return [Constraint(name, low, high, f"{what} of {_label(node)}", floats)]

    return rule


_RULES: dict[tuple[str, int], Any] = {
    ("Gather", 1): _indices,
    ("GatherElements", 1): _indices,
    ("ScatterElements", 1): _indices,
    ("Mod", 1): _fixed(1, 10, "a non-zero divisor"),
    ("Div", 1): _fixed(1, 10, "a non-zero divisor"),
    ("Resize", 2): _fixed(1, 2, "positive scales", floats=True),
    ("Resize", 3): _fixed(1, 4, "positive sizes"),
    ("Upsample", 1): _fixed(1, 2, "positive scales", floats=True),
    ("Expand", 1): _fixed(1, 2, "a shape that broadcasts"),
    ("Tile", 1): _fixed(1, 3, "positive repeats"),
    ("Slice", 1): _fixed(0, 1, "starts"),
    ("Slice", 2): _fixed(1, 10, "ends past the starts"),
    ("Slice", 3): _rank_of(0, "axes"),
    ("Slice", 4): _fixed(1, 2, "positive steps"),
    ("Unsqueeze", 1): _rank_of(0, "axes", extra=1),
    ("Squeeze", 1): _rank_of(0, "axes"),
    ("CumSum", 1): _rank_of(0, "the axis"),
    ("OneHot", 1): _fixed(1, 10, "a positive depth"),
    ("Bernoulli", 0): _fixed(0, 1, "probabilities", floats=True),
}
