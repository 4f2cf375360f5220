"""The validate, rules and explain commands through the cli fixture: exit codes and messages."""

from __future__ import annotations

import json

import pytest


def test_good_model_exits_0(cli, fixture_file):
    result = cli("validate", str(fixture_file("PORT004", "good")))
    assert result.exit_code == 0, result.output
    assert "ok" in result.output


def test_bad_model_exits_1_and_names_the_node(cli, fixture_file):
    result = cli("validate", str(fixture_file("PORT004", "bad")))
    assert result.exit_code == 1
    assert "PORT004" in result.output and "<unnamed If #3>" in result.output


def test_warning_fails_only_under_strict(cli, fixture_file):
    path = str(fixture_file("PORT013", "bad"))
    assert cli("validate", path).exit_code == 0
    assert cli("validate", "--strict", path).exit_code == 1


def test_select_and_ignore(cli, fixture_file):
    path = str(fixture_file("PORT004", "bad"))
    assert cli("validate", "--ignore", "PORT004", path).exit_code == 0
    assert cli("validate", "--select", "PORT001,PORT002", path).exit_code == 0
    assert cli("validate", "--select", "PORT004", path).exit_code == 1


def test_unknown_rule_id_is_usage_error(cli, fixture_file):
    result = cli("validate", "--select", "PORT999", str(fixture_file("PORT004", "good")))
    assert result.exit_code == 2
    assert "PORT999" in result.output


def test_unreadable_and_good_together_exit_3_and_report_both(cli, fixture_file, tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    result = cli("validate", "--format", "json", str(fixture_file("PORT004", "good")), str(empty))
    assert result.exit_code == 3
    data = json.loads(result.output)
    assert [r["exit_code"] for r in data["reports"]] == [0, 3]
    assert "Traceback" not in result.output


def test_directory_is_searched_recursively(cli, fixture_file, tmp_path):
    fixture_file("PORT004", "good")
    fixture_file("PORT012", "bad")
    result = cli("validate", "--format", "json", str(tmp_path))
    assert result.exit_code == 1
    assert len(json.loads(result.output)["reports"]) == 2


def test_directory_without_models_exits_3(cli, tmp_path):
    result = cli("validate", str(tmp_path))
    assert result.exit_code == 3
    assert "no .onnx files" in result.output


def test_output_file(cli, fixture_file, tmp_path):
    out = tmp_path / "report.sarif"
    result = cli("validate", "--format", "sarif", "-o", str(out), str(fixture_file("PORT004", "bad")))
    assert result.exit_code == 1
    assert json.loads(out.read_text())["version"] == "2.1.0"


def test_config_file_changes_the_policy(cli, fixture_file, tmp_path):
    config = tmp_path / "portable.toml"
    config.write_text('[tool.portable]\nallowed-dtypes = ["float32", "float64"]\nseverity = { PORT004 = "warning" }\n')
    assert cli("validate", "--config", str(config), str(fixture_file("PORT013", "bad"))).exit_code == 0
    assert cli("validate", "--config", str(config), str(fixture_file("PORT004", "bad"))).exit_code == 0
    assert cli("validate", "--strict", "--config", str(config), str(fixture_file("PORT004", "bad"))).exit_code == 1


@pytest.mark.parametrize("body,key", [
    ("opset = 18\nunknown-key = 1\n", "unknown-key"),
    ("opset = \"eighteen\"\n", "opset"),
    ("max-size = \"lots\"\n", "max-size"),
    ("allowed-dtypes = [\"float99\"]\n", "allowed-dtypes"),
    ("severity = { PORT004 = \"fatal\" }\n", "severity.PORT004"),
    ("tool = 1\n", "'tool'"),
    ("[tool.portable]\nselect = \"PORT999\"\n", "PORT999"),
])
def test_bad_config_is_usage_error_naming_the_key(cli, fixture_file, tmp_path, body, key):
    config = tmp_path / "bad.toml"
    config.write_text(body)
    result = cli("validate", "--config", str(config), str(fixture_file("PORT004", "good")))
    assert result.exit_code == 2
    assert key in result.output


def test_pyproject_table_is_discovered(cli, fixture_file, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.portable]\nignore = ["PORT012"]\n')
    path = str(fixture_file("PORT012", "bad"))
    monkeypatch.chdir(tmp_path)
    assert cli("validate", path).exit_code == 0


def test_discovery_skips_a_pyproject_without_the_table(cli, fixture_file, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.portable]\nignore = ["PORT012"]\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    path = str(fixture_file("PORT012", "bad"))
    monkeypatch.chdir(inner)
    assert cli("validate", path).exit_code == 0
    (inner / "pyproject.toml").write_text("[project\n")
    broken = cli("validate", path)
    assert broken.exit_code == 2 and "not valid TOML" in broken.output


def test_rules_and_explain(cli):
    listing = cli("rules")
    assert listing.exit_code == 0
    assert all(f"PORT0{n:02d}" in listing.output for n in range(1, 16))
    doc = cli("explain", "PORT004")
    assert doc.exit_code == 0 and "*Why*" in doc.output and "*Fix*" in doc.output
    assert cli("explain", "no-control-flow").exit_code == 0
    assert cli("explain", "PORT999").exit_code == 2
    assert "PORT101" in listing.output
    pre = cli("explain", "PORT101")
    assert pre.exit_code == 0 and "data-dependent-branch" in pre.output
    assert all(part in pre.output for part in ("*Why*", "*Bad*", "*Fix*", "Fix: decide the branch"))


def _rules_table(text: str) -> str:
    start = text.index("| id | name | severity | what it checks |")
    return text[start:text.index("\n\n", start)].rstrip("\n")


def test_the_contract_pages_rules_table_is_what_portable_rules_prints(cli):
    """docs/contract.md's table comes from the catalogue: regenerate it with `portable rules --format markdown`."""
    from support import ROOT

    listing = cli("rules", "--format", "markdown")
    assert listing.exit_code == 0
    assert _rules_table((ROOT / "docs" / "contract.md").read_text()) == _rules_table(listing.output + "\n\n")


@pytest.mark.parametrize("args", [["rules", "--format", "markdown"], ["validate", "{model}"]], ids=" ".join)
def test_a_reader_that_leaves_ends_the_run_quietly(fixture_file, args):
    """`portable ... | head`: the pipe closes before portable writes; no traceback, no 'internal
    error', and the shell's SIGPIPE status (141) instead of a made-up exit code."""
    import subprocess
    import sys

    model = fixture_file("PORT004", "bad")
    command = [sys.executable, "-m", "portable", *(a.format(model=model) for a in args)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader leaves before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""
