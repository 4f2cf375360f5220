"""Walking every graph of a model: the main graph, control-flow bodies and function bodies."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import onnx

from portable.findings import Location, SourceLocation
from portable.frames import frames_of, innermost_user_frame

__all__ = ["GraphScope", "iter_scopes", "node_label", "source_of"]

Body = onnx.GraphProto | onnx.FunctionProto


@dataclass(frozen=True)
class GraphScope:
    """One graph (or function body) and its path, such as ``main/If_3.then_branch``."""

    path: str
    body: Body
    is_function: bool = False


def node_label(node: onnx.NodeProto, index: int) -> str:
    """The node's name, or for an unnamed node a stand-in that says so and cannot be taken for a name in
    the file: ``<unnamed If #3>`` (its op and index in its graph; the scope path places nested ones)."""
    return node.name or f"<unnamed {node.op_type} #{index}>"


def _subgraphs(scope: GraphScope) -> Iterator[GraphScope]:
    for index, node in enumerate(scope.body.node):
        for attr in node.attribute:
            graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for k, graph in enumerate(graphs):
                suffix = attr.name if len(graphs) == 1 else f"{attr.name}[{k}]"
                yield GraphScope(f"{scope.path}/{node_label(node, index)}.{suffix}", graph, scope.is_function)


def iter_scopes(model: onnx.ModelProto) -> Iterator[GraphScope]:
    """Every graph in the model, outermost first. Iterative: a 1,000-deep nesting cannot overflow."""
    roots = [GraphScope("main", model.graph)]
    roots += [GraphScope(f"function:{f.domain}.{f.name}", f, True) for f in model.functions]
    stack = list(reversed(roots))
    while stack:
        scope = stack.pop()
        yield scope
        stack.extend(reversed(list(_subgraphs(scope))))


def _props(node: onnx.NodeProto) -> dict[str, str]:
    return {p.key: p.value for p in node.metadata_props}


def source_of(node: onnx.NodeProto) -> SourceLocation | None:
    """The user's source line for a node, from the torch exporter's metadata (if any)."""
    props = _props(node)
    trace = props.get("pkg.torch.onnx.stack_trace")
    if not trace:
        return None
    frame = innermost_user_frame(frames_of(trace))
    if frame is None:
        return None
    return SourceLocation(file=frame.file, line=frame.line, module=_module_of(props))


def _module_of(props: dict[str, str]) -> str | None:
    scopes = props.get("pkg.torch.onnx.name_scopes")
    if not scopes:
        return None
    names = [s.strip().strip("'\"") for s in scopes.strip("[]").split(",")]
    modules = [n for n in names[:-1] if n]
    return modules[-1] if modules else None


def location(scope: GraphScope, node: onnx.NodeProto, index: int, value: str | None = None) -> Location:
    return Location(
        graph=scope.path,
        node=node_label(node, index),
        op_type=node.op_type if not node.domain else f"{node.domain}::{node.op_type}",
        value=value,
        source=source_of(node),
    )
