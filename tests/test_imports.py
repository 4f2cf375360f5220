"""What the package exposes and imports: a public API without repository-only helpers, and a
start-up that loads no heavy module it does not use."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
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


# Runs the CLI in-process, then prints which of the slow modules it loaded.
_LOADED = """
import json, sys
from portable.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
slow = ("rich", "torch", "onnxruntime", "onnxscript", "onnx_ir", "matplotlib", "concurrent.futures.process")
sys.stderr.write(json.dumps(sorted(m for m in sys.modules if m in slow)) + "\\n")
"""


def _slow_modules(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _LOADED, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    return json.loads(out.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["rules"], ["validate", "{model}"], ["validate", "--format", "sarif", "{model}"],
                                  ["validate", "--format", "junit", "{model}"]], ids=" ".join)
def test_start_up_loads_no_slow_module(args, fixture_file):
    """Plain text output needs no rich; one model needs no process pool; nothing needs torch."""
    model = str(fixture_file("PORT004", "bad"))
    assert _slow_modules(*(a.format(model=model) for a in args)) == []


def test_colour_is_what_loads_rich(fixture_file):
    """The check above sees rich when it is loaded: the coloured text output loads it."""
    code = ("import sys; from portable.formatters import get_formatter; from portable.validators import validate; "
            f"get_formatter('text', color=True).render([validate({str(fixture_file('PORT004', 'bad'))!r})]); "
            "print('rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "True", out.stderr
