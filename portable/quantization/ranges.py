"""Activation ranges that fit the data: per tensor, the clipping range whose 8-bit quantization loses least.

Why: ONNX Runtime's MinMax calibration takes every activation's whole range, so one rare value sets the
step of all (EfficientNet-Lite's linear-bottleneck outputs span about 140 where most values lie within a
few units: a step of 0.55); its Percentile method cuts a fixed share of each tail whatever the tensor; its
Entropy method, as ``quantize_static`` runs it, keeps MinMax's ranges (``run.ENTROPY_NOTE``). What AIMET's
TF-enhanced scheme and NNCF's MSE range initialisation do instead is search, per tensor, the range that
minimises the mean squared error of quantizing the calibration data: wider loses resolution, narrower
clips. Here that search reads ONNX Runtime's own calibration: its histogram calibrator
(``create_calibrator`` with the percentile method, whose collector keeps a histogram of real values per
tensor) runs over the calibration samples, a chunk at a time so no activation is held for all samples;
each tensor's candidate ranges are scored on that histogram, and the chosen ranges go to the quantizer as
ONNX Runtime's own calibration cache (:func:`save_ranges`: ``quantize_static``'s ``calibration_cache_path``, read
as MinMax ranges instead of calibrating again). The scale and zero point are then ONNX Runtime's
(``compute_scale_zp``) from those ranges.

The error of a candidate is scored at the histogram's bin centres with the scale and zero point
``compute_scale_zp`` would give (its formula, vectorised over the candidates: calling it per candidate
costs seconds per tensor). The whole range is among the candidates, so a tensor without outliers keeps its
MinMax range.

A classifier's logits are the exception (``logits``: the outputs the run judges as logits): their range is the
whole calibrated one with its top doubled (``LOGITS_HEADROOM``), never clipped. Why: top-1 reads the largest
logit, and the inputs the model is surest of make the largest logits, so a held-out input surer than every
calibration input saturates at the range's top, where its two best classes tie and the argmax takes the
lower index. EfficientNet-Lite1 on split 1's photos: the calibration crops' largest logit is 8.98, a held-out
crop's best two classes read 10.09 and 9.55 in float and both 8.92 in int8: the one confident crop of 37 the
int8 model got wrong, at every number of nodes the precision search kept float. With the top doubled it agrees on
all 37, and the logits' SQNR on those crops moves from 18.76 to 18.64 dB (over all 240: 17.85 to 17.75; the
output's own step is a small part of its error).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.quantization.data import Reader, Samples
from portable.quantization.settings import Settings

__all__ = ["HISTOGRAM_BINS", "RangeChoice", "TensorHistogram", "activation_grid", "histograms", "histograms_of",
           "method_ranges", "mse_range", "save_ranges", "scale_zero"]

HISTOGRAM_BINS = 8192  # per tensor over [-max|x|, max|x|]: about 16 bins per 8-bit step of a whole range
CHUNK = 16  # calibration samples per collect_data call: the calibrator holds every output of a call
GRID_1D = 160  # candidate ends of a one-signed tensor (fractions of its largest value)
GRID_2D = 40  # candidate ends per side of a two-signed tensor
LOGITS_HEADROOM = 2.0  # a logits output's range: the calibrated one, its top (when positive) times this


@dataclass(frozen=True)
class TensorHistogram:
    """One tensor's histogram over the calibration samples (ONNX Runtime's collector): counts, bin edges, the
    smallest and largest value seen."""

    name: str
    counts: np.ndarray
    edges: np.ndarray
    low: float
    high: float
    percentile: tuple[float, float]  # ONNX Runtime's percentile calibrator's range (99.999, both tails)

    def centres(self) -> tuple[np.ndarray, np.ndarray]:
        """The non-empty bins' centres and counts (float64)."""
        keep = self.counts > 0
        centres = (self.edges[:-1].astype(np.float64) + self.edges[1:].astype(np.float64)) / 2
        return centres[keep], self.counts[keep].astype(np.float64)


@dataclass(frozen=True)
class RangeChoice:
    """The ranges one method gives every tensor, and how many of them clip the calibrated range."""

    method: str
    ranges: dict[str, tuple[float, float]]
    clipped: int
    headroom: tuple[str, ...] = ()  # the logits outputs whose range is the calibrated one with headroom

    def to_dict(self) -> dict[str, Any]:
        widened = {name: [round(v, 6) for v in self.ranges[name]] for name in self.headroom}
        return {"method": self.method, "tensors": len(self.ranges), "clipped": self.clipped,
                "logits_headroom": {"factor": LOGITS_HEADROOM, "outputs": widened}}


def activation_grid(settings: Settings) -> tuple[int, int, bool]:
    """The activations' integer range and symmetry under ``settings`` (ONNX Runtime's ``get_qmin_qmax_for_qType``)."""
    from onnxruntime.quantization.quant_utils import QuantType, get_qmin_qmax_for_qType

    qtype = (QuantType.QInt8 if settings.activations == "int8" else QuantType.QUInt8).tensor_type
    symmetric = bool(settings.extra.get("ActivationSymmetric", False))
    qmin, qmax = get_qmin_qmax_for_qType(qtype, reduce_range=False, symmetric=symmetric)
    return int(qmin), int(qmax), symmetric


def _chunks(count: int, batch: int) -> list[tuple[int, int]]:
    """``CHUNK`` samples a call in whole batches, a last short batch on its own: ONNX Runtime's histogram collector
    stacks a call's batches into one array, which fails on batches of two sizes."""
    step, full = max(CHUNK - CHUNK % batch, batch), count - count % batch
    return [(start, min(start + step, full)) for start in range(0, full, step)] + ([(full, count)] if full < count else [])


def histograms(model: Path, op_types: Sequence[str] | None, calibration: Samples) -> dict[str, TensorHistogram]:
    """The histogram of every tensor ONNX Runtime's quantizer would calibrate in ``model`` (a shape-inferred
    file, as ``quant_pre_process`` writes it) over the calibration samples."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    with tempfile.TemporaryDirectory(prefix="portable-ranges-") as tmp:
        calibrator = create_calibrator(model, op_types, augmented_model_path=str(Path(tmp) / "augmented.onnx"),
                                       calibrate_method=CalibrationMethod.Percentile,
                                       extra_options={"num_bins": HISTOGRAM_BINS, "symmetric": False})
        for start, stop in _chunks(calibration.count, calibration.batch):
            calibrator.collect_data(Reader(calibration.take(start, stop)))
        return _tensor_histograms(calibrator.collector)


def histograms_of(values: dict[str, list[np.ndarray]]) -> dict[str, TensorHistogram]:
    """The histograms ONNX Runtime's collector (as :func:`histograms` has its calibrator make it) keeps of these
    tensors' values (name -> a list of arrays, one per batch)."""
    from onnxruntime.quantization.calibrate import HistogramCollector

    collector = HistogramCollector(method="percentile", symmetric=False, num_bins=HISTOGRAM_BINS,
                                   num_quantized_bins=128, percentile=99.999, scenario="same")
    collector.collect(values)
    return _tensor_histograms(collector)


def _tensor_histograms(collector: Any) -> dict[str, TensorHistogram]:
    percentiles = collector.compute_percentile()
    return {name: TensorHistogram(name, np.asarray(v[0]), np.asarray(v[1]), float(v[2]), float(v[3]),
                                  (float(percentiles[name][0]), float(percentiles[name][1])))
            for name, v in collector.histogram_dict.items()}


def scale_zero(low: np.ndarray, high: np.ndarray, qmin: int, qmax: int,
               symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """``compute_scale_zp``'s scale and zero point for arrays of ranges (its formula, vectorised)."""
    low, high = np.minimum(low, 0.0), np.maximum(high, 0.0)
    if symmetric:
        high = np.maximum(np.abs(low), np.abs(high))
        low = -high
    scale = np.maximum((high - low) / (qmax - qmin), np.finfo(np.float32).tiny)
    zero = np.full_like(scale, round((qmin + qmax) / 2)) if symmetric else np.round(qmin - low / scale)
    return scale, zero


def _errors(hist: TensorHistogram, low: np.ndarray, high: np.ndarray, qmin: int, qmax: int,
            symmetric: bool) -> np.ndarray:
    """The summed squared quantization error of the histogram under each candidate range."""
    x, counts = hist.centres()
    scale, zero = scale_zero(low, high, qmin, qmax, symmetric)
    q = np.clip(np.round(x[None, :] / scale[:, None]) + zero[:, None], qmin, qmax)
    return np.asarray((((q - zero[:, None]) * scale[:, None] - x[None, :]) ** 2 * counts[None, :]).sum(axis=1))


def mse_range(hist: TensorHistogram, qmin: int, qmax: int, symmetric: bool) -> tuple[float, float]:
    """The candidate range of least quantization MSE on ``hist`` (the calibrated range is one candidate)."""
    low, high = min(hist.low, 0.0), max(hist.high, 0.0)
    if high - low <= 0:
        return hist.low, hist.high
    if low == 0.0 or high == 0.0 or symmetric:  # one end is 0 (a ReLU's output) or mirrors the other
        fractions = np.linspace(1.0 / GRID_1D, 1.0, GRID_1D)
        lows, highs = low * fractions, high * fractions
    else:
        fractions = np.linspace(1.0 / GRID_2D, 1.0, GRID_2D)
        lows, highs = (a.ravel() for a in np.meshgrid(low * fractions, high * fractions))
    best = int(np.argmin(_errors(hist, lows, highs, qmin, qmax, symmetric)))
    return float(lows[best]), float(highs[best])


def _range(method: str, hist: TensorHistogram, qmin: int, qmax: int, symmetric: bool) -> tuple[float, float]:
    if method == "mse":
        return mse_range(hist, qmin, qmax, symmetric)
    return hist.percentile if method == "percentile" else (hist.low, hist.high)


def method_ranges(method: str, found: dict[str, TensorHistogram], qmin: int, qmax: int,
                  symmetric: bool, logits: Sequence[str] = ()) -> RangeChoice:
    """Every tensor's range under ``method`` ("minmax", "percentile" or "mse"); the ``logits`` outputs' the
    calibrated range with its top times ``LOGITS_HEADROOM`` (the module docstring says why)."""
    widened = tuple(name for name in logits if name in found)
    ranges = {name: (hist.low, hist.high * LOGITS_HEADROOM if hist.high > 0 else hist.high) if name in widened
              else _range(method, hist, qmin, qmax, symmetric) for name, hist in found.items()}
    clipped = sum(1 for name, (low, high) in ranges.items() if low > found[name].low or high < found[name].high)
    return RangeChoice(method, ranges, clipped, widened)


def save_ranges(choice: RangeChoice, path: Path) -> Path:
    """``choice`` as ONNX Runtime's calibration cache (``save_tensors_data``, MinMax): ``quantize_static`` given
    it as ``calibration_cache_path`` takes these ranges instead of calibrating again."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, TensorData, TensorsData, save_tensors_data

    data = {name: TensorData(lowest=np.float32(low), highest=np.float32(high))
            for name, (low, high) in choice.ranges.items()}
    save_tensors_data(TensorsData(CalibrationMethod.MinMax, data), path)
    return path
