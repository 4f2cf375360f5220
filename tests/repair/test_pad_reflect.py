"""The ``pad-as-slices`` remedy (issue 32, item 2): ``Pad`` in reflect or edge mode as Slice + Concat for a target
whose table lacks it (``fix --target coreml``), exact, proven by ONNX Runtime, and counted by ONNX Runtime's own
usability checker (microsoft/onnxruntime#28022: one reflect Pad split a model into 14 CoreML partitions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import checker_partitions

from portable.exporters.target_rewrites import PadAsSlicesPass, pad_refusal
from portable.policy import Policy
from portable.repair import fix
from portable.repair.remedies import PAD_MODE_ROWS, pad_modes
from portable.validators.targets.profile import load_profile


def _conv(name: str, x: str, y: str, channels: tuple[int, int], rng: np.random.Generator) -> tuple[onnx.NodeProto, list]:
    weight = numpy_helper.from_array(rng.standard_normal((channels[1], channels[0], 3, 3)).astype(np.float32), f"{name}.w")
    bias = numpy_helper.from_array(rng.standard_normal(channels[1]).astype(np.float32), f"{name}.b")
    return helper.make_node("Conv", [x, weight.name, bias.name], [y], name=name, kernel_shape=[3, 3]), [weight, bias]


def conv_pad_conv(path: Path, pads: tuple[tuple[str, list[int]], ...] = (("reflect", [0, 0, 2, 2, 0, 0, 2, 2]),
                                                                           ("edge", [0, 0, 1, 0, 0, 0, 0, 1])),
                  shape: tuple[int | str, ...] = (1, 3, 12, 12)) -> Path:
    """x -> Conv -> (Pad(mode, pads) -> Conv) per pad: a Pad between each two convolutions."""
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    node, made = _conv("conv0", "x", "c0", (3, 4), rng)
    nodes.append(node)
    inits += made
    for k, (mode, values) in enumerate(pads):
        inits.append(numpy_helper.from_array(np.array(values, np.int64), f"pads{k}"))
        nodes.append(helper.make_node("Pad", [f"c{k}", f"pads{k}"], [f"p{k}"], name=f"pad{k}", mode=mode))
        node, made = _conv(f"conv{k + 1}", f"p{k}", "y" if k == len(pads) - 1 else f"c{k + 1}", (4, 4), rng)
        nodes.append(node)
        inits += made
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _remedy(result, name: str = "pad-as-slices"):
    return next(r for r in result.remedies if r.name == name)


def _ops(path: Path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


# -- fix --target coreml: the checker's partitions, the proof -----------------------------------------------

def test_fix_for_coreml_leaves_one_partition_where_the_pads_made_three(tmp_path: Path) -> None:
    source = conv_pad_conv(tmp_path / "in.onnx")
    assert checker_partitions(source) == 3  # Conv | Pad | Conv | Pad | Conv: the ML Program table has no Pad
    out = tmp_path / "out.onnx"
    result = fix(source, out, policy=Policy(targets=("coreml",)))
    remedy = _remedy(result)
    assert remedy.status == "applied", result.remedies
    assert "2 Pad (edge 1, reflect 1) -> Slice + Concat; partitions coreml 3 -> 1" in remedy.detail
    assert result.proof is not None and result.proof.ok and result.proof.max_abs_diff == 0 and result.written
    assert "Pad" not in _ops(out) and checker_partitions(out) == 1
    assert result.partitions["coreml"] == {"before": 3, "after": 1, "before_batch_fixed": None, "after_batch_fixed": None}
    assert {t.name: t.partitions for t in result.report.targets} == {"coreml": 1}  # validate's own estimate agrees


def test_the_remedy_is_opt_in(tmp_path: Path) -> None:
    source = conv_pad_conv(tmp_path / "in.onnx")
    result = fix(source, tmp_path / "out.onnx")
    assert _remedy(result).status == "skipped" and _ops(tmp_path / "out.onnx").count("Pad") == 2
    assert checker_partitions(tmp_path / "out.onnx") == 3 and result.partitions == {}
    other = fix(source, tmp_path / "cpu.onnx", policy=Policy(targets=("ort-cpu", "webnn")))  # Pad in every mode there
    assert _remedy(other).status == "skipped" and _ops(tmp_path / "cpu.onnx").count("Pad") == 2


def test_a_dynamic_batch_reports_the_partitions_with_the_batch_fixed(tmp_path: Path) -> None:
    source = conv_pad_conv(tmp_path / "in.onnx", shape=("batch", 3, 12, 12))
    result = fix(source, tmp_path / "out.onnx", policy=Policy(targets=("coreml",)))
    assert result.proof is not None and result.proof.ok and result.proof.max_abs_diff == 0
    assert result.partitions["coreml"] == {"before": 0, "after": 0, "before_batch_fixed": 3, "after_batch_fixed": 1}
    assert "coreml 0 -> 0 (3 -> 1 with the batch fixed)" in _remedy(result).detail


def test_fix_cli_target_coreml_reports_the_rewrite(cli, tmp_path: Path) -> None:
    source = conv_pad_conv(tmp_path / "in.onnx")
    result = cli("fix", str(source), "-o", str(tmp_path / "out.onnx"), "--target", "coreml", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    remedy = next(r for r in data["remedies"] if r["name"] == "pad-as-slices")
    assert remedy["status"] == "applied" and remedy["nodes_after"].get("Pad", 0) == 0
    assert data["partitions"]["coreml"]["before"] == 3 and data["partitions"]["coreml"]["after"] == 1


def test_a_reflection_pad_export_is_one_coreml_partition_after_fix(tmp_path: Path) -> None:
    """A real export: torch's ReflectionPad2d between two convolutions, through portable's exporter."""
    torch = pytest.importorskip("torch")
    import portable

    class ConvReflectConv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.pad, self.c2 = torch.nn.Conv2d(3, 4, 3), torch.nn.ReflectionPad2d((1, 2, 3, 1)), torch.nn.Conv2d(4, 2, 3)

        def forward(self, x):
            return self.c2(self.pad(torch.relu(self.c1(x))))

    source = tmp_path / "reflect.onnx"
    portable.export(ConvReflectConv(), (torch.randn(1, 3, 16, 16),), source, batch=1)
    assert "Pad" in _ops(source) and checker_partitions(source) == 2
    out = tmp_path / "fixed.onnx"
    result = fix(source, out, policy=Policy(targets=("coreml",)))
    assert _remedy(result).status == "applied" and result.proof is not None and result.proof.ok
    assert result.proof.max_abs_diff == 0 and checker_partitions(out) == 1


# -- exact: bit for bit, reflect and edge, one side or both, several axes --------------------------------

def _pad_model(mode: str, pads: list[int], shape: list[int], axes: list[int] | None = None,
               dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", dtype, shape)
    y = helper.make_tensor_value_info("y", dtype, [None] * len(shape))
    inits, inputs = [numpy_helper.from_array(np.array(pads, np.int64), "pads")], ["x", "pads"]
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        inputs += ["", "axes"]
    node = helper.make_node("Pad", inputs, ["y"], mode=mode, name="pad", doc_string="")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model


def _rewritten(model: onnx.ModelProto) -> onnx.ModelProto:
    result = PadAsSlicesPass({"reflect", "edge"})(ir.from_proto(model))
    assert result.modified
    proto = ir.to_proto(result.model)
    onnx.checker.check_model(proto, full_check=True)
    assert {n.op_type for n in proto.graph.node} <= {"Slice", "Concat", "Constant"}  # a Constant of the pads: dead
    return proto


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize(("pads", "shape", "axes"), [
    ([0, 0, 0, 1, 0, 0, 0, 0], [2, 3, 5, 6], None),  # one side of one axis
    ([0, 0, 2, 3, 0, 0, 1, 2], [2, 3, 5, 6], None),  # both sides of two axes
    ([0, 0, 4, 5, 0, 0, 4, 5], [1, 2, 5, 6], None),  # reflect's widest: size - 1
    ([1, 1, 0, 2, 1, 0, 0, 3], [3, 2, 4, 4], None),  # every axis
    ([2, 1, 3, 0], [1, 2, 5, 6], [-2, 3]),  # Pad-18's axes, one negative
    ([3, 2], [7], None),  # rank 1
])
def test_the_rewrite_is_bit_for_bit_the_pad(mode: str, pads: list[int], shape: list[int], axes: list[int] | None) -> None:
    model = _pad_model(mode, pads, shape, axes)
    fixed = _rewritten(model)
    rng = np.random.default_rng(len(pads) + sum(shape))
    for _ in range(3):
        x = rng.standard_normal(shape).astype(np.float32)
        expected = _run(model, x)
        assert np.array_equal(_run(fixed, x), expected)
        width = [(0, 0)] * len(shape)
        for k, axis in enumerate(range(len(shape)) if axes is None else [a % len(shape) for a in axes]):
            width[axis] = (pads[k], pads[k + len(pads) // 2])
        assert np.array_equal(expected, np.pad(x, width, mode=mode))  # ONNX's definition: numpy's


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_the_rewrite_is_exact_on_integers(mode: str) -> None:
    model = _pad_model(mode, [0, 2, 1, 1], [3, 4], dtype=TensorProto.INT64)
    x = np.arange(12, dtype=np.int64).reshape(3, 4) * 7 - 30
    assert np.array_equal(_run(_rewritten(model), x), _run(model, x))


def test_pads_from_a_constant_node_are_constant() -> None:
    model = _pad_model("edge", [0, 1, 2, 0], [3, 4])
    pads = model.graph.initializer.pop()
    model.graph.node.insert(0, helper.make_node("Constant", [], ["pads"], value=pads))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(_run(_rewritten(model), x), np.pad(x, [(0, 2), (1, 0)], mode="edge"))


def test_the_new_values_carry_static_shapes_and_the_pad_output_name() -> None:
    fixed = _rewritten(_pad_model("reflect", [0, 0, 1, 2, 0, 0, 2, 1], [1, 2, 4, 5]))
    assert fixed.graph.node[-1].output == ["y"]
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in fixed.graph.value_info}
    assert [1, 2, 7, 5] in shapes.values()  # after the first axis
    assert [d.dim_value for d in fixed.graph.output[0].type.tensor_type.shape.dim] == [0, 0, 0, 0]  # as declared


# -- what it leaves, and why ---------------------------------------------------------------------------

def _only_pad(model: onnx.ModelProto) -> ir.Node:
    return next(n for n in ir.from_proto(model).graph if n.op_type == "Pad")


@pytest.mark.parametrize(("mode", "pads", "shape", "why"), [
    ("reflect", [0, 0, 0, 5, 0, 0, 0, 0], [1, 2, 5, 5], "reflect pads 5, 0 on axis 3 reach past its size 5"),
    ("edge", [0, 0, 0, -1, 0, 0, 0, 0], [1, 2, 5, 5], "negative pads"),
    ("reflect", [0, 0, 0, 1, 0, 0, 0, 0], [1, 2, 5, "w"], "axis 3 has no static size (w)"),
    ("edge", [0, 0, 0, 0, 0, 0, 0, 0], [1, 2, 5, 5], "every pad is zero"),
])
def test_a_pad_it_cannot_rewrite_exactly_is_left_and_named(mode: str, pads: list[int], shape: list, why: str) -> None:
    model = _pad_model(mode, pads, shape)
    assert why in str(pad_refusal(_only_pad(model), 18))
    assert not PadAsSlicesPass({"reflect", "edge"})(ir.from_proto(model)).modified


def test_pads_fed_at_run_time_are_left(tmp_path: Path) -> None:
    model = _pad_model("reflect", [0, 0, 0, 1, 0, 0, 0, 1], [1, 2, 5, 5])
    del model.graph.initializer[:]
    model.graph.input.append(helper.make_tensor_value_info("pads", TensorProto.INT64, [8]))
    assert pad_refusal(_only_pad(model), 18) == "its pads are computed at run time (not a constant)"
    onnx.save(model, str(tmp_path / "in.onnx"))
    result = fix(tmp_path / "in.onnx", tmp_path / "out.onnx", policy=Policy(targets=("coreml",)), verify=False)
    remedy = _remedy(result)
    assert remedy.status == "unchanged"
    assert remedy.detail == "left Pad 'pad' (reflect): its pads are computed at run time (not a constant)"
    assert "Pad" in _ops(tmp_path / "out.onnx")


def test_fix_rewrites_what_it_can_and_names_what_it_leaves(tmp_path: Path) -> None:
    """Two Pads: one reflect past its axis (ONNX Runtime cannot run it either: unproven), one edge."""
    source = conv_pad_conv(tmp_path / "in.onnx", pads=(("reflect", [0, 0, 0, 0, 0, 0, 0, 12]),
                                                       ("edge", [0, 0, 1, 1, 0, 0, 1, 1])))
    result = fix(source, tmp_path / "out.onnx", policy=Policy(targets=("coreml",)), verify=False)
    remedy = _remedy(result)
    assert remedy.status == "applied" and remedy.detail.startswith("1 Pad (edge 1) -> Slice + Concat; partitions coreml")
    assert remedy.detail.endswith("left Pad 'pad0' (reflect): reflect pads 0, 12 on axis 3 reach past its size 10 "
                                  "(reflect needs pad < size)")
    assert _ops(tmp_path / "out.onnx").count("Pad") == 1


# -- which targets: from their profiles --------------------------------------------------------------------

def test_the_targets_come_from_their_tables() -> None:
    assert load_profile("coreml").entry("", "Pad") is None  # ONNX Runtime's ML Program table has no Pad row
    assert pad_modes(["coreml"]) == pad_modes(["nnapi"]) == {"reflect", "edge"}
    assert pad_modes(["migraphx"]) == pad_modes(["litert"]) == {"edge"}
    assert pad_modes(["ort-cpu", "ort-cuda", "webnn", "webgpu", "openvino", "tensorrt", "tract", "qnn"]) == set()
    assert pad_modes(["litert", "coreml"]) == {"reflect", "edge"}


@pytest.mark.parametrize("target", sorted(PAD_MODE_ROWS))
def test_each_quoted_row_is_its_profiles_words(target: str) -> None:
    modes, source = PAD_MODE_ROWS[target]
    entry = load_profile(target).entry("", "Pad")
    assert entry is not None and entry.supported
    assert source[source.index('"') + 1:source.rindex('"')] in entry.notes  # regenerated away: this names it
