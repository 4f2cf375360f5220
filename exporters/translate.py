"""The second phase: torch.onnx's translation of the captured program, and its failures as findings."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import InternalError
from portable.exporters.capture import CaptureFailed, failure_findings
from portable.exporters.failures import debug_text

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["output_names", "translate_program"]


def translate_program(program: Any, module: Any, args: tuple[Any, ...], root: Path, opset: int,
                      names: Sequence[str] | None = None) -> ir.Model:
    """``torch.onnx.export`` of a captured program at ``opset``: inline weights, no optimization (portable's
    passes follow), outputs named after a dict result's keys.

    A failure here (decomposition, an op torch cannot translate) is the model's: bare
    ``torch.onnx.export`` fails the same way. It becomes :class:`CaptureFailed` with the finding
    at the model's line; what torch printed is kept for ``--debug``.
    """
    import torch

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            onnx_program = torch.onnx.export(program, args, dynamo=True, opset_version=opset, external_data=False,
                                             optimize=False, verbose=False, input_names=list(names) if names else None,
                                             output_names=output_names(program))
    except Exception as exc:  # noqa: BLE001 - every torch.onnx failure is reported as a finding
        findings = failure_findings(exc, module, args, root, names, "torch.onnx", printed.getvalue())
        raise CaptureFailed(findings, debug_text(exc, printed.getvalue())) from None
    if onnx_program is None:  # torch.onnx's Optional return; not with a program given
        raise InternalError("torch.onnx.export returned no program")
    return onnx_program.model


def output_names(program: Any) -> list[str] | None:
    """Graph outputs named after the keys of a dict (or transformers ``ModelOutput``) result, joined by
    ``_`` along nested keys (``logits``, ``last_hidden_state``, ``boxes_0``); None (torch's names) for a
    tensor or a plain tuple, or when the keys do not map one to one onto the outputs."""
    spec = getattr(getattr(program, "call_spec", None), "out_spec", None)
    if spec is None:
        return None
    paths = list(_leaf_paths(spec, ()))
    if len(paths) != len(program.graph_signature.user_outputs) or not any(keyed for _, keyed in paths):
        return None
    names = [re.sub(r"\W", "_", "_".join(path)) or "output" for path, _ in paths]
    return names if len(set(names)) == len(names) else None


def _leaf_paths(spec: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(key path, whether a mapping key is on it) of every leaf of a pytree ``TreeSpec``."""
    children = list(spec.children_specs)
    if not children:
        if spec.num_leaves == 1:
            yield path, False
        return
    context = spec.context
    keyed = isinstance(context, (list, tuple)) and len(context) == len(children) and all(
        isinstance(k, str) for k in context)
    keys = [str(k) for k in context] if keyed else [str(i) for i in range(len(children))]
    for key, child in zip(keys, children):
        for sub, deeper in _leaf_paths(child, (*path, key)):
            yield sub, keyed or deeper
