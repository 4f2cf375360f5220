"""``portable.fix``: each remedy on a minimal bad model (fails before, converted, proven, passes after),
refusals that write nothing, and what no remedy addresses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import fix_fixtures

from portable.errors import ExitCode, FindingsError, UsageError
from portable.policy import Policy
from portable.repair import REMEDIES, FixFailed, Remedy, fix
from portable.repair import run as fix_run
from portable.validators import validate

models = fix_fixtures


def _failing(path: Path) -> set[str]:
    return {f.rule_id for f in validate(path).failing()}


# fixture -> (the rule it fails before fix, the remedy that must apply, fix keyword arguments)
CASES = {
    "opset13": ("PORT001", "opset", {}),
    "functions": ("PORT002", "inline-functions", {}),
    "batch_shapes": ("PORT007", "fold-constants", {}),
    "named_dims": ("PORT008", "dims", {"dims": {"T": 5}}),
    "lost_dims": ("PORT008", "static-shapes", {}),
    "external": ("PORT010", "internalize", {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_remedy_converts_and_proves(name, tmp_path):
    rule, remedy, kwargs = CASES[name]
    source = models.write(name, tmp_path / "in")
    assert rule in _failing(source)  # the fixture is bad in the way it claims
    out = tmp_path / "out" / f"{name}.onnx"
    out.parent.mkdir()
    result = fix(source, out, **kwargs)
    statuses = {r.name: r.status for r in result.remedies}
    assert statuses[remedy] == "applied", result.remedies
    assert "failed" not in statuses.values(), result.remedies  # a library pass that crashed is skipped
    assert result.ok and result.exit_code == ExitCode.OK and result.written
    assert result.proof is not None and result.proof.ok
    assert result.proof.batches == ((2,) if name == "batch_shapes" else (1, 3))  # that one is static, at batch 2
    assert all(o["passed"] and o["elements"] > 0 for c in result.proof.comparisons for o in c["outputs"])
    assert _failing(out) == set()
    manifest = json.loads(result.manifest_path.read_text())
    assert manifest["fingerprint"] == result.fingerprint and manifest["schema"] == "portable.export/1"
    assert manifest["parity"]["ok"] and manifest["fix"]["remedies"] == [r.to_dict() for r in result.remedies]
    stamped = {p.key: p.value for p in onnx.load(out, load_external_data=False).metadata_props}
    assert stamped["portable.fingerprint"] == result.fingerprint


def test_opset_conversion_reports_versions_and_proof_is_nontrivial(tmp_path):
    result = fix(models.write("opset13", tmp_path), tmp_path / "out.onnx")
    assert (result.opset_before, result.opset_after) == (13, 18)
    assert result.dims_fixed == {"N": "batch"}
    fixed = onnx.load(tmp_path / "out.onnx")
    assert fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    outputs = result.proof.comparisons[0]["outputs"]
    assert outputs[0]["cosine"] == pytest.approx(1.0) and outputs[0]["max_abs"] == 0.0


def test_lost_dims_are_written_and_reported(tmp_path):
    result = fix(models.write("lost_dims", tmp_path), tmp_path / "out.onnx")
    static = next(r for r in result.remedies if r.name == "static-shapes")
    assert static.detail == "output 'y' [unk__0, unk__1] -> [batch, 4]"


def test_batch_fixed_to_an_integer(tmp_path):
    result = fix(models.write("opset13", tmp_path), tmp_path / "out.onnx", batch=4)
    assert result.ok and result.proof.batches == (4,) and result.dims_fixed == {"N": 4}
    shape = onnx.load(tmp_path / "out.onnx").graph.output[0].type.tensor_type.shape
    assert [d.dim_value for d in shape.dim] == [4, 4]


def test_external_data_is_internalized(tmp_path):
    source = models.write("external", tmp_path / "in")
    result = fix(source, tmp_path / "out.onnx")
    assert result.bytes_internalized == 64
    fixed = onnx.load(tmp_path / "out.onnx", load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in fixed.graph.initializer)


class _ScaleWeights(ir.passes.InPlacePass):
    """A 'remedy' that changes numerics: every float initializer times 1.01."""

    def call(self, model):
        for value in model.graph.initializers.values():
            array = value.const_value.numpy()
            if array.dtype == np.float32:
                value.const_value = ir.tensor(array * np.float32(1.01), name=value.name)
        return ir.passes.PassResult(model, modified=True)


def _inject(monkeypatch, remedy: Remedy) -> None:
    monkeypatch.setattr(fix_run, "REMEDIES", (*REMEDIES, remedy))


def test_a_remedy_that_changes_numerics_is_refused_and_the_rest_kept(tmp_path, monkeypatch):
    _inject(monkeypatch, Remedy("scale", lambda p, m: _ScaleWeights()))
    source, out = models.write("opset13", tmp_path), tmp_path / "out.onnx"
    result = fix(source, out)
    scale = next(r for r in result.remedies if r.name == "scale")
    assert scale.status == "refused"
    assert scale.detail.startswith("changes what the model computes: batch 1: output 'y' differs by up to")
    assert result.ok and result.proof.ok and result.opset_after == 18  # the other remedies still apply
    weights = onnx.numpy_helper.to_array(onnx.load(out).graph.initializer[0])
    original = onnx.numpy_helper.to_array(onnx.load(source).graph.initializer[0])
    assert np.array_equal(weights, original)


def test_a_proof_that_fails_whatever_is_refused_writes_nothing(tmp_path, monkeypatch):
    from portable.repair.proof import Proof

    failing, real = Proof(False, (1,), 0.5, "batch 1: output 'y' differs by up to 0.5"), fix_run.prove
    # the staged file fails (each remedy alone, and the unchanged copy, proven from bytes, pass): nothing is isolated
    monkeypatch.setattr(fix_run, "prove", lambda source, data, *a, **k:
                        failing if isinstance(data, Path) else real(source, data, *a, **k))
    out = tmp_path / "out.onnx"
    with pytest.raises(FixFailed, match=r"the proof failed: batch 1: output 'y' differs by up to 0.5; nothing") as caught:
        fix(models.write("lost_dims", tmp_path), out)
    assert caught.value.exit_code == ExitCode.FINDINGS
    assert not out.exists() and not out.with_name("out.onnx.json").exists()


def test_without_the_injected_change_the_same_model_is_proven(tmp_path):
    assert fix(models.write("lost_dims", tmp_path), tmp_path / "out.onnx").proof.ok


def _external(tmp_path: Path, location: str, data_path: Path | None = None) -> Path:
    return models.write_external(tmp_path / "model" / "m.onnx", location, data_path)


@pytest.mark.parametrize("case", ["dotdot", "absolute", "link", "fifo"])
def test_external_data_outside_the_folder_is_refused(tmp_path, case):
    outside = tmp_path / "outside.bin"
    if case == "dotdot":
        source = _external(tmp_path, "../outside.bin", outside)
        why = "not a plain relative path"
    elif case == "absolute":
        source = _external(tmp_path, str(outside), outside)
        why = "not a plain relative path"
    elif case == "link":
        source = _external(tmp_path, "w.bin")
        outside.write_bytes((tmp_path / "model" / "w.bin").read_bytes())
        (tmp_path / "model" / "w.bin").unlink()
        os.symlink(outside, tmp_path / "model" / "w.bin")
        why = "links outside the model's folder"
    else:
        source = _external(tmp_path, "w.bin")
        (tmp_path / "model" / "w.bin").unlink()
        os.mkfifo(tmp_path / "model" / "w.bin")
        why = "not a regular file"
    out = tmp_path / "out.onnx"
    with pytest.raises(FixFailed, match=why) as caught:
        fix(source, out)
    assert caught.value.exit_code == ExitCode.FINDINGS and not out.exists()
    assert "tensor 'w'" in str(caught.value)


def test_external_data_in_the_folder_through_a_link_inside_is_read(tmp_path):
    source = _external(tmp_path, "w.bin")
    (tmp_path / "model" / "w.bin").rename(tmp_path / "model" / "real.bin")
    os.symlink("real.bin", tmp_path / "model" / "w.bin")
    assert fix(source, tmp_path / "out.onnx").ok


def test_beyond_the_size_limit_after_internalizing_is_refused(tmp_path):
    out = tmp_path / "out.onnx"
    with pytest.raises(FixFailed, match=r"64 bytes: inline, the model would pass the size limit of 32 bytes"):
        fix(_external(tmp_path, "w.bin"), out, policy=Policy(max_size_bytes=32))
    assert not out.exists()


def test_inline_weights_beyond_the_size_limit_are_refused(tmp_path):
    out = tmp_path / "out.onnx"
    with pytest.raises(FindingsError, match="above the policy's max-size"):
        fix(models.write("opset13", tmp_path), out, policy=Policy(max_size_bytes=32))
    assert not out.exists()


def test_what_no_remedy_addresses_is_listed_and_the_file_still_written(tmp_path):
    result = fix(models.write("control_flow", tmp_path), tmp_path / "out.onnx")
    assert [f.rule_id for f in result.remaining] == ["PORT004"] and result.remaining[0].hint
    assert result.written and result.exit_code == ExitCode.FINDINGS and result.proof.ok


def test_strict_writes_nothing_while_findings_remain(tmp_path):
    result = fix(models.write("control_flow", tmp_path), tmp_path / "out.onnx", strict=True)
    assert not result.written and not (tmp_path / "out.onnx").exists()
    assert result.exit_code == ExitCode.FINDINGS


def test_an_op_the_converter_cannot_carry_is_reported_not_guessed(tmp_path):
    source = tmp_path / "gridsample.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 10, opset_import: ["" : 20]>
g (float[1, 1, 4, 4] x, float[1, 2, 2, 2] grid) => (float[1, 1, 2, 2] y) { y = GridSample(x, grid) }""")
                       .SerializeToString())
    result = fix(source, tmp_path / "out.onnx")
    opset = next(r for r in result.remedies if r.name == "opset")
    assert opset.status == "refused" and "No Adapter From Version $20 for GridSample" in opset.detail
    assert "PORT001" in {f.rule_id for f in result.remaining} and result.opset_after == 20
    assert result.written and result.proof.ok


def test_an_op_newer_than_the_target_is_expanded_through_its_onnx_definition(tmp_path):
    source = tmp_path / "gelu.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 10, opset_import: ["" : 20]>
g (float[batch, 64] x) => (float[batch, 64] y) { y = Gelu<approximate = "tanh">(x) }""").SerializeToString())
    result = fix(source, tmp_path / "out.onnx")
    expand = next(r for r in result.remedies if r.name == "expand-newer-ops")
    assert expand.status == "applied" and "Gelu" not in expand.nodes_after and "Tanh" in expand.nodes_after
    assert result.ok and result.opset_after == 18 and result.proof.max_abs_diff < 1e-5
    assert all(o["elements"] == 64 * b for c, b in zip(result.proof.comparisons, (1, 3)) for o in c["outputs"])


def test_an_original_onnx_runtime_cannot_load_for_its_custom_op_is_exit_1_and_nothing_written(tmp_path):
    source = tmp_path / "custom.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 18, "com.acme" : 1]>
g (float[batch, 4] x) => (float[batch, 4] y) { y = com.acme.Swish(x) }""").SerializeToString())
    with pytest.raises(FixFailed, match=r"no kernel for here \(com.acme::Swish: PORT002") as caught:
        fix(source, tmp_path / "out.onnx")
    assert caught.value.exit_code == ExitCode.FINDINGS and not (tmp_path / "out.onnx").exists()
    assert caught.value.result.proof is not None and "cannot load the original model" in caught.value.result.proof.unavailable
    result = fix(source, tmp_path / "out.onnx", verify=False)
    assert result.written and result.proof is None and "PORT002" in {f.rule_id for f in result.remaining}


def test_an_opset_onnx_runtime_no_longer_runs_is_proven_against_the_reference_implementation(tmp_path):
    source = tmp_path / "add6.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 3, opset_import: ["" : 6]>
g (float[2, 3] x, float[2, 3] b) => (float[2, 3] y) { y = Add(x, b) }""").SerializeToString())
    result = fix(source, tmp_path / "out.onnx")
    assert result.ok and (result.opset_before, result.opset_after) == (6, 18)
    assert result.proof.original_runtime.startswith("onnx.reference (ONNX Runtime's CPU provider cannot load the original")
    assert result.proof.comparisons[0]["outputs"][0]["elements"] == 6


def test_unknown_dim_and_existing_output_are_usage_errors(tmp_path):
    source = models.write("named_dims", tmp_path)
    with pytest.raises(UsageError, match=r"--dim Q: no such symbolic dim .* \(its symbols: T, batch\)"):
        fix(source, tmp_path / "out.onnx", dims={"Q": 3})
    (tmp_path / "out.onnx").write_bytes(b"keep")
    with pytest.raises(UsageError, match="file exists"):
        fix(source, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == b"keep"


def test_two_fixes_are_byte_identical(tmp_path):
    source = models.write("batch_shapes", tmp_path)
    fix(source, tmp_path / "a.onnx")
    fix(source, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_canonical_names_only_when_asked(tmp_path):
    source = models.write("opset13", tmp_path)
    plain = fix(source, tmp_path / "plain.onnx")
    named = fix(source, tmp_path / "named.onnx", canonical_names=True)
    assert {r.name: r.status for r in plain.remedies}["canonical-names"] == "skipped"
    assert [n.name for n in onnx.load(tmp_path / "named.onnx").graph.node] == ["MatMul", "Relu", "Softmax"]
    assert named.ok and named.proof.ok


def test_two_batch_symbols_are_not_merged(tmp_path):
    source = tmp_path / "two.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 18]>
g (float[N, 4] a, float[M, 4] b) => (float[N, 4] y, float[M, 4] z) { y = Relu(a)  z = Neg(b) }""").SerializeToString())
    result = fix(source, tmp_path / "out.onnx")
    assert {r.name: r.status for r in result.remedies}["batch"] == "unchanged"
    assert "PORT008" in {f.rule_id for f in result.remaining} and result.proof.ok


def test_the_users_inputs_prove_what_random_ones_cannot(tmp_path):
    source = tmp_path / "gather.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 13]>
g (int64[N, 2] idx) => (float[N, 2, 2] y) <float[4, 2] table = {1, 2, 3, 4, 5, 6, 7, 8}, int64 one = {1}> {
    j = Add(idx, one)
    y = Gather<axis = 0>(table, j)
}""").SerializeToString())
    with pytest.raises(FixFailed, match="cannot run the original at batch 1") as caught:
        fix(source, tmp_path / "out.onnx")  # indices computed by an Add: seeded integers run past the 4 rows
    assert caught.value.exit_code == ExitCode.ERROR
    np.savez(tmp_path / "in.npz", idx=np.array([[0, 2], [2, 1], [1, 1]], dtype=np.int64))
    result = fix(source, tmp_path / "out.onnx", inputs=tmp_path / "in.npz")
    assert result.ok and result.proof.batches == (3,)
    assert result.proof.comparisons[0]["outputs"][0]["elements"] == 12


class _Noisy:
    """An original session whose every run differs (as a random op's would), or is off by a constant."""

    def __init__(self, session, random: bool) -> None:
        self.session, self.random, self.rng = session, random, np.random.default_rng(0)

    def run(self, names, feeds):
        shift = self.rng.standard_normal() if self.random else 0.5
        return [np.asarray(o) + np.float32(shift) for o in self.session.run(names, feeds)]


@pytest.mark.parametrize("random", [True, False])
def test_an_original_that_disagrees_with_itself_cannot_be_proven(tmp_path, monkeypatch, random):
    from portable.repair import proof as fix_proof

    real = fix_proof._original
    monkeypatch.setattr(fix_proof, "_original", lambda source: (_Noisy(real(source)[0], random), "onnxruntime"))
    with pytest.raises(FixFailed) as caught:
        fix(models.write("opset13", tmp_path), tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()
    if random:  # random ops: a finding of the model (exit 1, issue 26), and none of the remedies is blamed
        assert caught.value.exit_code == ExitCode.FINDINGS
        assert "the original gives different outputs on the same inputs at batch 1" in str(caught.value)
    else:  # a difference an unchanged copy shows too: no remedy is blamed, no proof is possible
        assert caught.value.exit_code == ExitCode.ERROR
        assert "an unchanged copy of the original does not reproduce its outputs" in str(caught.value)
        assert "refused" not in {r.status for r in caught.value.result.remedies}


def test_a_random_original_is_written_with_no_verify_and_port012_listed(tmp_path):
    source = tmp_path / "random.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 15]>
g (double[64] p) => (double[64] y) { y = Bernoulli(p) }""").SerializeToString())
    result = fix(source, tmp_path / "out.onnx", verify=False)
    assert result.written and "PORT012" in {f.rule_id for f in result.remaining}
