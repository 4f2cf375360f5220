"""The ``rank-limit`` remedy (issue 32, item 2): a Transpose above a target's rank limit (CoreML: 5, the usability
checker's) written at the rank of its blocks, for ``fix --target coreml``; exact (pure data movement), proven by
ONNX Runtime, and counted by ONNX Runtime's own usability checker (microsoft/onnxruntime#14212: reshapes above rank
5 gave 114 CoreML partitions)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import checker_partitions

from portable.exporters.rank_rewrites import blocks
from portable.policy import Policy
from portable.repair import fix


def windows(path: Path, tail: str = "Reshape") -> Path:
    """x [1, 8, 8, 4] -> Relu -> Reshape [1, 2, 4, 2, 4, 4] -> Transpose [0, 1, 3, 2, 4, 5] (a window partition) ->
    Reshape [4, 4, 4, 4] -> Relu; with ``tail`` Relu, the rank-6 transpose's output is used as it is."""
    inits = [numpy_helper.from_array(np.array([1, 2, 4, 2, 4, 4], np.int64), "six"),
             numpy_helper.from_array(np.array([4, 4, 4, 4], np.int64), "four")]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "six"], ["s"], name="split"),
             helper.make_node("Transpose", ["s"], ["t"], perm=[0, 1, 3, 2, 4, 5], name="windows")]
    if tail == "Reshape":
        nodes += [helper.make_node("Reshape", ["t", "four"], ["w"], name="merge"), helper.make_node("Relu", ["w"], ["y"])]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4, 4, 4])
    else:
        nodes += [helper.make_node("Relu", ["t"], ["y"], name="after")]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 4, 4, 4])
    graph = helper.make_graph(nodes, "windows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 4])],
                              [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_fix_target_coreml_brings_the_window_partition_to_one_coreml_partition_exactly(tmp_path: Path) -> None:
    source = windows(tmp_path / "in.onnx")
    assert checker_partitions(source) > 1  # the rank-6 nodes leave CoreML: the old fix left it so
    result = fix(source, tmp_path / "out.onnx", policy=Policy(targets=("coreml",)))
    assert result.proof is not None and result.proof.ok and result.proof.max_abs_diff == 0
    assert checker_partitions(tmp_path / "out.onnx") == 1
    fixed = onnx.load(tmp_path / "out.onnx")
    assert [list(n.attribute[0].ints) for n in fixed.graph.node if n.op_type == "Transpose"] == [[0, 2, 1, 3]]
    x = np.random.default_rng(0).normal(size=(1, 8, 8, 4)).astype(np.float32)
    assert np.array_equal(_run(source, x), _run(tmp_path / "out.onnx", x))
    remedy = next(r for r in result.remedies if r.name == "rank-limit")
    assert remedy.status == "applied" and "1 Transpose(s) above rank 5" in remedy.detail


def test_the_rewrite_is_off_without_a_target_that_limits_rank(tmp_path: Path) -> None:
    result = fix(windows(tmp_path / "in.onnx"), tmp_path / "out.onnx", policy=Policy(targets=("ort-cpu",)))
    assert next(r for r in result.remedies if r.name == "rank-limit").status == "skipped"


def test_a_transpose_whose_rank_6_output_is_used_as_it_is_is_left_and_named(tmp_path: Path) -> None:
    result = fix(windows(tmp_path / "in.onnx", tail="Relu"), tmp_path / "out.onnx", policy=Policy(targets=("coreml",)))
    remedy = next(r for r in result.remedies if r.name == "rank-limit")
    assert "left Transpose 'windows': its output is used other than by Reshapes" in remedy.detail


@pytest.mark.parametrize("seed", range(6))
def test_the_blocks_move_the_data_as_the_transpose_does(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.choice([1, 2, 3], size=6))
    for perm in itertools.islice(itertools.permutations(range(6)), seed * 97, seed * 97 + 40):
        x = rng.normal(size=shape)
        merged, new_perm = blocks(shape, perm)
        assert np.array_equal(x.transpose(perm).ravel(), x.reshape(merged).transpose(new_perm).ravel()), (shape, perm)
