"""The model as the rules see it: loaded once, walked once, shared by every rule."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

import onnx

from portable.findings import Location
from portable.policy import Policy
from portable.validators.graphs import GraphScope, iter_scopes, location
from portable.validators.lean import LeanModel

__all__ = ["INITIALIZERS_OVERRIDABLE_FROM_IR", "RANDOM_OPS", "ModelContext"]

INITIALIZERS_OVERRIDABLE_FROM_IR = 4  # before it, an initializer listed as an input is still a constant

RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}
)


class ModelContext:
    """One model plus the facts several rules need, each computed at most once."""

    def __init__(self, proto: onnx.ModelProto, path: str, policy: Policy, size: int | None = None,
                 lean: LeanModel | None = None) -> None:
        """``lean``: the lean parse ``proto`` is (its large payloads held there, not in ``proto``)."""
        if lean is not None and lean.proto is not proto:
            raise ValueError("ModelContext: the lean model is not the parse of this proto")
        self.lean = lean
        self.proto = proto
        self.path = path
        self.policy = policy
        self.size = size

    def stripped(self, scope: GraphScope, index: int) -> bool:
        """Whether the payload of initializer ``index`` of ``scope`` is held outside :attr:`proto`
        (its ``raw_data`` absent there; :attr:`lean` has it)."""
        if self.lean is None or scope.path != "main" or scope.is_function:
            return False
        return index in self.lean.stripped

    def source(self) -> str | bytes:
        """The whole model for a library that parses it itself (onnxruntime): the file (or bytes) it was
        lean-parsed from, so no copy of its weights is made here, else serialized bytes."""
        return self.lean.source() if self.lean is not None else self.proto.SerializeToString()

    @cached_property
    def scopes(self) -> tuple[GraphScope, ...]:
        return tuple(iter_scopes(self.proto))

    def nodes(self) -> Iterator[tuple[GraphScope, int, onnx.NodeProto]]:
        for scope in self.scopes:
            for index, node in enumerate(scope.body.node):
                yield scope, index, node

    def location(self, scope: GraphScope, index: int, node: onnx.NodeProto, value: str | None = None) -> Location:
        return location(scope, node, index, value)

    def opset(self, domain: str = "") -> int | None:
        for entry in self.proto.opset_import:
            if entry.domain in (domain, "ai.onnx" if domain == "" else domain):
                return entry.version
        return None

    @cached_property
    def constants(self) -> frozenset[str]:
        """Values known without running the model: initializers, ``Constant`` outputs, and
        deterministic nodes fed by nothing else. ``Shape`` of a runtime tensor is not one.

        From IR 4 an initializer also listed in ``graph.input`` is a default the caller may
        override, so it is not a constant. Before IR 4 every initializer had to be listed
        there and runtimes hold it constant (onnxruntime: ``Graph::CanOverrideInitializer``
        is ``ir_version >= 4``)."""
        known: set[str] = set()
        overridable = self.proto.ir_version >= INITIALIZERS_OVERRIDABLE_FROM_IR
        for scope in self.scopes:
            body = scope.body
            if isinstance(body, onnx.GraphProto):
                inputs = {v.name for v in body.input} if overridable else set()
                known.update(t.name for t in body.initializer if t.name not in inputs)
                known.update(t.values.name for t in body.sparse_initializer)
            for node in body.node:
                if self._is_static(node, known):
                    known.update(o for o in node.output if o)
        return frozenset(known)

    @staticmethod
    def _is_static(node: onnx.NodeProto, known: set[str]) -> bool:
        if node.domain not in ("", "ai.onnx") or node.op_type in RANDOM_OPS:
            return False
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            return False
        return all(i in known for i in node.input if i)

    @cached_property
    def batch_symbols(self) -> tuple[str, ...]:
        """The symbolic names at dim 0 of the main graph's inputs and outputs, sorted."""
        symbols = set()
        for value in (*self.proto.graph.input, *self.proto.graph.output):
            dims = value.type.tensor_type.shape.dim
            if value.type.HasField("tensor_type") and len(dims) > 0 and dims[0].HasField("dim_param"):
                symbols.add(dims[0].dim_param)
        return tuple(sorted(symbols))

    @cached_property
    def targets(self):  # -> TargetChecks; imported lazily: only a run with targets pays for it
        """The offline check against each target the policy names (PORT201+ and the report's summary)."""
        from portable.validators.targets.check import TargetChecks

        return TargetChecks(self)

    @cached_property
    def shapes(self):  # -> ShapeAnalysis; imported lazily: shape work is only paid for when needed
        from portable.validators.shapes import ShapeAnalysis

        return ShapeAnalysis.of(self)

