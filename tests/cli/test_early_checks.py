"""Errors before work: an output that cannot be written is exit 2, one line naming it, before the SPEC is
loaded or the model read; ``--debug`` works after the subcommand too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

UNWRITABLE = "/sys/portable-truth/x.onnx"  # sysfs: not even root can create a file there
SPEC = """
from pathlib import Path

Path({marker!r}).write_text("loaded")
import torch


def build():
    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)
"""


@pytest.fixture
def marked(tmp_path: Path) -> tuple[str, Path]:
    """A SPEC that leaves a marker file when it is imported, and the marker's path."""
    marker = tmp_path / "loaded.txt"
    (tmp_path / "marked.py").write_text(SPEC.format(marker=str(marker)))
    return f"{tmp_path / 'marked.py'}:build", marker


def _refused(result, path: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and path in result.stderr and "cannot write" in result.stderr
    assert "internal error" not in result.stderr


@pytest.mark.parametrize("where", [UNWRITABLE, "/sys/x.onnx"])
def test_export_to_an_unwritable_path_is_exit_2_before_the_spec_is_loaded(cli, marked, where):
    spec, marker = marked
    result = cli("export", spec, "-o", where, "--format", "json")
    _refused(result, where)
    assert not marker.exists()
    assert json.loads(result.stdout)["exit_code"] == 2  # --format json: the JSON shape, with the error in it


def test_compare_report_and_output_are_checked_before_the_run(cli, marked, tmp_path):
    spec, marker = marked
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not read before the check")
    for flag in ("--report", "-o"):
        result = cli("compare", str(model), "--reference", spec, flag, "/sys/r.md", "--no-latency", "-q")
        _refused(result, "/sys/r.md")
        runtimes = cli("compare", str(model), "--runtime", "ort,reference", "--reference", spec, flag, "/sys/r.md", "-q")
        _refused(runtimes, "/sys/r.md")  # the runtimes' comparison checks first too
    golden = cli("compare", str(model), "--runtime", "ort,reference", "--reference", spec, "--golden", "/sys/g", "-q")
    _refused(golden, "/sys/g")  # the golden bundle's folder too, before the model is read
    assert not marker.exists()


@pytest.mark.parametrize("command", ["fix", "quantize"])
def test_fix_and_quantize_check_their_output_first(cli, fixture_file, command):
    model = fixture_file("PORT004", "good")
    result = cli(command, str(model), "-o", "/sys/fixed.onnx", "-q")
    _refused(result, "/sys/fixed.onnx")


def test_debug_is_taken_after_the_subcommand_too(cli, fixture_file, tmp_path):
    model = str(fixture_file("PORT004", "good"))
    missing = str(tmp_path / "none.toml")
    for args in (("--debug", "validate", "--config", missing, model), ("validate", "--debug", "--config", missing, model)):
        result = cli(*args)
        assert result.exit_code == 2, result.output
        assert "Traceback" in result.stderr, args
    plain = cli("validate", "--config", missing, model)
    assert plain.exit_code == 2 and "Traceback" not in plain.stderr


@pytest.mark.parametrize("args", [["-o", "/sys/v.json"], ["--report", "sarif=/sys/v.sarif"],
                                  ["--write-baseline", "/sys/baseline.json"]])
def test_validate_checks_its_outputs_first(cli, fixture_file, args):
    result = cli("validate", str(fixture_file("PORT004", "bad")), *args)
    _refused(result, args[1].partition("=")[2] or args[1])
