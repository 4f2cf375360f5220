"""CI surfaces: parallel validation, baselines, the pre-commit hook and the GitHub Action."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import yaml
from support import ROOT, rule_fixtures, save

PORTABLE = str(Path(sys.executable).parent / "portable")


def _variant(width: int) -> onnx.ModelProto:
    return onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, {width}] x) => (float[batch, {width}] y) {{ y = Relu(x) }}""")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for rule, kind in rule_fixtures.fixture_names():
        save(rule_fixtures.load(rule, kind), folder / rule / f"{kind}.onnx")
    for width in range(1, 25):
        save(_variant(width), folder / "generated" / f"relu_{width:02d}.onnx")
    assert len(list(folder.rglob("*.onnx"))) >= 50
    return folder


def test_jobs_give_identical_reports(cli, corpus):
    serial = cli("validate", "--format", "json", "--jobs", "1", str(corpus))
    parallel = cli("validate", "--format", "json", "--jobs", "2", str(corpus))
    assert serial.exit_code == parallel.exit_code == 1
    assert serial.output == parallel.output
    assert len(json.loads(serial.output)["reports"]) >= 50


def test_a_crashing_worker_fails_only_its_model(cli, corpus, monkeypatch):
    import portable.validators as validators

    real = validators.validate

    def crash_on_port012(path, policy=None, **kw):
        if "PORT012" in str(path):
            os._exit(70)  # the worker dies, as a segfault in a native library would
        return real(path, policy, **kw)

    monkeypatch.setattr(validators, "validate", crash_on_port012)  # forked workers inherit it
    result = cli("validate", "--format", "json", "--jobs", "2", str(corpus))
    data = json.loads(result.output)
    assert result.exit_code == 3
    crashed = [r for r in data["reports"] if r["error"]]
    assert {Path(r["path"]).parent.name for r in crashed} == {"PORT012"}
    assert "worker process died" in crashed[0]["error"]
    assert len(data["reports"]) == len(list(corpus.rglob("*.onnx")))


def test_baseline_fails_only_on_new_findings_and_reports_stale(cli, tmp_path):
    models = tmp_path / "models"
    save(rule_fixtures.load("PORT004", "bad"), models / "a.onnx")
    save(rule_fixtures.load("PORT012", "bad"), models / "b.onnx")
    save(rule_fixtures.load("PORT004", "good"), models / "c.onnx")
    baseline = tmp_path / ".portable-baseline.json"
    assert cli("validate", "--write-baseline", str(baseline), str(models)).exit_code == 0
    assert cli("validate", "--baseline", str(baseline), str(models)).exit_code == 0

    save(rule_fixtures.load("PORT006", "bad"), models / "c.onnx")  # a new violation
    result = cli("validate", "--format", "json", "--baseline", str(baseline), str(models))
    assert result.exit_code == 1
    data = json.loads(result.output[: result.output.rindex("}") + 1])
    failing = {(Path(r["path"]).name, f["rule"]) for r in data["reports"] for f in r["findings"]}
    assert failing == {("c.onnx", "PORT006"), ("c.onnx", "PORT009")}

    save(rule_fixtures.load("PORT004", "good"), models / "c.onnx")
    save(rule_fixtures.load("PORT004", "good"), models / "a.onnx")  # fix a baselined finding
    result = cli("validate", "--baseline", str(baseline), str(models))
    assert result.exit_code == 0
    assert "stale: " in result.output and "a.onnx: PORT004" in result.output


def test_bad_baseline_file_is_usage_error(cli, tmp_path, fixture_file):
    bad = tmp_path / "baseline.json"
    bad.write_text("[1, 2]")
    result = cli("validate", "--baseline", str(bad), str(fixture_file("PORT004", "good")))
    assert result.exit_code == 2 and "baseline" in result.output


def test_extra_reports_in_one_run(cli, tmp_path, fixture_file):
    sarif, junit = tmp_path / "r.sarif", tmp_path / "r.xml"
    result = cli("validate", "--report", f"sarif={sarif}", "--report", f"junit={junit}",
                 str(fixture_file("PORT004", "bad")))
    assert result.exit_code == 1
    assert json.loads(sarif.read_text())["runs"][0]["results"][0]["ruleId"] == "PORT004"
    assert "<testsuites" in junit.read_text()
    assert cli("validate", "--report", "pdf=x.pdf", str(fixture_file("PORT004", "bad"))).exit_code == 2


def _hook() -> dict:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return hook


def test_pre_commit_hook_entry_on_staged_files(tmp_path):
    hook = _hook()
    assert hook["id"] == "portable-validate"
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    save(rule_fixtures.load("PORT004", "good"), repo / "good.onnx")
    (repo / "notes.txt").write_text("not a model")
    subprocess.run([*git, "add", "."], check=True)

    def entry() -> int:
        staged = subprocess.run([*git, "diff", "--cached", "--name-only"], check=True, capture_output=True,
                                text=True).stdout.split()
        files = [f for f in staged if re.search(hook["files"], f)]
        command = [PORTABLE, *hook["entry"].split()[1:], *files]
        return subprocess.run(command, cwd=repo, capture_output=True, timeout=120).returncode

    assert entry() == 0
    save(rule_fixtures.load("PORT004", "bad"), repo / "bad.onnx")
    subprocess.run([*git, "add", "bad.onnx"], check=True)
    assert entry() == 1


def test_action_declares_every_input_it_uses():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    declared = set(action["inputs"])
    used = set(re.findall(r"inputs\.([\w-]+)", (ROOT / "action.yml").read_text()))
    assert used and used <= declared, used - declared
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert any("upload-sarif" in str(s.get("uses", "")) for s in steps)
    assert any("--report \"sarif=" in s.get("run", "") and "junit=" in s.get("run", "") for s in steps)
