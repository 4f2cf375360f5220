"""The passes, then ONNX Runtime's quantizer: :func:`quantize_file`, one trial of a run (apart from
:mod:`portable.quantization.quantizer`, which :mod:`portable.quantization.preparation` calls for its own
measurements, so that neither imports the other at run time)."""

from __future__ import annotations

import contextlib
import io
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from portable.quantization.data import Samples
from portable.quantization.quantizer import exclusions, quantize_prepared
from portable.quantization.settings import Settings
from portable.quantization.steps import Reuse, step

__all__ = ["Quantized", "quantize_file"]


@dataclass(frozen=True)
class Quantized:
    """The QDQ model, and what the passes before ONNX Runtime's quantizer did to the float one."""

    proto: onnx.ModelProto
    passes: dict[str, Any] = field(default_factory=dict)
    # the float model as the int8 one computes it (Prepared.reference): what the worst nodes compare with
    reference: onnx.ModelProto | None = field(default=None, compare=False, repr=False)


def quantize_file(source: Path, settings: Settings, calibration: Samples, reuse: Reuse | None = None) -> Quantized:
    """The QDQ model ONNX Runtime makes of ``source`` (read back whole: no external data), after the passes
    of :mod:`portable.quantization.preparation` (run once per source, settings and calibration samples). Each
    step's failure names its step (portable's own pass, ONNX Runtime's shape inference, its quantizer), with the
    cause chained (``--debug`` shows it). ``reuse``: the run's trials share ONNX Runtime's calibration cache."""
    proto = onnx.load(str(source), load_external_data=False)
    excluded_ops, excluded_nodes = exclusions(proto, settings.exclude)  # bad --exclude values: before any work
    import onnxruntime as ort

    from portable.quantization.preparation import prepared

    ort.set_default_logger_severity(3)  # the calibration sessions' C++ warnings
    with tempfile.TemporaryDirectory(prefix="portable-quantize-") as tmp, contextlib.redirect_stdout(io.StringIO()):
        kept_before = reuse.get(settings) if reuse is not None else None
        if kept_before is not None:
            ready = kept_before[0]
        else:
            with step(source, None):
                ready = prepared(source, proto, settings, calibration,
                                 (reuse.folder if reuse is not None else Path(tmp)) / "prepared")
        if reuse is not None:  # the run's next trials take it, and the calibration cache, for these settings only
            reuse.keep(settings, ready, ready.path)
        kept = set(excluded_nodes) | {n.name for n in ready.model.graph.node if n.op_type in excluded_ops}
        path = ready.for_trial(kept, Path(tmp))
        with step(source, "ONNX Runtime's quantize_static"):
            quantized = quantize_prepared(ready, path, settings, proto, calibration,
                                          reuse.calibration_cache if reuse is not None else None)
        return Quantized(quantized, _headroom_used(dict(ready.passes), quantized), ready.reference)


def _headroom_used(passes: dict[str, Any], quantized: onnx.ModelProto) -> dict[str, Any]:
    """``passes`` whose logits headroom names only the outputs the quantizer quantized: scope "linear" leaves a
    classifier head's output float, and the range kept for it is then never used."""
    headroom = passes.get("ranges", {}).get("logits_headroom")
    if not headroom or not headroom["outputs"]:
        return passes
    dequantized = {o for n in quantized.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    used = {name: value for name, value in headroom["outputs"].items() if name in dequantized}
    return {**passes, "ranges": {**passes["ranges"], "logits_headroom": {**headroom, "outputs": used}}}
