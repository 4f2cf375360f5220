"""``portable fix`` on large weights: read from the mapped file and written from there, no copy,
the same model as a whole read gives."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

from portable.exporters.fingerprint import fingerprint
from portable.repair import fix
from portable.repair.run import _load
from portable.validators.lean import LEAN_MIN_ELEMENTS

SHAPE = (128, 100)  # 12,800 elements: above LEAN_MIN_ELEMENTS
assert np.prod(SHAPE) > LEAN_MIN_ELEMENTS


def _raw(name: str, data_type: int, array: np.ndarray, **fields) -> TensorProto:
    tensor = helper.make_tensor(name, data_type, array.shape, array.tobytes(), raw=True)
    for key, value in fields.items():
        setattr(tensor, key, value)
    return tensor


def _weights(rng: np.random.Generator) -> list[TensorProto]:
    grid = rng.standard_normal(SHAPE).astype(np.float32)
    weight = numpy_helper.from_array(grid, "w")
    weight.doc_string = "kept"
    weight.metadata_props.add(key="k", value="v")
    nibbles = rng.integers(0, 256, size=SHAPE[0] * SHAPE[1] // 2, dtype=np.uint8)  # int4, two to a byte
    int4 = helper.make_tensor("w_int4", TensorProto.INT4, SHAPE, nibbles.tobytes(), raw=True)
    return [weight, numpy_helper.from_array(grid.astype(np.float16), "w_half"),
            _raw("w_bf16", TensorProto.BFLOAT16, grid.astype(ml_dtypes.bfloat16)),
            numpy_helper.from_array((grid * 100).astype(np.int64), "w_long"),
            numpy_helper.from_array(grid > 0, "w_bool"), int4,
            numpy_helper.from_array(grid[:1, :8], "w_small")]


def _runnable(path: Path) -> Path:
    """y = x @ w + float(half(x) @ w_half): two large weights of two types, neither foldable."""
    rng = np.random.default_rng(0)
    weights = _weights(rng)[:2]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]),
             helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
             helper.make_node("MatMul", ["xh", "w_half"], ["bh"]),
             helper.make_node("Cast", ["bh"], ["b"], to=TensorProto.FLOAT), helper.make_node("Add", ["a", "b"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", SHAPE[0]])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", SHAPE[1]])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10), path)
    return path


def test_large_weights_load_as_arrays_over_the_file(tmp_path):
    rng = np.random.default_rng(1)
    weights = _weights(rng)
    graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                                            for t in weights], weights)
    path = tmp_path / "weights.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10), path)
    model = _load(SimpleNamespace(source=path))
    # each weight serializes back to the file's own tensor (metadata_props once: onnx-ir 1.1 writes a
    # TensorProtoTensor's twice, so a whole read is no reference for that field)
    assert [t.SerializeToString(deterministic=True) for t in ir.to_proto(model).graph.initializer] == \
        [t.SerializeToString(deterministic=True) for t in onnx.load(path).graph.initializer]
    mapped = {name for name, v in model.graph.initializers.items()
              if isinstance(v.const_value, ir.Tensor) and not v.const_value.numpy().flags.owndata
              and not v.const_value.numpy().flags.writeable}
    assert mapped == {"w", "w_half", "w_bf16", "w_long", "w_bool"}  # int4: packed, parsed whole; small: kept


def test_fix_writes_large_weights_unchanged(tmp_path):
    source = _runnable(tmp_path / "model.onnx")
    out = tmp_path / "fixed.onnx"
    result = fix(source, out)
    assert result.ok and result.written and result.proof is not None and result.proof.ok
    assert result.proof.max_abs_diff == 0.0
    before, after = onnx.load(source), onnx.load(out)
    expected = {t.name: numpy_helper.to_array(t) for t in before.graph.initializer}
    got = {t.name: numpy_helper.to_array(t) for t in after.graph.initializer}
    assert expected.keys() == got.keys()
    assert all(np.array_equal(expected[k].view(np.uint8), got[k].view(np.uint8)) for k in expected)
    assert fingerprint(after) == result.fingerprint
