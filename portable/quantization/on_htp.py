"""``quantize --target qnn`` judged on Qualcomm's HTP (issue 47 item 4): where onnxruntime-qnn is installed, the
written file's held-out accuracy comes from the HTP simulator's own outputs (the NPU's integer arithmetic), with ONNX
Runtime CPU's figures on the same samples beside them.

The simulator is slow (about a second a MobileNetV2-sized image on one core), so it runs the first
:data:`~portable.runners.qnn_runner.HELD_OUT_CAP` held-out samples (whole batches of a fixed-batch model); the
record says how many, and which arithmetic each figure comes from. Without the extra nothing changes but a note
naming it. The precision search, when one runs, still selects on ONNX Runtime CPU's figures (the simulator is too
slow to run every trial); the file it keeps is then judged on the HTP.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.quantization.accuracy import OutputAccuracy, compare_outputs
from portable.quantization.data import Samples
from portable.quantization.judging import OutputKind

__all__ = ["HtpAccuracy", "NOT_INSTALLED", "on_htp"]

NOT_INSTALLED = ("quantize --target qnn: the accuracy is ONNX Runtime CPU's emulation of the QDQ file; "
                 "pip install 'portable-onnx[qnn]' to judge it on Qualcomm's HTP (its simulator) instead")
CPU = "ONNX Runtime CPU (the QDQ file as written: its own QuantizeLinear/DequantizeLinear arithmetic)"


@dataclass(frozen=True)
class HtpAccuracy:
    """The held-out accuracy on the HTP and, on the same samples, on ONNX Runtime CPU: each against the float model."""

    runtime: str  # "onnxruntime-qnn 2.7.0 (QAIRT 2.51.0)"
    samples: int  # held-out samples run on the HTP
    held_out: int  # held-out samples in all
    seconds: float  # the simulator's time over them
    htp: tuple[OutputAccuracy, ...]
    ort_cpu: tuple[OutputAccuracy, ...]

    @property
    def arithmetic(self) -> str:
        return f"the QNN HTP simulator ({self.runtime}): the NPU's integer arithmetic"

    def note(self) -> str:
        return (f"accuracy and budgets judged on {self.arithmetic}, over the first {self.samples} of the {self.held_out} "
                f"held-out samples ({self.seconds:.0f} s in the simulator); beside them, {CPU} on the same samples")

    def to_dict(self) -> dict[str, Any]:
        return {"judged_on": self.arithmetic, "samples": self.samples, "held_out": self.held_out,
                "seconds": round(self.seconds, 2), "htp": [a.to_dict() for a in self.htp],
                "beside": CPU, "ort_cpu": [a.to_dict() for a in self.ort_cpu]}


def _outputs(run: Any, samples: Samples) -> list[np.ndarray]:
    chunks = [run(feeds) for feeds in samples.batches()]
    return [np.concatenate([c[k] for c in chunks]) for k in range(len(chunks[0]))]


def _first(samples: Samples, cap: int) -> Samples:
    """The first ``cap`` samples, whole batches of a fixed-batch model (at least one)."""
    stop = max(samples.batch, cap - cap % samples.batch) if samples.static else cap
    return samples.take(0, min(stop, samples.count))


def on_htp(float_model: Path, int8: Path, held_out: Samples,
           kinds: Mapping[str, OutputKind] | None = None) -> HtpAccuracy | str:
    """The accuracy of ``int8`` on the HTP beside ONNX Runtime CPU's, or why it was not measured (a note).
    ``kinds``: what judges each output, as on ONNX Runtime CPU."""
    from portable.packages import installed_version

    if installed_version("onnxruntime_qnn") is None:
        return NOT_INSTALLED
    from portable.quantization.speed import cpu_session
    from portable.runners.base import RunnerFailed
    from portable.runners.qnn_runner import HELD_OUT_CAP, QnnRunner
    from portable.runners.sessions import qnn_version

    samples = _first(held_out, HELD_OUT_CAP)
    float_session = cpu_session(float_model, "the float model")
    int8_session = cpu_session(int8, "the int8 model", as_written=True)
    names = [o.name for o in float_session.get_outputs()]
    expected = _outputs(lambda feeds: float_session.run(None, feeds), samples)
    cpu = _outputs(lambda feeds: int8_session.run(None, feeds), samples)
    runner, start = QnnRunner(int8), time.perf_counter()
    try:
        with runner:
            htp = _outputs(runner.infer, samples)
    except RunnerFailed as exc:  # the HTP refuses the file: said, and ONNX Runtime CPU's figures stand
        return f"quantize --target qnn: the HTP could not run the written file ({exc}); the accuracy is ONNX Runtime CPU's"
    return HtpAccuracy(qnn_version(), samples.count, held_out.count, time.perf_counter() - start,
                       compare_outputs(names, expected, htp, kinds, samples.arrays),
                       compare_outputs(names, expected, cpu, kinds, samples.arrays))
