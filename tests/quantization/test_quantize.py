"""``portable.quantize`` on a real exported CNN: the int8 file is portable and QDQ, its cost is
measured on held-out samples, budgets gate it, targets set its types; bad input writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import portable
from portable.errors import UsageError
from portable.quantization.result import QuantizeFailed


@pytest.fixture(scope="module")
def quantized(cnn: Path, quick, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("int8") / "cnn.int8.onnx"
    return portable.quantize(cnn, out, min_sqnr=20.0, max_top1_drop=25.0, **quick)


def _initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _dq_of_weights(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    names = {t.name for t in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in names
            and model.graph.initializer[[t.name for t in model.graph.initializer].index(n.input[0])].data_type
            in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)]


def test_the_int8_file_is_written_portable_and_qdq(quantized):
    assert quantized.written and quantized.exit_code == 0 and quantized.path.is_file()
    report = portable.validate(quantized.path)
    assert report.ok and report.findings == () and {"PORT030", "PORT031", "PORT032"} <= set(report.rules)
    model = onnx.load(str(quantized.path))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 18)]
    ops = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops and "Relu" not in ops  # uint8 does Relu's clamp
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["portable.precision"] == "int8-qdq" and meta["portable.fingerprint"] == quantized.fingerprint


def test_nothing_but_the_model_and_its_manifest_is_left_beside_either_file(quantized, cnn):
    """No temporary, no helper file left (ONNX Runtime's tools write NAME-inferred.onnx beside what they read,
    so they are given links in a folder of ours)."""
    assert sorted(p.name for p in quantized.path.parent.iterdir()) == ["cnn.int8.onnx", "cnn.int8.onnx.json"]
    assert sorted(p.name for p in cnn.parent.iterdir()) == ["cnn.onnx", "cnn.onnx.json"]


def test_the_manifest_keeps_settings_samples_and_measurements(quantized):
    manifest = json.loads(quantized.manifest_path.read_text())
    assert manifest["precision"] == "int8-qdq" and manifest["fingerprint"] == quantized.fingerprint
    q = manifest["quantization"]
    assert q["settings"]["target"] == "ort-cpu" and q["settings"]["activations"] == "uint8"
    assert q["settings"]["from_target"] == ["activations", "weights", "per_channel"]
    assert q["calibration"] == {"source": "seeded (seed 0, stream 1)", "samples": 16, "seeded": True, "preprocess": None}
    assert q["held_out"]["samples"] == 32 and q["held_out"]["source"] != q["calibration"]["source"]
    assert q["source_fingerprint"].startswith("sha256:") and q["budgets_ok"] is True
    assert "not your data's distribution" in q["notes"][0]


def test_accuracy_is_measured_per_output_on_held_out_samples(quantized):
    (logits,) = quantized.accuracy
    assert logits.samples == 32 and 20.0 < logits.sqnr_db < 80.0  # quantized: close, not exact
    assert 0.0 < logits.max_abs < logits.rms and logits.top1_agreement is not None
    assert [c.budget for c in quantized.checks] == ["min-sqnr", "max-top1-drop"] and quantized.budgets_ok


def test_the_worst_nodes_name_nodes_of_the_float_model(quantized, cnn):
    nodes = {n.name for n in onnx.load(str(cnn)).graph.node}
    worst = quantized.worst_nodes
    assert 0 < len(worst) <= 10
    measured = [w.qdq_sqnr_db for w in worst if w.qdq_sqnr_db is not None]
    assert measured == sorted(measured) and all(w.node in nodes for w in worst if w.op_type != "(input)")


def test_latency_of_both_models_is_timed_side_by_side(quantized):
    lat = quantized.latency
    assert lat is not None and lat.batch == 8 and lat.float_stats.iterations >= 3 and lat.int8_stats.iterations >= 3
    assert lat.ratio_p50 > 0 and lat.to_dict()["spinning"] is False


def test_a_budget_that_is_exceeded_writes_nothing_and_exits_1(cnn, quick, tmp_path):
    out = tmp_path / "strict.onnx"
    with pytest.raises(QuantizeFailed, match="accuracy budget") as failed:
        portable.quantize(cnn, out, min_sqnr=150.0, latency=False, per_node=False, **quick)
    result = failed.value.result
    assert failed.value.exit_code == 1 and result.exit_code == 1 and not result.written
    assert [c.passed for c in result.checks] == [False] and result.accuracy
    assert not out.exists() and not out.with_name(out.name + ".json").exists()


def test_exclude_keeps_an_op_type_in_float(cnn, quick, tmp_path):
    result = portable.quantize(cnn, tmp_path / "no_gemm.onnx", exclude=["Gemm"], latency=False, per_node=False,
                               **quick)
    model = onnx.load(str(result.path))
    (gemm,) = [n for n in model.graph.node if n.op_type == "Gemm"]
    float_inits = {t.name for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    assert gemm.input[1] in float_inits and result.settings.exclude == ("Gemm",)


@pytest.mark.parametrize("value", ["Softmaxx", "node_that_is_not_there"])
def test_exclude_of_something_the_model_lacks_is_a_usage_error(cnn, quick, tmp_path, value):
    with pytest.raises(UsageError, match="not an op type or node name of the model"):
        portable.quantize(cnn, tmp_path / "x.onnx", exclude=[value], **quick)
    assert not (tmp_path / "x.onnx").exists()


def test_target_qnn_gives_symmetric_int8_per_channel_convolutions_and_openvino_symmetric_int8(cnn, quick, tmp_path):
    """QNN's HTP takes per-channel int8 convolution weights with uint8 activations (ONNX Runtime's QNN tests,
    ConvU8S8S32_PerChannel); its old per-tensor uint8 weights are one flag pair away."""
    qnn = portable.quantize(cnn, tmp_path / "qnn.onnx", target="qnn", latency=False, per_node=False, **quick)
    model = onnx.load(str(qnn.path))
    inits = _initializers(model)
    conv_weights = [n for n in _dq_of_weights(model) if inits[n.input[0]].ndim == 4]
    assert conv_weights and {inits[n.input[0]].dtype for n in conv_weights} == {np.dtype(np.int8)}
    assert all(inits[n.input[1]].size > 1 and not inits[n.input[2]].any() for n in conv_weights)  # per-channel, zp 0
    activations = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert activations and all(inits[n.input[2]].dtype == np.uint8 for n in activations)
    old = portable.quantize(cnn, tmp_path / "qnn-pt.onnx", target="qnn", weights="uint8", per_channel=False,
                            latency=False, per_node=False, **quick)
    model = onnx.load(str(old.path))
    inits = _initializers(model)
    weights = _dq_of_weights(model)
    assert weights and {inits[n.input[0]].dtype for n in weights} == {np.dtype(np.uint8)}
    assert all(inits[n.input[1]].size == 1 for n in weights)  # per-tensor
    vino = portable.quantize(cnn, tmp_path / "ov.onnx", target="openvino", latency=False, per_node=False, **quick)
    model = onnx.load(str(vino.path))
    inits = _initializers(model)
    activations = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert activations and all(inits[n.input[2]].dtype == np.int8 and not inits[n.input[2]].any() for n in activations)
    conv_weights = [n for n in _dq_of_weights(model) if inits[n.input[0]].ndim == 4]
    assert conv_weights and all(inits[n.input[1]].size > 1 for n in conv_weights)  # per-channel
    assert vino.settings.from_user == () and portable.validate(vino.path).ok


def test_a_flag_overrides_the_targets_default(cnn, quick, tmp_path):
    result = portable.quantize(cnn, tmp_path / "qnn8.onnx", target="qnn", weights="uint8", latency=False,
                               per_node=False, **quick)
    inits = _initializers(onnx.load(str(result.path)))
    assert result.settings.from_user == ("weights",) and result.settings.extra["WeightSymmetric"] is False
    assert {inits[n.input[0]].dtype for n in _dq_of_weights(onnx.load(str(result.path)))} == {np.dtype(np.uint8)}


def test_qnn_keeps_matmul_weights_per_tensor(tmp_path):
    """QNN has no per-channel MatMul (ONNX Runtime's get_qnn_qdq_config overrides them so): where the
    convolutions' weights are per-channel, a MatMul's stay per-tensor, int8 and symmetric."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    m = numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "m")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["c", "m"], ["y"], name="matmul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 8, 5])], [w, m])
    source = tmp_path / "convmatmul.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(source))
    result = portable.quantize(source, tmp_path / "q.onnx", target="qnn", latency=False, per_node=False,
                               samples=8, eval_samples=8, min_sqnr=0)
    model = onnx.load(str(result.path))
    inits = _initializers(model)
    scales = {n.input[0]: inits[n.input[1]].size for n in _dq_of_weights(model)}
    quantized = {name: inits[name].dtype for name in scales}
    assert scales == {"w_quantized": 4, "m_quantized": 1} and set(quantized.values()) == {np.dtype(np.int8)}, scales


def _npz(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def test_the_users_samples_calibrate_and_their_last_quarter_is_held_out(cnn, quick, tmp_path):
    images = np.random.default_rng(5).standard_normal((12, 3, 32, 32)).astype(np.float32)
    data = _npz(tmp_path / "cal.npz", x=images)
    result = portable.quantize(cnn, tmp_path / "cal.onnx", calibration=data, latency=False, per_node=False,
                               timing=quick["timing"], adaround=False)
    assert (result.calibration.count, result.held_out.count) == (9, 3)
    assert result.calibration.source.endswith("[0:9]") and "held out" in result.held_out.source
    from portable.quantization.run import RANDOM_CALIBRATION_NOTE

    assert not result.calibration.seeded and RANDOM_CALIBRATION_NOTE not in result.notes


def test_quantizing_twice_needs_force_and_a_quantized_input_is_refused(quantized, quick, tmp_path):
    with pytest.raises(UsageError, match="file exists"):
        portable.quantize(quantized.source, quantized.path, **quick)
    with pytest.raises(UsageError, match="already quantized"):
        portable.quantize(quantized.path, tmp_path / "again.onnx", **quick)


def _activation_scales(path: Path) -> dict[str, float]:
    model = onnx.load(str(path))
    values = _initializers(model)
    return {n.input[0]: float(values[n.input[1]]) for n in model.graph.node if n.op_type == "QuantizeLinear"}


def test_entropy_calibration_gives_minmax_ranges_and_the_report_says_so(cnn: Path, tmp_path: Path):
    """ONNX Runtime's quantize_static leaves its entropy calibrator 128 bins for 128 quantized bins (one
    candidate threshold): the same scales as minmax. The note says so; if ONNX Runtime changes, this fails
    and the note goes."""
    from portable.quantization.run import ENTROPY_NOTE

    common = {"samples": 16, "eval_samples": 16, "latency": False, "per_node": False, "min_sqnr": 0.0}
    entropy = portable.quantize(cnn, tmp_path / "e.onnx", method="entropy", **common)
    minmax = portable.quantize(cnn, tmp_path / "m.onnx", method="minmax", **common)
    percentile = portable.quantize(cnn, tmp_path / "p.onnx", method="percentile", **common)
    assert _activation_scales(entropy.path) == _activation_scales(minmax.path)
    assert _activation_scales(percentile.path) != _activation_scales(minmax.path)  # the method reaches ORT
    assert ENTROPY_NOTE in entropy.notes and ENTROPY_NOTE not in minmax.notes


def test_a_budget_given_twice_is_a_usage_error_and_nothing_is_written(cli, cnn: Path, tmp_path: Path):
    out = tmp_path / "o.onnx"
    result = cli("quantize", str(cnn), "-o", str(out), "--min-sqnr", "20", "--min-sqnr", "25")
    assert result.exit_code == 2 and "--min-sqnr given 2 times" in result.stderr and not out.exists()


def test_the_judged_accuracy_is_the_files_own_arithmetic_and_the_hosts_kernels_are_noted(cnn, quick, tmp_path):
    """The judged figure is the QDQ file run as written (graph optimizations off: the same numbers on any CPU);
    ONNX Runtime's fused int8 kernels on this CPU are measured too, and a gap over 1 dB is a note naming both
    figures (on x86 without VNNI its u8s8 kernels saturate: seen on an AVX2 EPYC, 46.8 dB against 28.1 dB)."""
    from dataclasses import replace

    import onnxruntime as ort

    from portable.quantization.run import _host_kernels_note

    rng = np.random.default_rng(7)
    cal = _npz(tmp_path / "cal.npz", x=rng.standard_normal((12, 3, 32, 32)).astype(np.float32))
    held = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    result = portable.quantize(cnn, tmp_path / "q.onnx", calibration=cal, eval_data=_npz(tmp_path / "h.npz", x=held),
                               min_sqnr=0.0, latency=False, per_node=False, timing=quick["timing"])

    def run(path: Path, level: ort.GraphOptimizationLevel) -> np.ndarray:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, {"x": held})[0]

    expected = run(cnn, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).astype(np.float64)
    as_written = run(result.path, ort.GraphOptimizationLevel.ORT_DISABLE_ALL).astype(np.float64)
    sqnr = 10 * np.log10((expected ** 2).sum() / ((as_written - expected) ** 2).sum())
    assert abs(result.accuracy[0].sqnr_db - sqnr) < 1e-3  # the judged figure: the file as written
    held_acc = result.accuracy
    note = _host_kernels_note(held_acc, tuple(replace(a, sqnr_db=a.sqnr_db - 1.5) for a in held_acc))
    assert len(note) == 1 and f"{held_acc[0].sqnr_db - 1.5:.1f} dB" in note[0] and "VNNI" in note[0]
    assert _host_kernels_note(held_acc, tuple(replace(a, sqnr_db=a.sqnr_db - 0.5) for a in held_acc)) == ()


def test_each_pass_before_the_quantizer_is_switched_by_its_flag_and_reported(cnn, tmp_path):
    """AdaRound, cross-layer equalization, the ranges' method and bias correction: on by flag, each says what it
    did in ``passes``; off by flag, each says so (or is absent), and the written weights differ."""
    images = np.random.default_rng(7).standard_normal((16, 3, 32, 32)).astype(np.float32)
    data = _npz(tmp_path / "cal.npz", x=images)
    common = {"calibration": data, "latency": False, "per_node": False, "min_sqnr": 0.0, "search_limit": 0}
    on = portable.quantize(cnn, tmp_path / "on.onnx", adaround=True, equalization=True, method="mse", **common)
    off = portable.quantize(cnn, tmp_path / "off.onnx", adaround=False, equalization=False, method="minmax",
                            bias_correction=False, **common)
    assert on.passes["adaround"]["applied"] and on.passes["adaround"]["layers"] >= 3, on.passes["adaround"]
    assert on.passes["equalization"]["applied"] and on.passes["equalization"]["pairs"] >= 1, on.passes["equalization"]
    assert on.passes["ranges"]["method"] == "mse" and on.passes["ranges"]["tensors"] > 0
    assert "bias_correction" in on.passes  # its effect: test_trained.py
    assert off.passes["adaround"] == {"applied": False, "by": "--no-adaround"}
    assert off.passes["equalization"] == {"applied": False, "by": "--no-equalization"}
    assert off.passes["ranges"]["method"] == "minmax" and "bias_correction" not in off.passes
    weights = [_initializers(onnx.load(str(r.path))) for r in (on, off)]
    assert any(not np.array_equal(weights[0][k], weights[1][k]) for k in weights[0] if k.endswith("_quantized"))


def _output_range(path: Path) -> tuple[float, float]:
    """The real range of the graph output's QuantizeLinear (scale and zero point of the written file)."""
    model = onnx.load(str(path))
    made = {o: n for n in model.graph.node for o in n.output}
    quantize = made[made[model.graph.output[0].name].input[0]]
    tables = _initializers(model)
    scale, zero = (float(tables[quantize.input[i]]) for i in (1, 2))
    return (0 - zero) * scale, (255 - zero) * scale


def test_the_logits_output_keeps_headroom_by_default_and_the_flag_turns_it_off(cnn, tmp_path):
    """The CNN's [batch, 10] head is judged as logits: its range is the calibrated one with the top doubled, named
    in ``passes``; ``logits_headroom=False`` leaves it as the ranges' method gives it; scope "linear" leaves the
    head's output float, and no headroom is named (its effect on a trained classifier: test_passes_trained.py)."""
    images = np.random.default_rng(7).standard_normal((16, 3, 32, 32)).astype(np.float32)
    data = _npz(tmp_path / "cal.npz", x=images)
    common = {"calibration": data, "latency": False, "per_node": False, "min_sqnr": 0.0, "search_limit": 0,
              "method": "mse", "adaround": False, "equalization": False}
    on = portable.quantize(cnn, tmp_path / "on.onnx", **common)
    off = portable.quantize(cnn, tmp_path / "off.onnx", logits_headroom=False, **common)
    name = onnx.load(str(cnn)).graph.output[0].name
    widened = on.passes["ranges"]["logits_headroom"]["outputs"]
    assert list(widened) == [name] and on.settings.to_dict()["logits_outputs"] == [name], on.passes["ranges"]
    assert off.passes["ranges"]["logits_headroom"]["outputs"] == {} and not off.settings.logits_headroom
    high_on, high_off = _output_range(on.path)[1], _output_range(off.path)[1]
    assert high_on == pytest.approx(widened[name][1], rel=0.02) and high_on > 1.8 * high_off, (high_on, high_off)
    linear = portable.quantize(cnn, tmp_path / "linear.onnx", scope="linear", **common)  # the head's output float
    assert linear.passes["ranges"]["logits_headroom"]["outputs"] == {}, linear.passes["ranges"]
