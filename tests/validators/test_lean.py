"""The lean parse gives the findings of a full in-memory validation, on every model we have.

"Full" is the reference: ``onnx.ModelProto.ParseFromString`` of the whole file, then
``validate_proto``. "Lean" is ``validate(path)``, which memory-maps the file and leaves
large initializer payloads in it (``portable.validators.lean``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from support import rule_fixtures, save

from portable.policy import Policy
from portable.validators import validate, validate_bytes, validate_held, validate_proto
from portable.validators.lean import LEAN_MIN_ELEMENTS
from portable.validators.loading import load_model_file
from portable.validators.wire import encode_varint, key, len_field, splice_payloads

ALL_RULES = Policy(ort=True)  # PORT014 too: it needs every weight back


def _full(path: Path, policy: Policy):
    data = path.read_bytes()
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    return validate_proto(proto, str(path), policy, len(data))


def _held(path: Path, policy: Policy):
    """``path``'s model validated as an exporter holds it before writing: its large payloads cut out
    of the proto, the file's bytes as pieces around them (``validate_held``)."""
    proto = onnx.ModelProto()
    proto.ParseFromString(path.read_bytes())
    whole = proto.SerializeToString(deterministic=True)
    payloads = {}
    for index, tensor in enumerate(proto.graph.initializer):
        if tensor.HasField("raw_data") and math.prod(tensor.dims) > LEAN_MIN_ELEMENTS:
            payloads[index] = memoryview(tensor.raw_data)
            tensor.ClearField("raw_data")
    pieces = splice_payloads(proto.SerializeToString(deterministic=True), payloads)
    assert b"".join(pieces) == whole  # the splice is the inverse of cutting them out
    report = validate_held(proto, payloads, pieces, str(path), policy)
    assert report.model["size_bytes"] == len(whole)  # the canonical bytes: an odd file's own layout is gone
    return replace(report, model={**report.model, "size_bytes": path.stat().st_size})


def _same(path: Path, policy: Policy | None = None, *, in_memory: bool = True) -> list[dict]:
    """Assert lean == full on ``path`` (and, ``in_memory``, on the model an exporter validates before
    writing it: as bytes, and held as an export holds it); return the findings."""
    policy = policy or Policy()
    lean, full = validate(path, policy), _full(path, policy)
    reports = (lean, full, validate_bytes(path.read_bytes(), str(path), policy), _held(path, policy)) if in_memory \
        else (lean, full)
    for report in reports[1:]:
        assert report.error == lean.error, path
        assert report.model == lean.model, path
        assert [f.to_dict() for f in report.findings] == [f.to_dict() for f in lean.findings], path
    return [f.to_dict() for f in lean.findings]


def _stripped(path: Path) -> int:
    lean = load_model_file(path).lean
    return len(lean.stripped) if lean else 0


@pytest.mark.parametrize("rule,kind", rule_fixtures.fixture_names())
def test_rule_fixtures(tmp_path, rule, kind):
    path = save(rule_fixtures.load(rule, kind), tmp_path / f"{rule}_{kind}.onnx")
    _same(path)
    if rule == "PORT014":
        _same(path, ALL_RULES)


def test_backend_node_models(tmp_path):
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    assert len(cases) > 1500
    policy = Policy()
    for i, case in enumerate(cases):
        path = save(case.model, tmp_path / f"{i}.onnx")
        _same(path, policy, in_memory=False)
        path.unlink()


# -- models built to hit every branch of the lean path ------------------------------------------

BIG = (100, 100)  # 10,000 elements: above LEAN_MIN_ELEMENTS, so stripped
assert np.prod(BIG) > LEAN_MIN_ELEMENTS


def _model(nodes, inits, inputs=None, outputs=("y",), ir_version=10, **graph_kw) -> onnx.ModelProto:
    ins = inputs if inputs is not None else [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 100])]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs] + graph_kw.pop("output", [])
    graph = helper.make_graph(nodes, "g", ins, outs, inits, **graph_kw)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=ir_version)


def _weights(dtype=np.float32, bad=(np.nan, np.inf), name="w") -> TensorProto:
    w = np.linspace(-1, 1, np.prod(BIG)).reshape(BIG).astype(dtype)
    w.flat[: len(bad)] = bad
    return numpy_helper.from_array(w, name)


def _matmul(w: TensorProto, **kw) -> onnx.ModelProto:
    return _model([helper.make_node("MatMul", ["x", w.name], ["y"])], [w], **kw)


def _raw(tensor: TensorProto, data: bytes) -> TensorProto:
    tensor.raw_data = data
    return tensor


def _bfloat16() -> TensorProto:
    import ml_dtypes

    w = np.ones(BIG, dtype=ml_dtypes.bfloat16)
    w.flat[7] = np.inf
    return helper.make_tensor("w", TensorProto.BFLOAT16, BIG, w.tobytes(), raw=True)


def _built() -> dict[str, onnx.ModelProto]:
    shape = numpy_helper.from_array(np.ones(np.prod(BIG), np.int64), "s")  # a shape input inference reads
    small = numpy_helper.from_array(np.array([-1, 50], np.int64), "s")
    named_input = _matmul(_weights(), inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 100]),
                                              helper.make_tensor_value_info("w", TensorProto.FLOAT, BIG)])
    branch = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["b"])], "then", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    string = helper.make_tensor("w", TensorProto.STRING, BIG, [b"a"] * 10000)
    string.raw_data, _ = b"x" * 10000, string.ClearField("string_data")
    both = _weights()
    both.float_data.append(1.0)
    return {
        "nan_float32": _matmul(_weights()),
        "inf_float16": _matmul(_weights(np.float16, (np.inf,))),
        "big_float64": _matmul(_weights(np.float64, (1e300, np.nan))),
        "inf_bfloat16": _matmul(_bfloat16()),
        "finite": _matmul(_weights(bad=())),
        "reshape_from_weights": _model([helper.make_node("MatMul", ["x", "w"], ["h"]),
                                        helper.make_node("Reshape", ["h", "s"], ["y"])], [_weights(), shape]),
        "reshape_small_shape": _model([helper.make_node("MatMul", ["x", "w"], ["h"]),
                                       helper.make_node("Reshape", ["h", "s"], ["y"])], [_weights(), small]),
        "weight_is_also_input": named_input,
        "ir_version_3": _matmul(_weights(), ir_version=3),
        "raw_data_too_small": _matmul(_raw(_weights(), b"\0" * 400)),
        "raw_data_odd_length": _matmul(_raw(_weights(), b"\0" * 40001)),
        "string_in_raw_data": _matmul(string),
        "two_value_fields": _matmul(both),
        "duplicate_names": _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_weights(), _weights(bad=())]),
        "negative_dims": _matmul(helper.make_tensor("w", TensorProto.FLOAT, (-100, -100), b"\0" * 40000, raw=True)),
        "used_in_subgraph": _model([helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
                                   [_weights()], inputs=[cond, helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                             ["N", 100])]),
        "consumed_by_custom_op": _model([helper.make_node("Mystery", ["x", "w"], ["y"], domain="my")], [_weights()]),
        "value_info_agrees": _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_weights(bad=())],
                                    outputs=(), output=[_info("y", ["N", 100])], value_info=[_info("w", BIG)]),
        "value_info_disagrees": _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_weights(bad=())],
                                       outputs=(), output=[_info("y", ["N", 100])], value_info=[_info("w", (100, 50))]),
    }


def _info(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


@pytest.mark.parametrize("name", sorted(_built()))
def test_built_models(tmp_path, name):
    path = save(_built()[name], tmp_path / f"{name}.onnx")
    assert _stripped(path) >= 1
    _same(path)
    _same(path, ALL_RULES)


@pytest.mark.parametrize("name,moved", [("value_info_agrees", True), ("value_info_disagrees", False)])
def test_checker_moves_a_weight_whose_value_info_agrees(tmp_path, name, moved):
    """Exporters write a ``value_info`` for every initializer: one that states the tensor's own type
    lets the checker take the weight as an input (no copy of it); one that disagrees keeps it in
    place, so the checker still sees the clash and the lean verdict is the full one."""
    from portable.validators.context import ModelContext
    from portable.validators.rules.port011_checker import _checker_model

    path = save(_built()[name], tmp_path / f"{name}.onnx")
    loaded = load_model_file(path)
    ctx = ModelContext(loaded.proto, str(path), Policy(), lean=loaded.lean)
    checked = _checker_model(ctx).graph
    assert ("w" in {v.name for v in checked.input}) is moved
    assert ("w" in {t.name for t in checked.initializer}) is not moved
    assert ("w" in {v.name for v in checked.value_info}) is not moved
    checker = [f["message"] for f in _same(path) if f["rule"] == "PORT011"]
    assert checker == ([] if moved else ["onnx.checker: [ShapeInferenceError] Inferred shape and existing shape differ "
                                         "in dimension 1: (100) vs (50)"])


def test_nan_scan_reads_stripped_weights(tmp_path):
    path = save(_built()["nan_float32"], tmp_path / "m.onnx")
    messages = [f["message"] for f in _same(path) if f["rule"] == "PORT015"]
    assert messages == ["tensor 'w' holds 2 non-finite value(s) (NaN or Inf)"]


# -- wire layouts no serializer writes, which protobuf still accepts -----------------------------

def _nan_bytes(count: int) -> bytes:
    values = np.zeros(np.prod(BIG), np.float32)
    values[:count] = np.nan
    return values.tobytes()


def _graph_bytes(tensor: bytes) -> bytes:
    model = _matmul(_weights(bad=()))
    del model.graph.initializer[:]
    return model.SerializeToString() + len_field(7, len_field(5, tensor))  # a second `graph`: merged


def _tensor_head() -> bytes:
    return TensorProto(name="w", data_type=TensorProto.FLOAT, dims=BIG).SerializeToString()


@pytest.mark.parametrize("layout", ["raw_data_first", "raw_data_twice", "graph_twice", "unpacked_dims"])
def test_unusual_wire_layouts(tmp_path, layout):
    head = _tensor_head()
    if layout == "raw_data_first":
        tensor = len_field(9, _nan_bytes(3)) + head
    elif layout == "raw_data_twice":  # protobuf keeps the last one
        tensor = head + len_field(9, _nan_bytes(1)) + len_field(9, _nan_bytes(5))
    elif layout == "unpacked_dims":
        t = TensorProto(name="w", data_type=TensorProto.FLOAT)
        tensor = t.SerializeToString() + key(1, 0) + encode_varint(100) + key(1, 0) + encode_varint(100) + len_field(9, _nan_bytes(4))
    else:
        tensor = head + len_field(9, _nan_bytes(2))
    path = tmp_path / f"{layout}.onnx"
    path.write_bytes(_graph_bytes(tensor))
    assert _stripped(path) == 1
    findings = _same(path)
    assert any(f["rule"] == "PORT015" for f in findings)


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.999, -1])
def test_truncated_large_model_fails_as_a_full_parse_does(tmp_path, cut):
    data = _matmul(_weights()).SerializeToString()
    n = int(len(data) * cut) if isinstance(cut, float) else len(data) + cut
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[:n])
    lean = validate(path)
    reference = _full_or_error(path)
    assert lean.exit_code in (1, 3)
    if isinstance(reference, str):
        assert lean.error == reference
    else:
        assert [f.to_dict() for f in lean.findings] == [f.to_dict() for f in reference.findings]


def _full_or_error(path: Path):
    from portable.errors import InputError

    try:
        load_model_file(path, lean=False)
    except InputError as exc:
        return exc.message
    return _full(path, Policy())
