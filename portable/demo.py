"""``make demo``: the main job on built-in fixture models.

Exports the fixture CNN and transformer (``fixtures/models``), validates them with some
bad rule fixtures (``fixtures/rules``), then tries to export the bad PyTorch fixtures
(``torch.cond``, ``nonzero``, a data-dependent branch) and shows their findings, located at
the Python source line. Run from the repository root: the fixtures are not part of the wheel,
so nothing here is public API.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from portable.formatters import get_formatter
from portable.policy import Policy

if TYPE_CHECKING:
    from portable.report import ValidationReport

OUT = Path("out/demo")
_FIXTURES = Path("fixtures")
_DEMO_SPECS = {"cnn": f"{_FIXTURES / 'models' / 'cnn.py'}:build", "transformer": f"{_FIXTURES / 'models' / 'transformer.py'}:build"}


def _fixture_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("portable_rule_fixtures", _FIXTURES / "rules" / "build.py")
    assert spec is not None and spec.loader is not None, "run `make demo` from the repository root"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exported() -> list[Path]:
    """Export the fixture CNN and transformer (progress on the terminal)."""
    from portable.exporters import export_spec

    return [export_spec(spec, OUT / f"{name}.onnx", force=True, quiet=False).path for name, spec in _DEMO_SPECS.items()]


def _refused() -> list[ValidationReport]:
    """Export the bad fixture models; each is refused (nothing written) with located findings."""
    from portable.exporters import ExportFailed, export_spec

    reports = []
    for name in ("cond", "nonzero", "branch"):
        try:
            export_spec(f"fixtures/models/{name}.py:build", OUT / f"{name}.onnx", force=True, verify=False)
        except ExportFailed as failed:
            reports.append(failed.report)
    return reports


def main() -> int:
    from portable.validators import validate

    build = _fixture_builder()
    OUT.mkdir(parents=True, exist_ok=True)
    paths = _exported()
    for rule, kind in (("PORT004", "bad"), ("PORT006", "bad"), ("PORT010", "bad")):
        path = OUT / f"{rule.lower()}_{kind}.onnx"
        path.write_bytes(build.load(rule, kind).SerializeToString())
        paths.append(path)
    reports = [validate(p, Policy()) for p in paths]
    text = get_formatter("text", color=sys.stdout.isatty())
    print(text.render(reports), end="")
    print("\nBad PyTorch models: the export is refused, nothing is written, findings point at the source line:")
    print(text.render(_refused()), end="")
    print(f"\nNext: `.venv/bin/portable validate {OUT} --format sarif`, "
          f"`.venv/bin/portable compare {OUT}/cnn.onnx --reference fixtures/models/cnn.py:build`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
