"""torch.export / torch.onnx failures as findings: the model's line that failed, and a remedy when one is known.

A failure inside torch (tracing, decomposition, translation) is the model's finding, not
portable's: the location is the innermost frame of the model's code (the user's or a model
library's, such as ``transformers/models/t5/modeling_t5.py:368``), read from the sections
torch adds to its messages (``The following call raised this error:``, ``Original
traceback:``) or else from the Python tracebacks of the exception chain.
"""

from __future__ import annotations

import importlib.util
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from portable.exporters.provenance import relative_file
from portable.findings import SourceLocation
from portable.frames import frames_of

__all__ = ["DATA_DEPENDENT_HINT", "DataDependentSize", "ModelFrame", "attention_hint", "data_dependent_size",
           "debug_text", "model_frame", "root_cause"]

_SECTIONS = (re.compile(r"The following call raised this error:\n(.*?)(?:\n\n|\Z)", re.S),
             re.compile(r"Original traceback:\n(.*?)(?:\nUse tlparse|\n\n|\Z)", re.S))
# torch, the ONNX toolchain and portable itself are machinery, not the model; so are the standard
# library and generated code (torch.fx's ``<eval_with_key>.5``).
_MACHINERY = re.compile(r"((site|dist)-packages/(torch|torchgen|functorch|onnxscript|onnx_ir|onnx)/|^<"
                        r"|/lib/python3\.\d+/[^/]+\.py$|/lib/python3\.\d+/(?!site-packages|dist-packages)[^/]+/)")
_ATTENTION = re.compile(r"attn|attention|sdpa", re.I)
DATA_DEPENDENT_HINT = ("a portable graph has static shapes: if this is post-processing (NMS, score thresholds, box "
                       "filtering), export the network without it (e.g. a detector's backbone and heads) and run it "
                       "outside the ONNX model; otherwise keep sizes fixed (torch.where(cond, x, 0) instead of nonzero, "
                       "masked_select or boolean indexing)")


@dataclass(frozen=True)
class ModelFrame:
    """The innermost frame of the model's code: where it is (relative) and what it ran."""

    source: SourceLocation
    function: str | None = None
    code: str | None = None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of the chain (``ConversionError`` -> the ``ValueError`` that caused it)."""
    return list(_chain(exc))[-1]


def debug_text(exc: BaseException, captured: str = "") -> str:
    """torch's full report for ``--debug``: what it printed, then the traceback of the whole chain."""
    return (captured.rstrip() + "\n" if captured.strip() else "") + "".join(traceback.format_exception(exc))


@lru_cache(maxsize=1)
def _own_folders() -> tuple[str, ...]:
    """portable's own package folders (the editable tree or site-packages/portable/...)."""
    folders = []
    for name in ("portable", "portable.exporters", "portable.validators", "portable.runners"):
        spec = importlib.util.find_spec(name)
        folders += [str(Path(p).resolve()) + "/" for p in (spec.submodule_search_locations or ())] if spec else []
    return tuple(folders)


def _is_model(file: str) -> bool:
    return not _MACHINERY.search(file) and not file.startswith(_own_folders())


def _traces(exc: BaseException) -> Iterator[str]:
    """Stack texts, most precise first: torch's own sections, then the tracebacks, innermost exception first."""
    chain = list(_chain(exc))
    for pattern in _SECTIONS:
        for item in chain:
            match = pattern.search(str(item))
            if match:
                yield match.group(1)
    for item in reversed(chain):
        yield "".join(traceback.format_tb(item.__traceback__))


def model_frame(exc: BaseException, root: Path) -> ModelFrame | None:
    """The innermost frame of the model's code in the first stack text that holds one."""
    for trace in _traces(exc):
        frame = _frame_in(trace, root)
        if frame is not None:
            return frame
    return None


def _attn_implementation(module: Any) -> str | None:
    """transformers' ``config._attn_implementation`` of the module or of its first submodule that has one."""
    for sub in module.modules() if hasattr(module, "modules") else (module,):
        impl = getattr(getattr(sub, "config", None), "_attn_implementation", None)
        if isinstance(impl, str):
            return impl
    return None


def attention_hint(module: Any, frame: ModelFrame | None) -> str | None:
    """The known remedy when a transformers model fails in its sdpa/flash attention path: eager attention.

    Given only when the failing line is in attention code (its function or code names attn/attention/sdpa)
    and the model does not already use eager attention.
    """
    impl = _attn_implementation(module)
    if frame is None or impl in (None, "eager"):
        return None
    if not _ATTENTION.search(f"{frame.function or ''} {frame.code or ''} {frame.source.file}"):
        return None
    return (f"the failing line is in the model's attention code, which runs the {impl!r} attention implementation: "
            "load the model with attn_implementation='eager' (e.g. from_pretrained(..., attn_implementation='eager') "
            "or config._attn_implementation = 'eager') and export again")


@dataclass(frozen=True)
class DataDependentSize:
    """Where torch made the data-dependent size (``u1``) a failed guard was about."""

    symbols: tuple[str, ...]
    frame: ModelFrame | None


_GRAPH_FILE = re.compile(r"# File: (?P<file>.+?):(?P<line>\d+) in (?P<function>\S+), code: (?P<code>.*)")
_GRAPH_VALUE = re.compile(r'^\s*\w+: "[a-z0-9]+\[(?P<dims>[^\]]*)\]"')


def _size_symbols(exc: BaseException) -> tuple[str, ...]:
    """torch's "(Size-like symbols: u1, u2)" of a data-dependent guard, if any."""
    match = re.search(r"\(Size-like symbols: ([^)]*)\)", str(exc))
    names = match.group(1).split(",") if match else ()
    return tuple(n.strip() for n in names if n.strip() and n.strip() != "none")


def _allocated_at(printed: str, symbol: str, root: Path) -> ModelFrame | None:
    """The model line above the first value sized by ``symbol`` in the partial graph torch printed.

    torch records each unbacked symbol's stack only with extended debugging on, but on failure it
    prints the graph traced so far, each node under a ``# File: path:line in fn, code: ...`` comment;
    the first node whose shape holds ``u1`` is the op that made it (``torch.where(keep)[0]``).
    """
    word, last = re.compile(rf"\b{re.escape(symbol)}\b"), None
    for line in printed.splitlines():
        comment = _GRAPH_FILE.search(line)
        if comment:
            last = comment
            continue
        value = _GRAPH_VALUE.match(line)
        if value and word.search(value["dims"]):
            if last is None or not _is_model(last["file"]):
                return None
            location = SourceLocation(relative_file(last["file"], str(root.resolve())), int(last["line"]))
            return ModelFrame(location, last["function"], last["code"].strip())
    return None


def data_dependent_size(exc: BaseException, root: Path, printed: str = "") -> DataDependentSize | None:
    """For a guard on a data-dependent *size* (``nonzero``, ``torch.where(cond)``, ``nms``...): its
    symbols and the model line that made the first of them (else the guard's line); None for a guard
    on a value (``if x.sum() > 0``, ``.item()``)."""
    symbols = next((found for found in map(_size_symbols, _chain(exc)) if found), ())
    if not symbols:
        return None
    return DataDependentSize(symbols, _allocated_at(printed, symbols[0], root) or model_frame(exc, root))


def _frame_in(trace: str, root: Path) -> ModelFrame | None:
    frames = [f for f in frames_of(trace) if _is_model(f.file)]
    if not frames:
        return None
    last = frames[-1]
    return ModelFrame(SourceLocation(relative_file(last.file, str(root.resolve())), last.line), last.function, last.code)
