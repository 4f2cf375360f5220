"""Cross-layer equalization and the nodes kept float: on a three-layer Conv -> Clip(0, 6) CNN, whose Clips CLE
rewrites as Relu then a per-channel Min, the names the user and the precision search give are those of the user's
own file, and ``passes`` says why a pass did not run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _conv(rng: np.random.Generator, out: int, inp: int, spread: float) -> np.ndarray:
    """He-initialised weights whose output channels' ranges differ by up to ``spread`` (what CLE evens out)."""
    weights = rng.standard_normal((out, inp, 3, 3)) * np.sqrt(2.0 / (inp * 9))
    return (weights * np.geomspace(1.0 / spread, 1.0, out)[rng.permutation(out), None, None, None]).astype(np.float32)


def _cnn() -> onnx.ModelProto:
    """x [N, 3, 16, 16] -> Conv_0 -> Clip_0 -> Conv_1 -> Clip_1 -> Conv_2 -> y [N, 4, 16, 16]."""
    rng = np.random.default_rng(3)
    widths = (3, 8, 8, 4)
    tables, nodes, tensor = [], [], "x"
    for i in range(3):
        w = _conv(rng, widths[i + 1], widths[i], 20.0 if i < 2 else 1.0)
        tables += [numpy_helper.from_array(w, f"w{i}"),
                   numpy_helper.from_array((0.1 * rng.standard_normal(widths[i + 1])).astype(np.float32), f"b{i}")]
        out = "y" if i == 2 else f"conv{i}"
        nodes.append(helper.make_node("Conv", [tensor, f"w{i}", f"b{i}"], [out], name=f"Conv_{i}", pads=[1, 1, 1, 1]))
        if i < 2:
            nodes.append(helper.make_node("Clip", [out, "zero", "six"], [f"act{i}"], name=f"Clip_{i}"))
            tensor = f"act{i}"
    tables += [numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
               numpy_helper.from_array(np.array(6.0, np.float32), "six")]
    graph = helper.make_graph(nodes, "cle_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 16, 16])], tables)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The model, 32 calibration and 16 held-out images of the user's (.npz files, not portable's seeded data)."""
    folder = tmp_path_factory.mktemp("cle")
    onnx.save(_cnn(), str(folder / "m.onnx"))
    images = np.random.default_rng(11).uniform(-1.0, 1.0, (48, 3, 16, 16)).astype(np.float32)
    np.savez(folder / "cal.npz", x=images[:32])
    np.savez(folder / "held.npz", x=images[32:])
    return folder / "m.onnx", folder / "cal.npz", folder / "held.npz"


def _quantize(cli, files, out: Path, *flags: str):
    model, cal, held = files
    result = cli("quantize", str(model), "-o", str(out), "--calibration", str(cal), "--eval", str(held),
                 "--no-latency", "--format", "json", *flags)
    return result



def _report(result) -> dict:
    return json.loads(result.output[:result.output.rindex("}") + 1])


def _nodes(path: Path) -> dict[str, str]:
    """The int8 file's nodes but its Q/DQ pairs: name -> op type (ONNX Runtime folds an int8 Clip into them)."""
    return {n.name: n.op_type for n in onnx.load(str(path)).graph.node
            if n.op_type not in ("QuantizeLinear", "DequantizeLinear")}


def test_the_precision_search_keeps_float_only_nodes_of_the_users_file(cli, files, tmp_path):
    """A budget no trial meets: the search tries the Convs, then a capped Clip (its Min, named as the Clip was), and
    refuses with exit 1; it used to try CLE's ``Clip_1_cap``, which the file has not: exit 2 for an --exclude the
    user never gave."""
    result = _quantize(cli, files, tmp_path / "q.onnx", "--equalization", "--min-sqnr", "200", "--search-limit", "4")
    assert result.exit_code == 1, result.output[-600:]
    report = _report(result)
    assert report["passes"]["equalization"]["per_channel_caps"] == 2, report["passes"]
    names = {n.name for n in onnx.load(str(files[0])).graph.node}
    tried = report["precision_search"]["tried_float"]
    assert set(tried) <= names and len(tried) == 4 and any(t.startswith("Clip_") for t in tried), tried


def test_an_excluded_clip_keeps_its_pair_unequalized_and_float(cli, files, tmp_path):
    """``--exclude node:Clip_0`` leaves the pair around Clip_0 as it is (the Clip kept float survives in the int8
    file; an int8 one is folded into its Q/DQ) while the other pair is equalized; ``--exclude Clip`` is read
    against the user's file, which has Clips (it was refused: the equalized model's op types are Conv, Min, Relu)."""
    one = _quantize(cli, files, tmp_path / "one.onnx", "--equalization", "--exclude", "node:Clip_0",
                    "--min-sqnr", "0", "--search-limit", "0")
    assert one.exit_code == 0, one.output[-600:]
    assert _report(one)["passes"]["equalization"]["pairs"] == 1
    assert _nodes(tmp_path / "one.onnx") == {"Conv_0": "Conv", "Clip_0": "Clip", "Conv_1": "Conv", "Clip_1": "Min",
                                             "Conv_2": "Conv"}
    both = _quantize(cli, files, tmp_path / "both.onnx", "--equalization", "--exclude", "Clip",
                     "--min-sqnr", "0", "--search-limit", "0")
    assert both.exit_code == 0, both.output[-600:]
    assert [op for op in _nodes(tmp_path / "both.onnx").values()] == ["Conv", "Clip", "Conv", "Clip", "Conv"]


def test_on_seeded_data_passes_give_the_true_reason_and_no_flag_the_user_did_not_give(files, tmp_path):
    import portable

    result = portable.quantize(files[0], tmp_path / "s.onnx", samples=8, eval_samples=8, latency=False,
                               per_node=False, min_sqnr=0.0, search_limit=0)
    assert result.passes["equalization"] == {"applied": False, "by": "seeded calibration data (random inputs)"}
    assert result.passes["adaround"] == {"applied": False, "by": "off by default (--adaround)"}, result.passes
