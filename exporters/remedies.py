"""The remedies of ``portable fix``, in onnx-ir style: one transformation per pass.

The generic work is done by libraries: ``onnx.version_converter`` (opset), onnx-ir's
common passes (inlining, unused nodes, initializers listed as inputs), and the exporter's
own passes (:mod:`portable.exporters.passes`: constant folding, batch-only shape
computations, static value shapes, canonical names), composed here, not copied. What is
hand-written: fixing named dims and the batch of a model that arrives with symbols,
internalizing external data under the hostile-input rules of ``portable validate``, and two
gaps of the converter's adapters (PRelu's slope from opset 6 to 7; attributes at their
default that the older op lacks), which the proof checks like everything else.

A pass that cannot apply its remedy safely raises :class:`RemedyRefused`; the caller then
keeps the model as it was before that pass and reports why.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir

from portable.exporters.initializers import add_initializer
from portable.exporters.passes import BATCH, RenameSymbolPass, _ints, _ProbedPass, _replace_input
from portable.exporters.probe import Probe
from portable.validators.limits import SMALL_TENSOR

__all__ = [
    "ConstantOfShapePass",
    "ConvertOpsetPass",
    "DropDefaultAttributesPass",
    "ExpandBatchShapesPass",
    "ExpandNewerOpsPass",
    "StaticDimsPass",
    "FixBatchPass",
    "FixDimsPass",
    "NegativeDimsPass",
    "FITS_INT32",
    "INDEX_SLOTS",
    "Int32IndicesPass",
    "InternalizeDataPass",
    "PASS_THROUGH",
    "PReluSlopesPass",
    "RaiseIRVersionPass",
    "RemedyRefused",
    "batch_symbol",
    "lone_unknown_batch",
    "external_bytes",
    "static_dim_reads",
    "symbols",
    "types_newer_than",
]


class RemedyRefused(Exception):
    """A remedy that cannot be applied safely; the message says why, for the user."""


class ConvertOpsetPass(ir.passes.FunctionalPass):
    """The default-domain opset to ``opset`` with ``onnx.version_converter`` (up or down).

    An op the converter has no adapter for is refused with the converter's own words:
    the op is reported, never guessed; so is a model using an element type the opset does
    not have (float8 came with opset 19: no conversion can take it down). The IR version
    is raised to what the opset needs.
    """

    def __init__(self, opset: int) -> None:
        super().__init__()
        self.opset = opset

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.opset_imports.get("", None) == self.opset:
            return ir.passes.PassResult(model.clone(), modified=False)  # a functional pass returns a new model
        if "" not in model.opset_imports and "ai.onnx" not in model.opset_imports:
            domains = ", ".join(sorted(d for d in model.opset_imports)) or "none"
            raise RemedyRefused(f"the model imports no ai.onnx opset (its imports: {domains}), so there is no "
                                "default-domain version to convert from: its ops are not ONNX ops")
        newer = types_newer_than(model, self.opset)
        if newer:
            raise RemedyRefused(f"the model uses {', '.join(newer)}, which opset {self.opset} does not have "
                                f"(Cast-{self.opset} takes no such type): no conversion to it keeps the model")
        import onnx
        from onnx import version_converter

        proto = ir.to_proto(model)
        # An IR version below 4 asks the converter to find every initializer among the graph's
        # inputs, which the earlier remedy removed: the target opset's IR version applies already.
        target = [onnx.helper.make_opsetid("", self.opset)]
        proto.ir_version = max(proto.ir_version, onnx.helper.find_min_ir_version_for(target, ignore_unknown=True))
        try:
            converted = version_converter.convert_version(proto, self.opset)
        except Exception as exc:  # noqa: BLE001 - the converter raises RuntimeError, ValidationError, IndexError
            raise RemedyRefused(f"onnx.version_converter cannot convert to opset {self.opset}: "
                                f"{_first_line(exc)}") from None
        needed = onnx.helper.find_min_ir_version_for(list(converted.opset_import), ignore_unknown=True)
        converted.ir_version = max(converted.ir_version, needed)
        _carry_metadata(proto.graph, converted.graph)
        return ir.passes.PassResult(ir.from_proto(converted), modified=True)


def _carry_metadata(before: Any, after: Any) -> None:
    """Node ``metadata_props`` (the source lines of an export) through ``onnx.version_converter``, which
    drops them (issue 25: BERT 113 -> 0). Nodes correspond by an output name (adapters keep a node's outputs;
    one they insert takes the metadata of the node whose output it makes), else by node name; subgraphs alike."""
    by_output = {o: n for n in before.node for o in n.output if o}
    by_name = {n.name: n for n in before.node if n.name}
    for node in after.node:
        twin = next((by_output[o] for o in node.output if o in by_output), None) or by_name.get(node.name)
        if twin is None:
            continue
        if twin.metadata_props and not node.metadata_props:
            node.metadata_props.extend(twin.metadata_props)
        for graph, old_graph in _graph_attributes(node, twin):
            _carry_metadata(old_graph, graph)


def _graph_attributes(node: Any, old: Any) -> list[tuple[Any, Any]]:
    """The subgraphs of ``node`` paired with those of the same attribute of ``old``."""
    import onnx

    olds = {a.name: a for a in old.attribute}
    pairs = []
    for attr in node.attribute:
        match = olds.get(attr.name)
        if attr.type == onnx.AttributeProto.GRAPH and match is not None:
            pairs.append((attr.g, match.g))
        elif attr.type == onnx.AttributeProto.GRAPHS and match is not None:
            pairs += list(zip(attr.graphs, match.graphs))
    return pairs


def types_newer_than(model: ir.Model, opset: int) -> list[str]:
    """The element types the model uses that ONNX defines only after ``opset`` (float8: opset 19,
    int4/uint4: 21, float4: 23, int2/uint2: 25); the types of ``Cast`` at ``opset`` are those that exist."""
    import onnx

    schema = onnx.defs.get_schema("Cast", opset)
    known = {t for c in schema.type_constraints for t in c.allowed_type_strs}
    used = {v.dtype for v in (*_values(model.graph), *model.graph.outputs) if v.dtype is not None}
    for node in model.graph.all_nodes():
        to = node.attributes.get("to")
        if node.op_type == "Cast" and to is not None:
            used.add(ir.DataType(to.as_int()))
    names = {onnx.TensorProto.DataType.Name(int(d)).lower() for d in used if d != ir.DataType.UNDEFINED}
    return sorted(n for n in names if f"tensor({n})" not in known)


class PReluSlopesPass(ir.passes.InPlacePass):
    """Before converting a model below opset 7 up to ``opset``: a ``PRelu`` slope of ``C`` values for
    an input of 3 or more axes with ``C`` channels becomes ``[C, 1, ..., 1]``.

    PRelu-6 and older apply such a slope per channel (axis 1: what the Caffe2 and PyTorch exports
    of the time mean; onnx.reference finds the axis by its size); PRelu-7 broadcasts it NumPy's way,
    against the last axis. onnx.version_converter's 6 -> 7 adapter keeps the slope as it is, so the
    converted model computes something else or does not run (``[2, 3, 4]`` against ``[3]``). Only a
    constant slope that is not a graph input is reshaped.
    """

    def __init__(self, opset: int) -> None:
        super().__init__()
        self.opset = opset

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        current = model.opset_imports.get("")
        if current is None or current >= 7 or self.opset < 7:
            return ir.passes.PassResult(model, modified=False)
        nodes = [n for n in model.graph if n.op_type == "PRelu" and n.domain in ("", "ai.onnx")]
        count = sum(self._per_channel(model.graph, node) for node in nodes)
        return ir.passes.PassResult(model, modified=count > 0)

    @staticmethod
    def _per_channel(graph: ir.Graph, node: ir.Node) -> bool:
        if len(node.inputs) != 2:
            return False
        x, slope = node.inputs
        if x is None or slope is None or slope.const_value is None or slope.is_graph_input() or x.shape is None:
            return False
        values, rank = slope.const_value.numpy(), x.shape.rank()
        if values.ndim != 1 or values.size == 1 or rank < 3 or x.shape[1] != values.size:
            return False
        name = f"{slope.name}_per_channel"
        shaped = graph.initializers.get(name)  # slopes PReLU nodes share are reshaped once
        if shaped is None:
            shaped = add_initializer(graph, name, values.reshape(values.size, *(1,) * (rank - 2)))
        node.replace_input_with(1, shaped)
        return True


class DropDefaultAttributesPass(ir.passes.InPlacePass):
    """Before converting down to ``opset``: an attribute that the op's version at ``opset`` does not
    have is removed when it holds its default (``Cast``'s ``saturate=1``, which only float8 targets
    read). onnx.version_converter keeps such attributes, and the older op refuses them
    (INVALID_GRAPH); an attribute away from its default (``AveragePool``'s ``dilations``) stays,
    and the conversion is refused."""

    def __init__(self, opset: int) -> None:
        super().__init__()
        self.opset = opset

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        current = model.opset_imports.get("")
        if current is None or current <= self.opset or types_newer_than(model, self.opset):
            return ir.passes.PassResult(model, modified=False)  # no conversion down follows
        count = sum(self._drop(node, current) for node in model.graph.all_nodes()
                    if node.domain in ("", "ai.onnx"))
        return ir.passes.PassResult(model, modified=count > 0)

    def _drop(self, node: ir.Node, current: int) -> int:
        import onnx

        try:
            newer, older = (onnx.defs.get_schema(node.op_type, v) for v in (current, self.opset))
        except onnx.defs.SchemaError:  # no version at the target: expand-newer-ops' business
            return 0
        dropped = 0
        for name in [n for n in node.attributes if n in newer.attributes and n not in older.attributes]:
            default = newer.attributes[name].default_value
            value = ir.serde.serialize_attribute(node.attributes[name])
            if default.type and onnx.helper.get_attribute_value(value) == onnx.helper.get_attribute_value(default):
                del node.attributes[name]
                dropped += 1
        return dropped


def _first_line(exc: BaseException) -> str:
    """The converter's message without its C++ source position and assertion text."""
    lines = str(exc).strip().splitlines()
    line = re.sub(r"^.*(?:Assertion `.*` failed|\.h:\d+: \w+):\s*", "", lines[0] if lines else type(exc).__name__)
    return line[:300]


def symbols(model: ir.Model) -> set[str]:
    """Every symbolic dim name of the graph's inputs and outputs, and ``VALUE:AXIS`` for each unnamed one
    (``?``: ``--dim VALUE:AXIS=SIZE`` sizes it)."""
    ends = (*model.graph.inputs, *model.graph.outputs)
    named = {d.value for v in ends if v.shape is not None for d in v.shape
             if isinstance(d, ir.SymbolicDim) and d.value is not None}
    return named | set(_unnamed(model))


def _unnamed(model: ir.Model) -> dict[str, tuple[ir.Value, int]]:
    """``VALUE:AXIS`` of each unnamed dim of the graph's inputs and outputs."""
    return {f"{v.name}:{axis}": (v, axis) for v in (*model.graph.inputs, *model.graph.outputs) if v.shape is not None
            for axis, d in enumerate(v.shape) if isinstance(d, ir.SymbolicDim) and d.value is None}


def _set_unnamed(model: ir.Model, sizes: Mapping[str, int]) -> int:
    """Each unnamed dim that ``sizes`` names as ``VALUE:AXIS`` becomes its size; the count changed."""
    found = _unnamed(model)
    for key in set(sizes) & set(found):
        value, axis = found[key]
        dims = list(value.shape or ())
        dims[axis] = sizes[key]
        value.shape = ir.Shape(dims)
    return len(set(sizes) & set(found))


def batch_symbol(model: ir.Model) -> str | None:
    """The one symbol at dim 0 of every input whose dim 0 is symbolic; None when there is none
    or when inputs disagree (two symbols: not one batch, nothing is guessed)."""
    found = {str(v.shape[0]) for v in model.graph.inputs if v.shape is not None and v.shape.rank()
             and isinstance(v.shape[0], ir.SymbolicDim) and v.shape[0].value is not None}
    return found.pop() if len(found) == 1 else None


def lone_unknown_batch(model: ir.Model) -> ir.Value | None:
    """The one input with a non-static dim 0 when that dim is unnamed (``?``, or negative: -1); None when
    there is none, it is named, or two inputs have one (their sizes may differ: nothing is guessed)."""
    def loose(dim: Any) -> bool:
        return not isinstance(dim, int) or dim < 0

    found = [v for v in model.graph.inputs if v.shape is not None and v.shape.rank() and loose(v.shape[0])]
    if len(found) != 1 or found[0].shape is None:
        return None
    first = found[0].shape[0]
    return found[0] if isinstance(first, int) or first.value is None else None


def _name_lone_unknown(model: ir.Model, size: int | None) -> bool:
    """:func:`lone_unknown_batch`'s dim 0 is the batch: named ``batch``, or sized ``size``."""
    value = lone_unknown_batch(model)
    if value is None or value.shape is None:
        return False
    value.shape = ir.Shape([BATCH if size is None else size, *list(value.shape)[1:]])
    return True


class NegativeDimsPass(ir.passes.InPlacePass):
    """A negative dim (-1: how some converters wrote "unknown") becomes an unknown dim, in every value.

    ONNX dims are never negative, and shape arithmetic on -1 makes nonsense: a VALID convolution over a
    dim of -1 gives -3 (tract's ``qtdnn`` test case, issue 26).
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        changed = 0
        for value in [*_values(model.graph), *model.graph.outputs]:
            if value.shape is None:
                continue
            dims = [None if isinstance(d, int) and d < 0 else d for d in value.shape]
            if dims != list(value.shape):
                value.shape = ir.Shape(dims)
                changed += 1
        return ir.passes.PassResult(model, modified=changed > 0)


def _set_dims(model: ir.Model, sizes: Mapping[str, int]) -> int:
    """Replace every dim named in ``sizes`` by its size, in every value; the count of values changed."""
    changed = 0
    for value in _values(model.graph):
        if value.shape is None:
            continue
        dims = [sizes.get(d.value, d) if isinstance(d, ir.SymbolicDim) and d.value else d for d in value.shape]
        if dims != list(value.shape):
            value.shape = ir.Shape(dims)
            changed += 1
    return changed


EXPAND_DOMAIN = "portable.expand"


class ExpandNewerOpsPass(ir.passes.InPlacePass):
    """Before converting down to ``opset``: every op newer than it that ONNX defines as a function of
    older ops (``Gelu``-20, ``GroupNormalization``-21...) is replaced by that definition.

    The definition comes from the op's schema (``onnx.defs``: its function body, or the one built
    for this node's attributes and input types); it goes in as a model-local function that
    onnx-ir's InlinePass then inlines. ``onnx.version_converter`` has no adapter that does this:
    an op without a previous version stops it.
    """

    def __init__(self, opset: int) -> None:
        super().__init__()
        self.opset = opset

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        current = model.opset_imports.get("")
        if current is None or current <= self.opset:
            return ir.passes.PassResult(model, modified=False)
        count = 0
        for index, node in enumerate(list(model.graph)):
            body = _definition(node, current, self.opset)
            if body is not None:
                self._use(model, node, body, f"n{index}")
                count += 1
        if count:
            model.opset_imports[EXPAND_DOMAIN] = 1
            from onnx_ir.passes import common

            common.InlinePass()(model)
        return ir.passes.PassResult(model, modified=count > 0)

    def _use(self, model: ir.Model, node: ir.Node, body: ir.Function, overload: str) -> None:
        body.domain, body.overload = EXPAND_DOMAIN, overload
        model.functions[body.identifier()] = body
        node.domain, node.overload = EXPAND_DOMAIN, overload


def _definition(node: ir.Node, current: int, target: int) -> ir.Function | None:
    """The op's ONNX function definition, when the op is newer than ``target`` and has one."""
    import onnx

    if node.domain not in ("", "ai.onnx"):
        return None
    try:  # Any: onnx's stubs lack the function accessors the compiled OpSchema has
        schema: Any = onnx.defs.get_schema(node.op_type, current)
    except onnx.defs.SchemaError:
        return None
    if schema.since_version <= target:
        return None
    if schema.has_function:
        data = schema.get_function_with_opset_version(schema.since_version)
    elif schema.has_context_dependent_function and all(v is not None and v.type is not None for v in node.inputs):
        proto = ir.to_proto(node)
        types = [ir.serde.serialize_type(v.type).SerializeToString() for v in node.inputs if v and v.type]
        data = schema.get_context_dependent_function_with_opset_version(schema.since_version,
                                                                         proto.SerializeToString(), types)
    else:
        return None
    function = onnx.FunctionProto()
    function.ParseFromString(data)
    return ir.serde.deserialize_function(function) if function.node else None


class RaiseIRVersionPass(ir.passes.InPlacePass):
    """The model's IR version raised to at least ``minimum`` (4: initializers need not be graph inputs)."""

    def __init__(self, minimum: int) -> None:
        super().__init__()
        self.minimum = minimum

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.ir_version >= self.minimum:
            return ir.passes.PassResult(model, modified=False)
        model.ir_version = self.minimum
        return ir.passes.PassResult(model, modified=True)


class FixDimsPass(ir.passes.InPlacePass):
    """``--dim NAME=SIZE``: the named symbols become integers wherever they appear."""

    def __init__(self, sizes: Mapping[str, int]) -> None:
        super().__init__()
        self.sizes = dict(sizes)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        unknown = sorted(set(self.sizes) - symbols(model))
        if unknown:
            known = ", ".join(sorted(symbols(model))) or "none"
            raise RemedyRefused(f"--dim {', '.join(unknown)}: no such symbolic dim in the graph's inputs or "
                                f"outputs (symbols: {known})")
        unnamed = _set_unnamed(model, self.sizes)
        return ir.passes.PassResult(model, modified=_set_dims(model, self.sizes) + unnamed > 0)


class FixBatchPass(ir.passes.InPlacePass):
    """The batch symbol (dim 0 of the inputs) becomes ``batch`` (dynamic) or the integer ``size``.

    Only a symbol shared by every input with a symbolic dim 0 counts as the batch; a model
    whose inputs have a fixed dim 0 keeps it (making it dynamic could break constant shapes).
    """

    def __init__(self, size: int | None) -> None:
        super().__init__()
        self.size = size

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        symbol = batch_symbol(model)
        if symbol is None:
            return ir.passes.PassResult(model, modified=_name_lone_unknown(model, self.size))
        if self.size is not None:
            return ir.passes.PassResult(model, modified=_set_dims(model, {symbol: self.size}) > 0)
        if symbol == BATCH:
            return ir.passes.PassResult(model, modified=False)
        return RenameSymbolPass(symbol, BATCH).call(model)


class StaticDimsPass(ir.passes.InPlacePass):
    """``Gather(Shape(x), k)`` with a constant scalar ``k`` at a static dim of ``x`` becomes that dim.

    onnxscript's folder reads a ``Shape``'s static dims through a ``Gather`` of 1-D indices (``[k]``) only;
    torch.onnx writes ``x.size(k)`` as a ``Gather`` of a scalar, which then stays a run-time computation
    although the dim is fixed (optimum's BERT exports: the position ids ``Slice(position_ids, 0,
    Unsqueeze(Gather(Shape(input_ids), 1)))``, which ``--dim sequence_length=128`` fixes). Folded here, the
    folder that runs next goes on through it. Dim 0 of a dynamic batch is a symbol: it stays.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            dim = _static_dim(node)
            if dim is not None:
                value = add_initializer(model.graph, node.outputs[0].name or f"{node.name}_dim", np.array(dim, np.int64))
                ir.convenience.replace_all_uses_with(node.outputs[0], value)
                modified = True
        return ir.passes.PassResult(model, modified)


def static_dim_reads(model: ir.Model) -> list[tuple[str, int, int]]:
    """What :class:`StaticDimsPass` folds in ``model``: (the value whose shape is read, the axis, its size)."""
    found = []
    for node in model.graph:
        read = _static_read(node)
        if read is not None:
            found.append(read)
    return found


def _static_dim(node: ir.Node) -> int | None:
    read = _static_read(node)
    return read[2] if read is not None else None


def _static_read(node: ir.Node) -> tuple[str, int, int] | None:
    """The value, axis and size a ``Gather(Shape(x), k)`` of a scalar constant ``k`` reads, when ``x`` has that
    dim static; else None."""
    if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
        return None
    shape, index = node.inputs
    source = shape.producer() if shape is not None else None
    k = ir.convenience.get_const_tensor(index) if index is not None else None
    if source is None or source.op_type != "Shape" or source.domain not in ("", "ai.onnx") or k is None:
        return None
    data = source.inputs[0]
    if data is None or data.shape is None or k.numpy().ndim != 0 or node.attributes.get_int("axis", 0) != 0:
        return None
    dims = list(data.shape)
    start, end = source.attributes.get_int("start", 0), source.attributes.get_int("end", len(dims))
    axes = list(range(len(dims)))[start:end]
    at = int(k.numpy())
    axis = axes[at] if -len(axes) <= at < len(axes) else None
    size = dims[axis] if axis is not None else None
    if axis is None or not isinstance(size, int) or node.outputs[0].is_graph_output():
        return None
    return data.name or "?", axis, size


class ConstantOfShapePass(ir.passes.InPlacePass):
    """A ``ConstantOfShape`` of a constant shape, with at most ``SMALL_TENSOR`` elements, becomes its value.

    onnxscript's constant folder keeps every ``ConstantOfShape`` (its ``DEFAULT_CONSTANT_FOLD_BLACKLIST``: a
    large one would grow the file), and so everything it feeds stays a run-time computation, even with the batch
    fixed. torch.onnx's ``expand`` writes one into every size it expands to (``Where(Equal(size,
    ConstantOfShape([4]) * -1), ..., size)``: optimum's BERT exports, the attention mask's ``Expand``), which then
    reads to the shape analysis as more than the batch (PORT007) and to the probes as unknown. A small one costs
    the file nothing: folded here, the folder and the probes go on through it.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            array = _constant_of_shape(node)
            if array is not None:
                value = add_initializer(model.graph, node.outputs[0].name or f"{node.name}_value", array)
                ir.convenience.replace_all_uses_with(node.outputs[0], value)
                if node.outputs[0].is_graph_output():
                    continue  # the graph's own output keeps its node (a renamed output would change the file's API)
                model.graph.remove(node, safe=True)
                modified = True
        return ir.passes.PassResult(model, modified)


def _constant_of_shape(node: ir.Node) -> np.ndarray | None:
    """The value of a default-domain ``ConstantOfShape`` of a constant shape with few elements, else None."""
    if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx") or not node.inputs:
        return None
    shape = ir.convenience.get_const_tensor(node.inputs[0]) if node.inputs[0] is not None else None  # a Constant's too
    if shape is None:
        return None
    dims = [int(d) for d in shape.numpy().ravel()]
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.int64)) > SMALL_TENSOR:
        return None
    fill = node.attributes.get("value")
    one = fill.as_tensor().numpy().ravel() if fill is not None else np.zeros(1, np.float32)
    return np.full(dims, one[0], dtype=one.dtype)


class ExpandBatchShapesPass(_ProbedPass):
    """An ``Expand`` whose size differs between the probe batches only where its input already has that dim
    expands to a constant with 1 there.

    ``Expand`` broadcasts: the mask ``[batch, 1, 1, 128]`` expanded to ``[1, 1, 128, 128]`` is the ``[batch, 1,
    128, 128]`` that the size computed from the mask's own ``Shape`` gave (optimum's BERT exports; HF's
    ``_expand_mask``). So the batch-only computation goes, and the ``Expand`` is static. Checked at every probe
    batch: the input's dims broadcast with the constant give the output's dims. An ``Expand`` of a token to the
    batch (the input's dim is 1 where the size has the batch) is left: it is a batch-only computation.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not _run_time_expands(model):  # nothing to do: no probe (three shape analyses) is paid for
            return ir.passes.PassResult(model, False)
        return super().call(model)

    def apply(self, model: ir.Model, found: Sequence[Probe]) -> bool:
        modified = False
        for node in _run_time_expands(model):
            shape = _broadcast_size(node, found)
            if shape is not None:
                _replace_input(model.graph, node, 1, shape)
                modified = True
        return modified


def _run_time_expands(model: ir.Model) -> list[ir.Node]:
    """The default-domain ``Expand`` nodes whose size is computed at run time."""
    return [n for n in model.graph if n.op_type == "Expand" and n.domain in ("", "ai.onnx") and len(n.inputs) > 1
            and n.inputs[1] is not None and n.inputs[1].const_value is None]


def _broadcast_size(node: ir.Node, found: Sequence[Probe]) -> np.ndarray | None:
    """The constant size valid at every probe (see :class:`ExpandBatchShapesPass`), or None."""
    sizes = [p.values.get((node.name or "", 1)) for p in found]
    source = node.inputs[0]
    data = [_ints(p.dims.get(source.name or "")) if source is not None else None for p in found]
    outs = [_ints(p.dims.get(node.outputs[0].name or "")) for p in found]
    if not found or any(v is None for v in (*sizes, *data, *outs)):
        return None
    constant = []
    for i, values in enumerate(zip(*(np.asarray(s).tolist() for s in sizes))):
        axis = i - (len(sizes[0]) - len(data[0]))  # type: ignore[arg-type]  # checked above: none is None
        if len(set(values)) == 1:
            constant.append(values[0])
        elif axis >= 0 and all(d[axis] == v for d, v in zip(data, values)):  # type: ignore[index]
            constant.append(1)
        else:
            return None
    shape = np.array(constant, dtype=np.int64)
    fits = all(tuple(np.broadcast_shapes(tuple(d), tuple(constant))) == tuple(o)  # type: ignore[arg-type]
               for d, o in zip(data, outs))
    return shape if fits else None


class InternalizeDataPass(ir.passes.InPlacePass):
    """Weights kept in external files are read into the model, under ``validate``'s rules for hostile input.

    A location must be relative, without ``..``, resolve (links followed) inside ``folder``,
    name a regular file (no FIFO or device: a read must end), and its ``offset + length``
    lie inside that file; the bytes read in all are refused above ``limit``, before any read.
    onnx-ir's ExternalTensor checks containment too; the checks here come first because it
    does not refuse FIFOs and does not bound the total size.
    """

    def __init__(self, folder: Path, limit: int) -> None:
        super().__init__()
        self.folder = folder
        self.limit = limit

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        found = list(_external(model))
        sizes = [self._checked(t) for _, t in found]
        total = sum(sizes)
        if total > self.limit:
            raise RemedyRefused(f"external data is {total:,} bytes: inline, the model would pass the size limit "
                                f"of {self.limit:,} bytes (max-size, at most protobuf's 2 GiB); nothing was read")
        for value, tensor in found:
            value.const_value = self._read(tensor)
        return ir.passes.PassResult(model, modified=bool(found))

    def _checked(self, tensor: ir.ExternalTensor) -> int:
        """The tensor's byte count once its file is known safe to read; refused otherwise."""
        location = str(tensor.location)
        where = f"tensor '{tensor.name}': external data '{location}'"
        if os.path.isabs(location) or ".." in Path(location).parts:
            raise RemedyRefused(f"{where} is not a plain relative path inside the model's folder: not read")
        path = self.folder / location
        real, base = os.path.realpath(path), os.path.realpath(self.folder)
        if os.path.commonpath([real, base]) != base:
            raise RemedyRefused(f"{where} links outside the model's folder (to {real}): not read")
        try:
            info = os.stat(real)
        except OSError as exc:
            raise RemedyRefused(f"{where} cannot be read: {exc.strerror or exc}") from None
        if not stat.S_ISREG(info.st_mode):
            raise RemedyRefused(f"{where} is not a regular file (a FIFO, device or folder): not read")
        offset, length = tensor.offset or 0, tensor.length if tensor.length is not None else tensor.nbytes
        if offset + length > info.st_size or length < tensor.nbytes:
            raise RemedyRefused(f"{where}: bytes {offset}..{offset + length} do not hold the tensor's "
                                f"{tensor.nbytes:,} bytes (the file has {info.st_size:,})")
        return int(tensor.nbytes)

    def _read(self, tensor: ir.ExternalTensor) -> ir.Tensor:
        safe = ir.ExternalTensor(tensor.location, tensor.offset, tensor.length, tensor.dtype, shape=tensor.shape,
                                 name=tensor.name, base_dir=self.folder)
        try:
            return ir.Tensor(safe.numpy().copy(), dtype=tensor.dtype, name=tensor.name)
        finally:
            safe.release()


def external_bytes(model: ir.Model) -> int:
    """Bytes the model keeps in external files (initializers and Constant attributes)."""
    return sum(int(t.nbytes) for _, t in _external(model))


def _external(model: ir.Model) -> Iterator[tuple[ir.Value, ir.ExternalTensor]]:
    for value in model.graph.initializers.values():
        if isinstance(value.const_value, ir.ExternalTensor):
            yield value, value.const_value
    for node in model.graph.all_nodes():
        attr = node.attributes.get("value")
        if node.op_type == "Constant" and attr is not None and isinstance(attr.value, ir.ExternalTensor):
            raise RemedyRefused(f"node '{node.name}': a Constant keeps its value in external data "
                                f"'{attr.value.location}'; move it to an initializer first")


def _values(graph: ir.Graph) -> Iterator[ir.Value]:
    yield from graph.inputs
    yield from graph.initializers.values()
    for node in graph.all_nodes():
        yield from node.outputs


# op -> the inputs that take int32 as well as int64 in the op's schema at opset 18 (tensor(int32), tensor(int64)).
# Reshape's shape, Expand's shape, Tile's repeats, Unsqueeze's axes, Pad's pads, TopK's K and Resize's sizes
# are int64 only: those shape tensors stay int64 (an int32 one would not validate).
INDEX_SLOTS: dict[str, tuple[int, ...]] = {"Gather": (1,), "GatherElements": (1,), "ScatterElements": (1,),
                                           "Slice": (1, 2, 3, 4), "OneHot": (0,)}
# ops whose output 0 holds the elements of their input 0, moved or repeated, none computed (any tensor type T):
# int32 indices stay the same indices through them. Only input 0: their shape and axes inputs stay int64.
PASS_THROUGH: frozenset[str] = frozenset({"Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Expand"})
# the element types whose every value is an int32 value: a Cast from one of them to int64 holds only int32 values
FITS_INT32: frozenset[ir.DataType] = frozenset({ir.DataType.BOOL, ir.DataType.INT8, ir.DataType.UINT8, ir.DataType.INT16,
                                               ir.DataType.UINT16, ir.DataType.INT32})
_INT32 = np.iinfo(np.int32)


class Int32IndicesPass(ir.passes.InPlacePass):
    """int64 indices to int32 where every value provably fits, for targets that want int32 (NNAPI's table:
    Gather's "Input indices should be constant if not int32 type"; WebNN, whose backend decides the types per
    device and has no fallback: ``repair.remedies.INT32_TARGETS``).

    Two kinds of int64 value are narrowed, each only where every use is an index slot of :data:`INDEX_SLOTS`,
    directly or through ops of :data:`PASS_THROUGH` (whose outputs then become int32 too), and never a graph
    output or input (the model's interface):

    - a constant (an initializer: the earlier remedies folded the rest) whose values all fit int32;
    - a ``Cast`` to int64 from a type of :data:`FITS_INT32` (input ids cast up for a ``Gather``): every value it
      makes is an int32 value, so it casts to int32 instead, or goes when its input is int32 already.

    A Slice is converted whole (its starts, ends, axes and steps share one type) or not at all. A Slice's
    constant starts and ends beyond int32 (``INT64_MAX``: "to the end") are clamped to int32's range, which
    Slice clamps to the axis anyway (axes of 2**31 elements or more are not portable: < 2 GiB). Any other
    constant outside int32 is left int64, and :meth:`unfit` names it (the remedy's detail); when nothing else
    converts, the remedy is refused with those names. Values computed at run time (``Shape``, arithmetic, a
    Cast from a float or a 64-bit type) are not provably in int32's range: they stay.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        chosen, unfit = _narrowing(model.graph)
        if unfit and not chosen:  # nothing to convert: the report then names what keeps the model int64
            raise RemedyRefused(f"int64 indices do not fit in int32: {', '.join(unfit[:5])}")
        for root, (array, reached) in chosen.items():
            _narrow(model.graph, root, array)
            for value in reached:
                value.dtype = ir.DataType.INT32
        return ir.passes.PassResult(model, modified=bool(chosen))

    @staticmethod
    def unfit(model: ir.Model) -> list[str]:
        """The constants in index slots whose values do not fit int32, named with their first user."""
        return _narrowing(model.graph)[1]

    @staticmethod
    def narrowed(model: ir.Model) -> list[str]:
        """What the pass converts in ``model``: each constant and Cast, with its first user."""
        return [f"{_what(root, array)} ({_user(root)})" for root, (array, _) in _narrowing(model.graph)[0].items()]


_Chosen = dict[ir.Value, tuple[np.ndarray | None, list[ir.Value]]]  # root -> (its int32 array, None for a Cast; values reached)


def _narrowing(graph: ir.Graph) -> tuple[_Chosen, list[str]]:
    """The values to narrow (constants with their int32 arrays, Cast outputs with None; each with the pass-through
    values it reaches) and the constants that do not fit."""
    chosen: _Chosen = {}
    unfit: list[str] = []
    for root, array, fits in _roots(graph):
        reached = _reach(root)
        if reached is None:
            continue
        if not fits:
            unfit.append(f"'{root.name}' (used by {_user(root)})")
        else:
            chosen[root] = (array, reached)
    return _whole_slices(chosen), sorted(unfit)


def _roots(graph: ir.Graph) -> Iterator[tuple[ir.Value, np.ndarray | None, bool]]:
    """int64 constants (with their values as int32 takes them, and whether they fit) and Cast-to-int64 outputs."""
    for value in graph.initializers.values():
        if value.dtype == ir.DataType.INT64 and value.const_value is not None and not value.is_graph_input():
            slices = all(u.node.op_type == "Slice" and u.idx in (1, 2) for u in value.uses())
            array = _narrowed(value.const_value.numpy(), slices)
            yield value, array, array is not None
    for node in graph.all_nodes():
        if _widening_cast(node):
            yield node.outputs[0], None, True


def _widening_cast(node: ir.Node) -> bool:
    """A Cast to int64 from a type whose every value int32 holds."""
    if node.op_type != "Cast" or node.domain not in ("", "ai.onnx") or not node.inputs or node.inputs[0] is None:
        return False
    to = node.attributes.get("to")
    return to is not None and to.as_int() == ir.DataType.INT64 and node.inputs[0].dtype in FITS_INT32


def _reach(value: ir.Value) -> list[ir.Value] | None:
    """The pass-through values ``value`` flows into when every use is an index slot or a pass-through op's input 0
    (recursively); None when one is not, or when it (or one it reaches) is a graph output."""
    uses = list(value.uses())
    if not uses or value.is_graph_output():
        return None
    reached: list[ir.Value] = []
    for usage in uses:
        node = usage.node
        if node.domain not in ("", "ai.onnx"):
            return None
        if usage.idx in INDEX_SLOTS.get(node.op_type, ()):
            continue
        if node.op_type not in PASS_THROUGH or usage.idx != 0:
            return None
        further = _reach(node.outputs[0])
        if further is None:
            return None
        reached += [node.outputs[0], *further]
    return reached


def _narrow(graph: ir.Graph, root: ir.Value, array: np.ndarray | None) -> None:
    """One root to int32: a constant by an int32 copy, a Cast by casting to int32 (or going, from int32)."""
    if array is not None:
        narrow = add_initializer(graph, f"{root.name}_int32", array.astype(np.int32))
        for usage in list(root.uses()):
            usage.node.replace_input_with(usage.idx, narrow)
        if not root.uses() and not root.is_graph_output() and root.name in graph.initializers:
            graph.initializers.pop(str(root.name))
        return
    cast = root.producer()
    assert cast is not None
    source = cast.inputs[0]
    assert source is not None
    if source.dtype == ir.DataType.INT32:  # int32 -> int64 -> int32 indices: the Cast goes
        root.replace_all_uses_with(source)
        assert cast.graph is not None
        cast.graph.remove(cast, safe=True)
        return
    cast.attributes["to"] = ir.AttrInt64("to", ir.DataType.INT32)
    root.dtype = ir.DataType.INT32


def _what(root: ir.Value, array: np.ndarray | None) -> str:
    """``'idx'`` for a constant; ``Cast 'c' from int32 removed`` or ``Cast 'c' from uint8 now to int32``."""
    cast = root.producer()
    if array is not None or cast is None or cast.inputs[0] is None or cast.inputs[0].dtype is None:
        return f"'{root.name}'"
    source = cast.inputs[0].dtype
    done = "removed" if source == ir.DataType.INT32 else "now to int32"
    return f"Cast '{cast.name}' from {source.name.lower()} {done}"


def _user(value: ir.Value) -> str:
    """The first node that takes ``value`` as indices, through pass-through ops: ``Gather 'g'``."""
    for usage in value.uses():
        node = usage.node
        if usage.idx in INDEX_SLOTS.get(node.op_type, ()):
            return f"{node.op_type} '{node.name}'"
    usage = next(iter(value.uses()))
    return _user(usage.node.outputs[0]) if usage.node.op_type in PASS_THROUGH else f"{usage.node.op_type} '{usage.node.name}'"


def _narrowed(values: np.ndarray, clamp: bool) -> np.ndarray | None:
    """``values`` as they go into int32 (Slice starts/ends clamped), None when a value does not fit."""
    if clamp:
        return np.clip(values, _INT32.min, _INT32.max)
    if values.size and (values.min() < _INT32.min or values.max() > _INT32.max):
        return None
    return values


def _whole_slices(chosen: _Chosen) -> _Chosen:
    """``chosen`` without the roots that reach a Slice whose other index inputs stay int64 (one Tind per Slice)."""
    changed = True
    while changed:
        changed = False
        narrowed = {v for root, (_, reached) in chosen.items() for v in (root, *reached)}
        for root, (_, reached) in list(chosen.items()):
            ends = [root, *reached]
            slices = [u.node for v in ends for u in v.uses() if u.node.op_type == "Slice" and u.idx in (1, 2, 3, 4)]
            if any(v is not None and v not in narrowed for s in slices for v in s.inputs[1:5]):
                chosen.pop(root)
                changed = True
                break
    return chosen
