"""Golden files for every format, plus structural checks (XML parses, SARIF required fields).

Regenerate the golden files after an intended change with ``PORTABLE_UPDATE_GOLDEN=1 make test``.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import rule_fixtures

from portable.formatters import FORMATS, get_formatter
from portable.policy import Policy
from portable.report import ValidationReport
from portable.validators import validate

GOLDEN = Path(__file__).parent / "golden"
SUFFIX = {"text": "txt", "json": "json", "junit": "xml", "sarif": "sarif", "github": "txt", "concise": "txt", "gitlab": "json"}


def _with_source(model):
    node = next(n for n in model.graph.node if n.op_type == "If")
    for key, value in (
        ("pkg.torch.onnx.stack_trace", 'File "models/branchy.py", line 12, in forward\n    return torch.cond(...)'),
        ("pkg.torch.onnx.name_scopes", "['', 'block', 'cond']"),
    ):
        prop = node.metadata_props.add()
        prop.key, prop.value = key, value
    return model


@pytest.fixture(scope="module")
def reports() -> list[ValidationReport]:
    policy = Policy()
    return [
        validate(rule_fixtures.load("PORT004", "good"), policy, name="models/good.onnx"),
        validate(_with_source(rule_fixtures.load("PORT004", "bad")), policy, name="models/branchy.onnx"),
        validate(rule_fixtures.load("PORT013", "bad"), policy, name="models/doubles.onnx"),
        ValidationReport(path="models/empty.onnx", policy=policy, error="empty file (0 bytes): not an ONNX model",
                         rules=("PORT001",)),
    ]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_golden(fmt, reports):
    text = get_formatter(fmt).render(reports)
    golden = GOLDEN / f"report.{fmt}.{SUFFIX[fmt]}"
    if os.environ.get("PORTABLE_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.fixture(scope="module")
def target_reports() -> list[ValidationReport]:
    """``--target qnn,nnapi,ort-cpu --max-partitions 1``: a fallback (Erf on QNN), a dynamic batch
    (NNAPI needs fixed sizes), a failed gate."""
    policy = Policy(targets=("ort-cpu", "qnn", "nnapi"), max_partitions=1)
    return [validate(rule_fixtures.load("PORT201", "bad"), policy, name="models/gelu.onnx"),
            validate(rule_fixtures.load("PORT203", "bad"), policy, name="models/dynamic.onnx")]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_golden_with_targets(fmt, target_reports):
    """The per-target line in every format (the reports carry it; the formatters only render it)."""
    text = get_formatter(fmt).render(target_reports)
    golden = GOLDEN / f"targets.{fmt}.{SUFFIX[fmt]}"
    if os.environ.get("PORTABLE_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    assert "qnn: 2/3 nodes, 2 partitions, fallback: Erf x1" in text


def test_text_colour_only_when_asked(reports):
    assert "\x1b[" not in get_formatter("text").render(reports)
    assert "\x1b[" in get_formatter("text", color=True).render(reports)


def test_junit_is_xml_with_one_case_per_rule(reports):
    root = ET.fromstring(get_formatter("junit").render(reports))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [r.path for r in reports]
    branchy = suites[1]
    assert len(branchy.findall("testcase")) == len(reports[1].rules)
    failed = [c.get("name") for c in branchy.findall("testcase") if c.find("failure") is not None]
    assert failed == ["PORT004 no-control-flow"]
    assert suites[3].find("testcase/error") is not None
    assert root.get("failures") == "1" and root.get("errors") == "1"


def test_sarif_validates_against_the_sarif_2_1_0_object_model(reports):
    from pydantic import ValidationError
    from sarif_pydantic import Sarif

    data = json.loads(get_formatter("sarif").render(reports))
    log = Sarif.model_validate(data)
    assert len(log.runs[0].results) == len(data["runs"][0]["results"]) == 3
    data["runs"][0]["results"][0]["level"] = "fatal"  # the model must be able to say no
    with pytest.raises(ValidationError):
        Sarif.model_validate(data)


def test_sarif_required_fields(reports):
    data = json.loads(get_formatter("sarif").render(reports))
    assert data["version"] == "2.1.0" and "$schema" in data
    run = data["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert run["tool"]["driver"]["name"] == "portable"
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
        assert result["message"]["text"]
        assert result["locations"][0]["logicalLocations"][0]["name"]
    located = [r for r in run["results"] if r["ruleId"] == "PORT004"]
    physical = located[0]["locations"][0]["physicalLocation"]
    assert physical == {"artifactLocation": {"uri": "models/branchy.py"}, "region": {"startLine": 12}}
    assert located[0]["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "models/branchy.onnx"
    assert run["invocations"][0]["executionSuccessful"] is False  # the unreadable model


def test_github_points_at_the_python_line(reports):
    lines = get_formatter("github").render(reports).splitlines()
    assert lines[0].startswith("::error file=models/branchy.py,line=12,title=PORT004 no-control-flow::")
    assert any(line.startswith("::warning file=models/doubles.onnx,") for line in lines)
    assert any(line.startswith("::error file=models/empty.onnx,title=unreadable model::") for line in lines)


def test_json_schema(reports):
    import jsonschema

    schema = json.loads((Path(__file__).parents[2] / "portable" / "schemas" / "report.schema.json").read_text())
    data = json.loads(get_formatter("json").render(reports))
    jsonschema.validate(data, schema)
    assert data["summary"] == {"models": 4, "passed": 2, "failed": 1, "unreadable": 1,
                               "errors": 1, "warnings": 2, "info": 0}
    assert data["exit_code"] == 3


def test_pre_export_findings_render_in_every_format():
    """precheck/export reports carry PORT101+ findings and no rule list: every format copes."""
    from portable.exporters.rules import precheck_finding
    from portable.findings import SourceLocation

    finding = precheck_finding("PORT101", "data-dependent branch", SourceLocation("models/branchy.py", 18))
    report = ValidationReport(path="models/branchy.py:build", policy=Policy(), findings=(finding,))
    for fmt in FORMATS:
        assert "PORT101" in get_formatter(fmt).render([report])
    sarif = json.loads(get_formatter("sarif").render([report]))["runs"][0]
    result = sarif["results"][0]
    assert sarif["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "PORT101"
    case = ET.fromstring(get_formatter("junit").render([report])).find("testsuite/testcase")
    assert case.get("name") == "PORT101 data-dependent-branch" and case.find("failure") is not None


TRICKY = ["plain ascii", "", "wide 模型 名前", "emoji :smile: 😀", "[bold]markup[/bold]", "x" * 20_000, "trailing  ",
          "  leading", "two\nlines", "tab\there", "\ttab first", "wide\t模\ttab", "cr\rhere", "bell\x07", "esc \x1b[31mred",
          "del\x7f", "c1\x85", "zero\u200bwidth", "combining e\u0301", "nbsp\u00a0", "rtl \u202eabc", "ls\u2028ps\u2029"]


@pytest.mark.parametrize("text", TRICKY)
def test_plain_text_is_byte_for_byte_what_rich_prints(text):
    """Without colour the lines are joined without rich: the same bytes rich gives, whatever the text."""
    from portable.formatters.text import TextFormatter, _line

    formatter = TextFormatter()
    lines = [_line("  ", (text, "bold red"), " [tail]"), _line(text, style="dim"), _line(text)]
    assert formatter._print(lines) == formatter._rich(lines)
