"""The wheel holds every subpackage under ``portable`` and nothing importable as ``validators``."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (path,) = out.glob("portable_onnx-*.whl")
    return path


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"portable"}
    sources = {p.relative_to(ROOT).as_posix() for d in ("validators", "exporters", "runners")
               for p in (ROOT / d).rglob("*.py")}
    packaged = {n.removeprefix("portable/") for n in names if n.endswith(".py")}
    assert sources <= packaged, sorted(sources - packaged)
    assert "portable/schemas/report.schema.json" in names
    from portable.validators.targets import TARGETS

    assert {f"portable/validators/targets/profiles/{t}.json" for t in TARGETS} <= set(names)  # the target profiles


def test_installed_wheel_imports_only_under_portable(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    # -S: no site processing, so the editable install of this checkout is not on the path.
    code = (
        "import sys, importlib.util;"
        f"sys.path[:0] = [{str(target)!r}, {sysconfig.get_paths()['purelib']!r}];"
        "assert importlib.util.find_spec('validators') is None, 'validators is importable';"
        "assert importlib.util.find_spec('exporters') is None and importlib.util.find_spec('runners') is None;"
        "import portable.validators.rules, portable.cli;"
        "from portable.validators.targets import TARGETS, load_profile;"
        "assert all(load_profile(t).ops for t in TARGETS);"
        f"assert portable.__file__.startswith({str(target)!r}), portable.__file__;"
        "print(len(portable.validators.rules.ALL_RULES))"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)  # not the checkout, whose folders would be on the path
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 14


def test_the_documented_revisions_are_this_version():
    """docs/ci.md's pre-commit ``rev`` is this release's tag and the Action's ``@vN`` its major version (both
    tagged on the release commit); the Action installs no torch and pins what it installs."""
    import re

    from portable._version import __version__

    ci = (ROOT / "docs" / "ci.md").read_text()
    assert re.findall(r"rev: (v[\d.]+)", ci) == [f"v{__version__}"]
    assert re.findall(r"portable@(v\d+)", ci) == [f"v{__version__.split('.')[0]}"]
    action = (ROOT / "action.yml").read_text()
    assert "torch" not in action.split("runs:")[1].replace("# the core install: no torch", "")
    assert "-c \"$constraints\"" in action and (ROOT / ".ci" / "constraints.txt").is_file()
