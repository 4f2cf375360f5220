"""``portable fix`` through the cli fixture: exit codes 0/1/2/3, messages, and the JSON schema."""

from __future__ import annotations

import json

import jsonschema
import onnx
import pytest
from referencing import Registry, Resource
from support import ROOT, fix_fixtures

SCHEMAS = ROOT / "portable" / "schemas"


models = fix_fixtures


@pytest.fixture
def run(cli):
    """``portable fix ARGS`` through the cli fixture."""

    def invoke(*args: str):
        return cli("fix", *args)

    return invoke


def _check_schema(data: dict) -> None:
    resources = [(s["$id"], Resource.from_contents(s)) for s in
                 (json.loads((SCHEMAS / n).read_text()) for n in ("report.schema.json", "fix.schema.json"))]
    registry = Registry().with_resources(resources)
    schema = json.loads((SCHEMAS / "fix.schema.json").read_text())
    jsonschema.Draft202012Validator(schema, registry=registry).validate(data)


def test_portable_model_exits_0_with_the_table_and_no_stderr(tmp_path, run):
    out = tmp_path / "out.onnx"
    result = run(str(models.write("opset13", tmp_path)), "-o", str(out), "-q")
    assert result.exit_code == 0 and result.stderr == "" and out.is_file()
    result = run(str(models.write("opset13", tmp_path)), "-o", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert "opset                    applied" in result.stdout and "13 -> 18" in result.stdout
    assert "proof: holds at batch 1, 3" in result.stdout and "honours the contract" in result.stdout


def test_remaining_findings_exit_1_and_name_node_and_hint(tmp_path, run):
    result = run(str(models.write("control_flow", tmp_path)), "-o", str(tmp_path / "out.onnx"))
    assert result.exit_code == 1
    assert "not fixable automatically (1)" in result.stdout and "PORT004" in result.stdout
    assert "(If)" in result.stdout and "fix: compute both branches" in result.stdout
    assert (tmp_path / "out.onnx").is_file()


def test_strict_exits_1_and_writes_nothing(tmp_path, run):
    result = run(str(models.write("control_flow", tmp_path)), "-o", str(tmp_path / "out.onnx"), "--strict")
    assert result.exit_code == 1 and not (tmp_path / "out.onnx").exists()
    assert "nothing written" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--batch", "0"], "bad --batch '0'"),
    (["--dim", "T"], "--dim 'T': expected NAME=SIZE"),
    (["--dim", "Q=3"], "--dim Q: no such symbolic dim"),
    (["--select", "PORTX"], "bad rule id"),
])
def test_usage_errors_exit_2(tmp_path, args, message, run):
    result = run(str(models.write("named_dims", tmp_path)), "-o", str(tmp_path / "out.onnx"), *args)
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "out.onnx").exists()


def test_existing_output_needs_force(tmp_path, run):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"keep")
    result = run(str(models.write("opset13", tmp_path)), "-o", str(out))
    assert result.exit_code == 2 and "file exists; pass --force" in result.stderr and out.read_bytes() == b"keep"


def test_unreadable_model_exits_3(tmp_path, run):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model at all")
    result = run(str(bad), "-o", str(tmp_path / "out.onnx"))
    assert result.exit_code == 3 and "bad.onnx: not a valid ONNX model" in result.stderr
    assert "Traceback" not in result.output


def test_original_whose_custom_op_cannot_load_exits_1_unless_no_verify(tmp_path, run):
    source = tmp_path / "custom.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 18, "com.acme" : 1]>
g (float[batch, 4] x) => (float[batch, 4] y) { y = com.acme.Swish(x) }""").SerializeToString())
    out = tmp_path / "out.onnx"
    result = run(str(source), "-o", str(out))
    assert result.exit_code == 1 and "so no proof can run" in result.stderr and not out.exists()
    result = run(str(source), "-o", str(out), "--no-verify")
    assert result.exit_code == 1 and out.exists() and "PORT002" in result.stdout


def test_json_output_validates_against_the_schema(tmp_path, run):
    result = run(str(models.write("external", tmp_path)), "-o", str(tmp_path / "out.onnx"), "--format", "json")
    assert result.exit_code == 0 and result.stderr == ""
    data = json.loads(result.stdout)
    _check_schema(data)
    assert data["bytes_internalized"] == 64 and data["written"] and data["proof"]["ok"]


def test_json_of_a_refusal_validates_too(tmp_path, run):
    source = models.write_external(tmp_path / "m" / "m.onnx", "../w.bin", tmp_path / "w.bin")
    result = run(str(source), "-o", str(tmp_path / "out.onnx"), "--format", "json")
    assert result.exit_code == 1 and "not a plain relative path" in result.stderr
    data = json.loads(result.stdout)
    _check_schema(data)
    internalize = next(r for r in data["remedies"] if r["name"] == "internalize")
    assert data["written"] is False and internalize["status"] == "refused"


def test_schema_rejects_a_bad_report(tmp_path, run):
    result = run(str(models.write("opset13", tmp_path)), "-o", str(tmp_path / "out.onnx"), "--format", "json")
    data = json.loads(result.stdout)
    data["remedies"][0]["status"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        _check_schema(data)


def test_fix_is_listed_and_its_help_names_the_exit_codes(run, cli):
    assert "fix" in cli("--help").output.split()
    assert "3 unreadable model" in " ".join(run("--help").output.split())


def test_unreadable_and_listed_paths_are_named(tmp_path, run):
    result = run(str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "out.onnx"))
    assert result.exit_code == 3 and "missing.onnx: no such file" in result.stderr


def test_inputs_npz_proves_what_random_inputs_cannot(tmp_path, run):
    import numpy as np

    source = tmp_path / "gather.onnx"
    source.write_bytes(onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 18]>
g (int64[N, 2] idx) => (float[N, 2, 2] y) <float[4, 2] table = {1, 2, 3, 4, 5, 6, 7, 8}, int64 one = {1}> {
    j = Add(idx, one)
    y = Gather<axis = 0>(table, j)
}""").SerializeToString())  # indices computed by an Add: the constraints analysis does not follow it
    out = tmp_path / "out.onnx"
    result = run(str(source), "-o", str(out), "--format", "json")
    assert result.exit_code == 3 and not out.exists()
    data = json.loads(result.stdout)
    _check_schema(data)
    assert data["proof"]["unavailable"].startswith("ONNX Runtime cannot run the original at batch 1")
    np.savez(tmp_path / "in.npz", np.array([[0, 2]], dtype=np.int64))
    result = run(str(source), "-o", str(out), "--inputs", str(tmp_path / "in.npz"))
    assert result.exit_code == 0 and "proof: holds at batch 1" in result.stdout and out.exists()
    bad = run(str(source), "-o", str(out), "--force", "--inputs", str(tmp_path / "missing.npz"))
    assert bad.exit_code == 3 and "cannot read inputs" in bad.stderr


def test_a_string_model_is_proven_and_its_json_is_strict(tmp_path, run):
    """String outputs have no numeric statistics: null in the JSON (not NaN, which is no JSON), and the
    report still validates."""
    source = tmp_path / "strings.onnx"
    source.write_bytes(onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
g (string[batch, 3] x) => (string[batch, 6] y) { y = Concat<axis: int = 1>(x, x) }""").SerializeToString())
    result = run(str(source), "-o", str(tmp_path / "out.onnx"), "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    _check_schema(data)
    (output,) = data["proof"]["comparisons"][0]["outputs"]
    assert output["dtype"] == "string" and output["passed"] and output["max_abs"] is None
    text = run(str(source), "-o", str(tmp_path / "out.onnx"), "--force")
    assert text.exit_code == 0 and "max |fixed - original| = 0" in text.stdout


def test_the_op_count_change_is_printed_and_matches_the_files(tmp_path, run):
    """As onnxslim prints it: the whole fix's change per op, from the source's nodes to the written file's."""
    from collections import Counter

    source = models.write("batch_shapes", tmp_path)
    out = tmp_path / "out.onnx"
    data = json.loads(run(str(source), "-o", str(out), "--batch", "2", "--format", "json").stdout)
    _check_schema(data)
    before = Counter(n.op_type for n in onnx.load(source).graph.node)
    after = Counter(n.op_type for n in onnx.load(out).graph.node)
    assert before != after
    assert data["ops"] == {"before": sum(before.values()), "after": sum(after.values()),
                           "changes": {op: after[op] - before[op] for op in before | after if after[op] != before[op]}}
    text = run(str(source), "-o", str(out), "--batch", "2", "--force").stdout
    assert f"ops: nodes {sum(before.values())} -> {sum(after.values())} (" in text
