"""mypy on the package as Python imports it.

``pyproject.toml`` maps the folders ``exporters/``, ``validators/`` and ``runners/`` to
``portable.exporters``, ``portable.validators`` and ``portable.runners``; mypy does not read that
mapping, so the configured ``mypy`` (``make test``) checks ``validators/shapes.py`` as
``validators.shapes`` and sees every ``portable.validators`` import as ``Any``: types across the
folders go unchecked. Here mypy runs on a tree of links laid out as the package (under the
ignored ``build/``, so its incremental cache keeps later runs short).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
TREE = ROOT / "build" / "typecheck"
UPPER = ("exporters", "validators", "runners")


def _link_tree() -> Path:
    package = TREE / "portable"
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in sorted((ROOT / "portable").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for folder in UPPER:
        (package / folder).symlink_to(ROOT / folder)
    return package


def _source_paths(report: str) -> str:
    """mypy's lines with the tree's paths turned back into the repository's."""
    for folder in UPPER:
        report = report.replace(f"portable/{folder}/", f"{folder}/")
    return report


@pytest.mark.slow
def test_mypy_finds_no_error_in_the_package_as_python_imports_it(monkeypatch):
    api = pytest.importorskip("mypy.api")
    _link_tree()
    monkeypatch.chdir(TREE)
    out, err, code = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(TREE / ".mypy_cache"),
                              "-p", "portable"])
    assert code == 0, _source_paths(out + err)
    checked = re.search(r"(\d+) source files", out)
    assert checked and int(checked.group(1)) > 80, out  # the whole package, not a part of it
