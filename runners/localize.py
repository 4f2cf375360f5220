"""Localizing a parity failure: the first ONNX node whose output diverges from PyTorch.

ONNX side: every named intermediate value of the graph becomes a graph output and one
ONNX Runtime CPU session (graph optimizations off, so nodes run as written) computes them.
PyTorch side: the module is exported again with the same exporter (``torch.onnx.export``,
dynamo) to get the ``ExportedProgram`` the ONNX graph was translated from, and an FX
interpreter records every ``call_function`` result by node name.

Matching the two: each ONNX node torch made carries ``pkg.torch.onnx.fx_node`` (the FX node it was
translated from, with ``name_scopes`` / ``stack_trace``: the PyTorch op and the user's source line), so
the value an FX node computed is the output of the *last* ONNX node made from it whose shape is the FX
value's. That survives renaming: ``portable export`` gives values canonical names, which are no longer
the FX names ``torch.onnx.verification`` matches by. A node without that metadata (a file from another
exporter) is matched by its output's name, as before. The report says how many FX values were compared
of how many the graph's nodes name: a localization over few of them can land after the true divergence.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import one_line
from portable.frames import frames_of, innermost_user_frame
from portable.runners.comparator import ErrorStats, compare_arrays
from portable.runners.report import Localization
from portable.runners.sessions import SessionSpec, session_from_onnx
from portable.runners.tolerances import ToleranceTable

__all__ = ["localize_divergence", "source_line"]



def source_line(stack_trace: str | None) -> str | None:
    """``file.py:LINE: code`` of the innermost user frame in an exporter stack trace."""
    frame = innermost_user_frame(frames_of(stack_trace or ""))
    if frame is None:
        return None
    return f"{frame.file}:{frame.line}: {frame.code or ''}".rstrip(": ")


def _torch_values(module: Any, feeds: Mapping[str, np.ndarray], wanted: set[str], device: str,
                  symbolic: list[list[int]]) -> dict[str, np.ndarray]:
    import torch

    args = tuple(torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in feeds.values())
    shapes = tuple({axis: torch.export.Dim.AUTO for axis in axes} for axes in symbolic)
    with contextlib.redirect_stdout(io.StringIO()):
        program = torch.onnx.export(module, args, dynamo=True, opset_version=18, external_data=False,
                                    dynamic_shapes=shapes, optimize=False, verbose=False)
    values: dict[str, np.ndarray] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            result = super().run_node(n)
            if n.op == "call_function" and n.name in wanted and isinstance(result, torch.Tensor):
                values[n.name] = result.detach().float().cpu().numpy() if result.is_floating_point() \
                    else result.detach().cpu().numpy()
            return result

    assert program is not None and program.exported_program is not None
    with torch.no_grad():
        Recorder(program.exported_program.module()).run(*args)
    return values


def _onnx_values(model_path: Path, feeds: Mapping[str, np.ndarray], wanted: set[str]) -> dict[str, np.ndarray]:
    import onnx_ir as ir

    model = ir.load(str(model_path))
    present = {v.name for v in model.graph.outputs}
    for node in model.graph:
        for value in node.outputs:
            if value.name in wanted and value.name not in present and value.type is not None:
                model.graph.outputs.append(value)
                present.add(value.name)
    session = session_from_onnx(ir.to_proto(model).SerializeToString(), SessionSpec(optimize=False),
                                what="the model with its intermediate values as outputs")
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds))))


_FX_NAME = re.compile(r"^%(\w+)")


def fx_name(meta: Mapping[str, str]) -> str | None:
    """The FX node an ONNX node was translated from (``%add_17 : ... = call_function[...]`` -> ``add_17``)."""
    match = _FX_NAME.match(meta.get("pkg.torch.onnx.fx_node", ""))
    return match.group(1) if match else None


def _symbolic_axes(model_path: Path) -> tuple[list[list[int]], list[tuple[Any, ...]]]:
    import onnx

    proto = onnx.load(str(model_path), load_external_data=False)
    inits = {i.name for i in proto.graph.initializer}
    nodes = [(n.name, n.op_type, tuple(n.output), {p.key: p.value for p in n.metadata_props}) for n in proto.graph.node]
    axes = [[i for i, d in enumerate(v.type.tensor_type.shape.dim) if not d.HasField("dim_value")]
            for v in proto.graph.input if v.name not in inits]
    return axes, nodes


def _matches(nodes: list[tuple[Any, ...]]) -> dict[int, str]:
    """Node index -> the FX value its outputs hold: the last node made from each FX node; a node without
    the exporter's metadata under its first output's name."""
    last: dict[str, int] = {}
    for index, (_, _, outputs, meta) in enumerate(nodes):
        name = fx_name(meta) or (outputs[0] if outputs else None)
        if name:
            last[name] = index
    return {index: name for name, index in last.items()}


def _found(node: tuple[Any, ...], value: str, stats: ErrorStats, compared: int, candidates: int) -> Localization:
    name, op_type, _, meta = node
    fx = meta.get("pkg.torch.onnx.fx_node", "")
    target = re.search(r"target=([^\]]+)\]", fx)
    scopes = meta.get("pkg.torch.onnx.name_scopes")
    return Localization(compared=compared, node=name, op_type=op_type, value=value,
                        fx_node=target.group(1) if target else (fx.split(" ")[0] or None),
                        name_scope=scopes, source=source_line(meta.get("pkg.torch.onnx.stack_trace")),
                        max_abs=stats.max_abs, beyond=stats.beyond, candidates=candidates)


def localize_divergence(model_path: str | Path, module: Any, feeds: Mapping[str, np.ndarray],
                        tolerances: ToleranceTable, device: str = "cpu") -> Localization:
    """Walk the ONNX nodes in graph order; return the first whose value is out of tolerance."""
    path = Path(model_path)
    axes, nodes = _symbolic_axes(path)
    matches = _matches(nodes)
    outputs = {value for index in matches for value in nodes[index][2] if value}
    try:
        theirs = _torch_values(module, feeds, set(matches.values()), device, axes)
        ours = _onnx_values(path, feeds, outputs)
    except Exception as exc:  # noqa: BLE001 - re-export or interpretation failed: say so in the report
        return Localization(compared=0, error=one_line(exc))
    compared = 0
    for index, node in enumerate(nodes):
        expected = theirs.get(matches.get(index, ""))
        value = next((v for v in node[2] if v in ours and expected is not None and ours[v].shape == expected.shape), None)
        if value is None or expected is None:
            continue
        compared += 1
        stats = compare_arrays(ours[value], expected, tolerances.for_output(value, str(expected.dtype)))
        if not stats.passed:
            return _found(node, value, stats, compared, len(matches))
    return Localization(compared=compared, candidates=len(matches))
