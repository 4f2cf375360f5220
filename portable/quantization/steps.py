"""The steps of one quantization, each named when it fails, and ONNX Runtime's shape inference run up front.

Why: ``quant_pre_process`` (ONNX Runtime's preparation for its quantizer) first runs its symbolic shape
inference, which has no rule for some ops a portable file holds: on an encoder ending in ``F.normalize``
(ReduceL2 -> Clip -> Expand -> Div) it loses ReduceL2's shape and fails in Expand with "TypeError: object of
type 'NoneType' has no len()" (onnxruntime 1.32, ``symbolic_shape_infer.py``, ``_broadcast_shapes``). It
offers a fallback, ``skip_symbolic_shape=True``: ONNX's own shape inference alone, which a portable file
needs no more than (every dim but the batch is static). :func:`shape_inference` runs the symbolic inference
on the source before any long work (calibration, the precision search) and picks the fallback when it fails,
with a note that names the node. :func:`step` turns a step's failure into one line that names the step
(portable's own pass and its source line, or ONNX Runtime's step) and chains the cause, which ``--debug``
prints.
"""

from __future__ import annotations

import contextlib
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from portable.errors import InternalError, UsageError, one_line

if TYPE_CHECKING:
    from portable.quantization.settings import Settings

__all__ = ["Reuse", "ShapeInference", "shape_inference", "shape_step", "step"]


@dataclass(frozen=True)
class ShapeInference:
    """How ``quant_pre_process`` infers shapes for a model: symbolically (ONNX Runtime's default), or with ONNX's
    shape inference alone (``skip_symbolic_shape``) where the symbolic one fails; ``note`` says why."""

    symbolic: bool = True
    note: str | None = None


def _failing_node(exc: BaseException) -> str:
    """The node ONNX Runtime's symbolic shape inference was on when it raised, and an input of it without a
    shape (read from the traceback's frames: the inference keeps both in its locals)."""
    tb, found = exc.__traceback__, ""
    while tb is not None:
        node, known = tb.tb_frame.f_locals.get("node"), getattr(tb.tb_frame.f_locals.get("self"), "known_vi_", None)
        if isinstance(node, onnx.NodeProto):
            found = f" at node {node.name or '(unnamed)'} ({node.op_type})"
            missing = [i for i in node.input if i and known is not None and i in known
                       and not known[i].type.tensor_type.HasField("shape")]
            found += f", whose input {missing[0]!r} it left without a shape" if missing else ""
        tb = tb.tb_next
    return found


def shape_inference(source: Path) -> ShapeInference:
    """ONNX Runtime's symbolic shape inference (``quant_pre_process``'s first step, with its default arguments)
    on ``source``, up front; where it fails, ONNX's shape inference alone, and a note naming the node."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    proto = onnx.load(str(source))
    try:
        with tempfile.TemporaryDirectory(prefix="portable-shapes-") as tmp, contextlib.chdir(tmp):
            SymbolicShapeInference.infer_shapes(proto)  # an incomplete inference writes a file into the cwd
    except Exception as exc:  # noqa: BLE001 - the inference raises whatever its rules hit
        return ShapeInference(False, f"ONNX Runtime's symbolic shape inference (quant_pre_process) failed"
                                     f"{_failing_node(exc)}: {one_line(exc, limit=160)}; quantized with ONNX's shape "
                                     "inference alone (quant_pre_process skip_symbolic_shape=True), which a portable "
                                     "file, static but for its batch, needs no more")
    return ShapeInference()


def shape_step(symbolic: bool) -> str:
    """The name of ``quant_pre_process``'s step, as the error says it."""
    return ("ONNX Runtime's shape inference (quant_pre_process, symbolic)" if symbolic
            else "ONNX Runtime's shape inference (quant_pre_process, skip_symbolic_shape=True)")


def _where(exc: BaseException, inside: str | None = None) -> tuple[str, str]:
    """The deepest frame of ``exc`` (inside the folder ``inside`` when given): its module's stem, and
    ``file, line N, in function`` with the path from the package's folder on."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if inside is None or inside in "/".join(Path(f.filename).parts)]
    if not frames:
        return "", ""
    last = frames[-1]
    parts = Path(last.filename).parts
    start = max((i for i, p in enumerate(parts) if p in ("portable", "onnxruntime", "onnx")), default=len(parts) - 1)
    return Path(last.filename).stem, f"{'/'.join(parts[start:])}, line {last.lineno}, in {last.name}"


def _culprit(exc: BaseException, what: str | None) -> str:
    """``what`` failed, or, for portable's own passes (``what`` None), the pass whose module raised."""
    if what is not None:
        where = _where(exc)[1]
        return f"{what} failed" + (f" ({where})" if where else "")
    stem, where = _where(exc, "portable/quantization/")
    name = stem if stem and stem != "quantizer" else "preparation"
    return f"portable's {name} pass, before ONNX Runtime's quantizer, failed ({where or 'unknown place'})"


@contextlib.contextmanager
def step(source: Path, what: str | None) -> Iterator[None]:
    """One step of the quantization: a failure is an :class:`InternalError` (exit 3) naming the step (``what``;
    None: portable's own passes, named by the module that raised) with its cause chained."""
    try:
        yield
    except (UsageError, InternalError):
        raise
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime's tools and the passes raise plain exceptions
        raise InternalError(f"{_culprit(exc, what)}: {one_line(exc, limit=300)}", path=str(source)) from exc


class Reuse:
    """What the trials of one run share. The precision search quantizes the same float model once per trial, and
    only the nodes kept float differ between trials; none of these depends on them: the float model the passes
    before the quantizer make (``prepare``: SmoothQuant, float islands, bias correction), ``quant_pre_process``'s
    output, and ONNX Runtime's calibration ranges (its own ``calibration_cache_path`` option of ``quantize_static``:
    every tensor's range, computed once by the first trial and read back by the others). On a 110M-parameter
    encoder at 128 tokens these were three passes over the calibration samples per trial. Kept in ``folder``,
    for the settings less their ``node:`` exclusions; other settings start afresh."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._key: Settings | None = None
        self._kept: tuple[Any, Path] | None = None

    @staticmethod
    def _key_of(settings: Settings) -> Settings:
        return replace(settings, exclude=tuple(e for e in settings.exclude if not e.startswith("node:")))

    @property
    def calibration_cache(self) -> Path:
        return self.folder / "calibration-ranges.json"

    def get(self, settings: Settings) -> tuple[Any, Path] | None:
        """The prepared float model (``quantizer.Prepared``) and the pre-processed file kept for these settings."""
        return self._kept if self._key == self._key_of(settings) else None

    def keep(self, settings: Settings, ready: Any, preprocessed: Path) -> None:
        if self._key is not None and self._key != self._key_of(settings):
            self.calibration_cache.unlink(missing_ok=True)
        self._key, self._kept = self._key_of(settings), (ready, preprocessed)
