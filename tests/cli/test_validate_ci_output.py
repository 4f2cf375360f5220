"""`portable validate` as CI sees it: one finding per problem, no "fix:" for allowed behaviour,
annotations that point at the user's files, the ruff-like switches (--statistics, --exit-zero,
the concise and GitLab formats) and `explain` without raw templates."""

from __future__ import annotations

import json

import onnx
from onnx import TensorProto, helper
from support import rule_fixtures, save

from portable.findings import Finding, Location, Severity, SourceLocation
from portable.formatters import get_formatter
from portable.policy import Policy
from portable.report import ValidationReport


def _external_model(tensors: int) -> onnx.ModelProto:
    """``tensors`` initializers, all in one external file ``model.data``, summed to one output."""
    inits, names = [], []
    for i in range(tensors):
        t = helper.make_tensor(f"w{i}", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
        t.ClearField("float_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "model.data"), ("offset", str(16 * i)), ("length", "16")):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        inits.append(t)
        names.append(f"w{i}")
    node = helper.make_node("Sum", ["x", *names], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_port010_reports_one_data_file_once(cli, tmp_path):
    path = save(_external_model(17), tmp_path / "m.onnx")
    data = json.loads(cli("validate", "--format", "json", str(path)).output)
    port010 = [f for f in data["reports"][0]["findings"] if f["rule"] == "PORT010"]
    assert len(port010) == 1
    assert "17 tensors" in port010[0]["message"] and "'model.data'" in port010[0]["message"]
    assert "portable fix" in port010[0]["hint"]


def test_port001_hint_names_portable_fix(cli, tmp_path):
    model = rule_fixtures.load("PORT004", "good")
    model.opset_import[0].version = 17
    result = cli("validate", str(save(model, tmp_path / "m.onnx")))
    assert "PORT001" in result.output and "portable fix" in result.output


def _report(*findings: Finding) -> ValidationReport:
    return ValidationReport(path="models/m.onnx", policy=Policy(), findings=findings, rules=("PORT004",))


def _finding(severity: Severity, source: SourceLocation | None = None) -> Finding:
    return Finding("PORT004", "no-control-flow", severity, "an If", "remove the branch",
                   Location(node="If_0", op_type="If", source=source))


def test_info_findings_print_no_fix_line():
    text = get_formatter("text").render([_report(_finding(Severity.INFO))])
    assert "an If" in text and "fix:" not in text
    assert "fix: remove the branch" in get_formatter("text").render([_report(_finding(Severity.ERROR))])
    for fmt in ("github", "sarif", "junit", "concise"):
        assert "(fix:" not in get_formatter(fmt).render([_report(_finding(Severity.INFO))]), fmt


def test_annotations_never_point_into_site_packages():
    library = _finding(Severity.ERROR, SourceLocation("site-packages/transformers/models/bert/modeling_bert.py", 90))
    user = _finding(Severity.ERROR, SourceLocation("models/net.py", 12))
    github = get_formatter("github").render([_report(library, user)]).splitlines()
    assert github[0].startswith("::error file=models/m.onnx,title=") and "site-packages/transformers" in github[0]
    assert github[1].startswith("::error file=models/net.py,line=12,")
    results = json.loads(get_formatter("sarif").render([_report(library, user)]))["runs"][0]["results"]
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results]
    assert uris == ["models/m.onnx", "models/net.py"]
    gitlab = json.loads(get_formatter("gitlab").render([_report(library, user)]))
    assert [i["location"] for i in gitlab] == [{"path": "models/m.onnx", "lines": {"begin": 1}},
                                               {"path": "models/net.py", "lines": {"begin": 12}}]


def test_gitlab_code_quality_fields_and_stable_fingerprints(cli, fixture_file):
    path = str(fixture_file("PORT004", "bad"))
    first = json.loads(cli("validate", "--format", "gitlab", path).output)
    again = json.loads(cli("validate", "--format", "gitlab", path).output)
    assert first and [i["fingerprint"] for i in first] == [i["fingerprint"] for i in again]
    issue = next(i for i in first if i["check_name"] == "PORT004")
    assert issue["severity"] == "major" and issue["location"]["path"] == path
    assert set(issue) == {"description", "check_name", "fingerprint", "severity", "location"}
    twice = json.loads(get_formatter("gitlab").render([_report(_finding(Severity.ERROR), _finding(Severity.ERROR))]))
    assert len({i["fingerprint"] for i in twice}) == 2


def test_concise_is_one_line_per_finding(cli, fixture_file):
    path = str(fixture_file("PORT004", "bad"))
    result = cli("validate", "--format", "concise", path)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{path}: error PORT004 [no-control-flow] main, node '<unnamed If #3>'")
    assert lines[-1].endswith("1 failed") and len(lines) == len(json.loads(
        cli("validate", "--format", "json", path).output)["reports"][0]["findings"]) + 1


def test_statistics_counts_rules_instead_of_listing_findings(cli, fixture_file, tmp_path):
    bad = str(fixture_file("PORT004", "bad"))
    external = str(save(_external_model(2), tmp_path / "ext.onnx"))
    result = cli("validate", "--statistics", bad, external)
    assert result.exit_code == 1
    assert "fix:" not in result.output
    rows = {line.split()[1]: line.split()[0] for line in result.output.splitlines()[:-1]}
    assert rows["PORT004"] == "1" and rows["PORT010"] == "1"
    data = json.loads(cli("validate", "--statistics", "--format", "json", bad, external).output)
    assert data["models"] == 2 and {r["rule"] for r in data["rules"]} >= {"PORT004", "PORT010"}
    assert cli("validate", "--statistics", "--format", "sarif", bad).exit_code == 2


def test_exit_zero_keeps_findings_and_agrees_with_the_json(cli, fixture_file, tmp_path):
    bad = str(fixture_file("PORT004", "bad"))
    result = cli("validate", "--exit-zero", "--format", "json", bad)
    data = json.loads(result.output)
    assert result.exit_code == 0 == data["exit_code"]
    assert data["summary"]["failed"] == 1 and data["reports"][0]["findings"]
    assert cli("validate", bad).exit_code == 1
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert cli("validate", "--exit-zero", str(empty)).exit_code == 3  # unreadable is not a finding


def test_explain_prints_no_raw_template(cli):
    port010 = cli("explain", "PORT010").output
    assert "{what}" not in port010 and "Message:" not in port010
    port001 = cli("explain", "PORT001").output
    assert "Message: default-domain opset is <found>, the policy requires <wanted>" in port001
    assert "{" not in port001.split("*Fix*")[-1]
