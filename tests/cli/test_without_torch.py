"""The core install has no torch: validate, fix, inspect, rules and explain work without it, and the commands that run
PyTorch say in one line what to install (exit 2).

The CLI runs in a subprocess whose ``sys.path`` holds this venv's site-packages as a folder of links with torch
and the other packages of the ``torch`` extra left out (``-S``: no site processing but that folder's), so torch
is truly absent there: ``importlib.util.find_spec("torch")`` is None, as on a machine without it.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support import rule_fixtures, save

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = ("torch", "torchgen", "functorch", "safetensors", "matplotlib", "transformers", "triton", "nvidia",
            "torchvision", "timm")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    links = tmp_path_factory.mktemp("site-without-torch")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().replace("-", "_").startswith(LEFT_OUT):
            (links / entry.name).symlink_to(entry)
    return links


def _portable(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = ("import sys, site, importlib.util; site.addsitedir(sys.argv.pop(1));"
            "assert importlib.util.find_spec('torch') is None, 'torch is importable';"
            "from portable.cli import main; main(sys.argv[1:])")
    return subprocess.run([sys.executable, "-S", "-c", code, str(site), *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_validate_fix_inspect_rules_and_explain_run_without_torch(site: Path, tmp_path: Path) -> None:
    good = save(rule_fixtures.load("PORT004", "good"), tmp_path / "good.onnx")
    bad = save(rule_fixtures.load("PORT001", "bad"), tmp_path / "old.onnx")
    assert _portable(site, "validate", str(good), cwd=tmp_path).returncode == 0
    assert _portable(site, "validate", str(bad), cwd=tmp_path).returncode == 1
    fixed = _portable(site, "fix", str(bad), "-o", str(tmp_path / "fixed.onnx"), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "proof: holds" in fixed.stdout and (tmp_path / "fixed.onnx").is_file()
    inspected = _portable(site, "inspect", str(bad), cwd=tmp_path)
    assert inspected.returncode == 0 and "portable: no (PORT001 x1)" in inspected.stdout, inspected.stderr
    assert _portable(site, "rules", cwd=tmp_path).returncode == 0
    assert _portable(site, "explain", "PORT004", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("command", [["export", "m.py:build", "-o", "m.onnx"], ["precheck", "m.py:build"],
                                     ["compare", "m.onnx", "--reference", "m.py:build"]])
def test_a_command_that_runs_pytorch_says_what_to_install(site: Path, tmp_path: Path, command: list[str]) -> None:
    result = _portable(site, *command, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "runs PyTorch, which is not installed here" in lines[0]
    assert "pip install 'portable-onnx[torch]'" in lines[0] and "Traceback" not in result.stderr
    assert _portable(site, command[0], "--help", cwd=tmp_path).returncode == 0
