"""What the package exposes and imports: a public API without repository-only helpers."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE_DIRS = ("portable", "exporters", "validators", "runners")


@pytest.mark.parametrize("package", ["portable", "portable.exporters", "portable.validators", "portable.runners"])
def test_every_public_name_resolves_and_none_is_a_demo_helper(package):
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if "demo" in name.lower()] == []
    for name in module.__all__:
        getattr(module, name)


def test_the_demo_helpers_left_the_exporters_api():
    exporters = importlib.import_module("portable.exporters")
    for name in ("demo_models", "DEMO_SPECS"):
        with pytest.raises(AttributeError):
            getattr(exporters, name)


def test_only_make_demo_reads_the_repository_fixtures():
    """The wheel ships no ``fixtures/``: only ``portable/demo.py`` (``make demo``, run from a checkout) names it."""
    naming = sorted(str(p.relative_to(ROOT)) for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py")
                    if "fixtures" in p.read_text())
    assert naming == ["portable/demo.py"]
