"""``portable fix`` on models with inputs of every type ONNX Runtime takes (strings, float8, int4,
0-d bool), proofs that must fail on such models, and the remedies for two gaps of the opset
converter (PRelu's slope from opset 6; attributes at their default that the older op lacks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from portable.repair import REMEDIES, fix
from portable.repair import run as fix_run
from portable.repair.proof import prove

STRINGS = """<ir_version: 8, opset_import: ["" : 17]>
g (string[batch, 3] x) => (string[batch, 6] y) { y = Concat<axis: int = 1>(x, x) }"""
# the same signature, the second half of every row permuted: what a wrong rewrite could do
STRINGS_CHANGED = """<ir_version: 8, opset_import: ["" : 18]>
g (string[batch, 3] x) => (string[batch, 6] y) {
  order = Constant<value: tensor = int64[3] {2, 0, 1}>()
  p = Gather<axis: int = 1>(x, order)
  y = Concat<axis: int = 1>(x, p)
}"""
FLOAT8 = """<ir_version: 9, opset_import: ["" : 19]>
g (float8e4m3fn[batch, 4] x, float[batch, 4] s) => (float[batch, 4] y, float8e5m2[batch, 4] z) {
  f = Cast<to: int = 1>(x)
  y = Mul(f, s)
  z = Cast<to: int = 19>(y)
}"""
INT4 = """<ir_version: 10, opset_import: ["" : 21]>
g (int4[batch, 4] x, uint4[batch, 4] u) => (float[batch, 4] y, int4[batch, 4] z) {
  a = Cast<to: int = 1>(x)
  b = Cast<to: int = 1>(u)
  y = Add(a, b)
  z = Cast<to: int = 22>(y)
}"""
BOOL_0D = """<ir_version: 8, opset_import: ["" : 17]>
g (bool flag, float[batch, 4] a) => (float[batch, 4] y) { n = Neg(a) y = Where(flag, a, n) }"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(onnx.parser.parse_model(text).SerializeToString())
    return path


@pytest.mark.parametrize(("text", "opset", "dtypes"), [
    (STRINGS, None, {"y": "string"}),
    (FLOAT8, 21, {"y": "float32", "z": "float8_e5m2"}),  # float8 exists from opset 19: 18 cannot hold it
    (INT4, 23, {"y": "float32", "z": "int4"}),  # int4 from 21
    (BOOL_0D, None, {"y": "float32"}),
], ids=["string", "float8", "int4", "bool-0d"])
def test_a_model_with_such_inputs_is_converted_and_proven_on_onnx_runtime(tmp_path, text, opset, dtypes):
    source = _write(tmp_path, "in", text)
    result = fix(source, tmp_path / "out.onnx", **({"opset": opset} if opset else {}))
    assert result.ok and result.written and result.opset_after == (opset or 18) > result.opset_before
    proof = result.proof
    assert proof.ok and proof.batches == (1, 3)
    assert proof.original_runtime == proof.fixed_runtime == "onnxruntime"  # fed through OrtValues, not the reference
    for row in proof.comparisons:
        assert {o["output"]: o["dtype"] for o in row["outputs"]} == dtypes
        assert all(o["passed"] and o["elements"] > 0 and o["beyond"] == 0 for o in row["outputs"])


def test_a_float8_model_cannot_reach_opset_18_and_says_why(tmp_path):
    result = fix(_write(tmp_path, "in", FLOAT8), tmp_path / "out.onnx")
    opset = next(r for r in result.remedies if r.name == "opset")
    assert opset.status == "refused"
    assert opset.detail.startswith("the model uses float8e4m3fn, float8e5m2, which opset 18 does not have")
    assert result.proof.ok and {f.rule_id for f in result.remaining} == {"PORT001"} and not result.ok


def _changed(text: str) -> bytes:
    return onnx.parser.parse_model(text).SerializeToString()


def test_a_fixed_string_model_that_computes_something_else_fails_the_proof(tmp_path):
    source = _write(tmp_path, "in", STRINGS)
    assert prove(source, _changed(STRINGS.replace('"" : 17', '"" : 18')), (1, 3), {}).ok  # the honest rewrite
    proof = prove(source, _changed(STRINGS_CHANGED), (1, 3), {})
    assert not proof.ok and proof.unavailable is None
    assert proof.message.startswith("batch 1: output 'y' has ")
    assert "strings unlike the original's; batch 3: output 'y' has " in proof.message


@pytest.mark.parametrize(("text", "wrong", "output"), [
    (FLOAT8, ("z = Cast<to: int = 19>(y)", "t = Add(y, y)\n  z = Cast<to: int = 19>(t)"), "z"),
    (INT4, ("z = Cast<to: int = 22>(y)", "t = Neg(y)\n  z = Cast<to: int = 22>(t)"), "z"),
], ids=["float8", "int4"])
def test_a_fixed_low_precision_model_that_computes_something_else_fails_the_proof(tmp_path, text, wrong, output):
    source = _write(tmp_path, "in", text)
    assert prove(source, _changed(text), (1, 3), {}).ok
    proof = prove(source, _changed(text.replace(*wrong)), (1, 3), {})
    assert not proof.ok and proof.unavailable is None
    assert proof.message.startswith(f"batch 1: output '{output}' differs by up to")


def test_a_0d_bool_input_that_a_rewrite_ignores_fails_the_proof(tmp_path):
    source = _write(tmp_path, "in", BOOL_0D)
    proof = prove(source, _changed(BOOL_0D.replace("y = Where(flag, a, n)", "y = Identity(a)")), (1, 3), {})
    assert not proof.ok and "output 'y' differs by up to" in proof.message


PRELU = """<ir_version: 3, opset_import: ["" : 6]>
g (float[2, 3, 4] x) => (float[2, 3, 4] y)
  <float[3] slope = {0.1, 0.5, 2.0}>
{ y = PRelu(x, slope) }"""


def test_prelu_per_channel_slopes_survive_the_6_to_7_conversion(tmp_path):
    source = _write(tmp_path, "in", PRELU)
    result = fix(source, tmp_path / "out.onnx")
    assert {r.name: r.status for r in result.remedies}["prelu-slopes"] == "applied"
    assert result.ok and result.opset_after == 18 and result.proof.ok
    assert result.proof.original_runtime.startswith("onnx.reference")  # ORT has no PRelu-6
    slope = onnx.numpy_helper.to_array(onnx.load(tmp_path / "out.onnx").graph.initializer[0])
    assert slope.shape == (3, 1) and slope.ravel().tolist() == pytest.approx([0.1, 0.5, 2.0])


def test_without_the_prelu_remedy_the_converter_changes_the_model_and_is_refused(tmp_path, monkeypatch):
    kept = tuple(r for r in REMEDIES if r.name != "prelu-slopes")
    monkeypatch.setattr(fix_run, "REMEDIES", kept)
    result = fix(_write(tmp_path, "in", PRELU), tmp_path / "out.onnx")
    opset = next(r for r in result.remedies if r.name == "opset")
    assert opset.status == "refused" and opset.detail.startswith("changes what the model computes")
    assert result.opset_after == 6 and not result.ok


CAST_SATURATE = """<ir_version: 10, opset_import: ["" : 25]>
g (float[batch, 4] x) => (float16[batch, 4] y) { y = Cast<to: int = 10, saturate: int = SAT>(x) }"""


def test_an_attribute_at_its_default_the_older_op_lacks_is_dropped(tmp_path):
    result = fix(_write(tmp_path, "in", CAST_SATURATE.replace("SAT", "1")), tmp_path / "out.onnx")
    assert {r.name: r.status for r in result.remedies}["default-attributes"] == "applied"
    assert result.ok and result.opset_after == 18 and result.proof.ok
    (node,) = onnx.load(tmp_path / "out.onnx").graph.node
    assert [a.name for a in node.attribute] == ["to"]


def test_an_attribute_away_from_its_default_stays_and_the_conversion_is_refused(tmp_path):
    result = fix(_write(tmp_path, "in", CAST_SATURATE.replace("SAT", "0")), tmp_path / "out.onnx")
    statuses = {r.name: r.status for r in result.remedies}
    assert statuses["default-attributes"] == "unchanged" and statuses["opset"] == "refused"
    assert result.opset_after == 25 and {f.rule_id for f in result.remaining} == {"PORT001"}


def test_user_inputs_of_strings_prove_the_model(tmp_path):
    source = _write(tmp_path, "in", STRINGS)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.array([["monday", "b", "c"], ["d", "e", "f"]]))
    result = fix(source, tmp_path / "out.onnx", inputs=inputs)
    assert result.ok and result.proof.batches == (2,)
    assert result.proof.comparisons[0]["outputs"][0]["elements"] == 12
