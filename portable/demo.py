"""``make demo``: the main job on built-in fixture models.

Exports the fixture CNN and transformer (``fixtures/models``), then validates them with
a good and some bad fixture models (``fixtures/rules``) and shows the located findings.
Run from the repository root.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from portable.formatters import get_formatter
from portable.policy import Policy
from portable.validators import validate

OUT = Path("out/demo")


def _fixture_builder():
    spec = importlib.util.spec_from_file_location("portable_rule_fixtures", Path("fixtures/rules/build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _exported() -> list[Path]:
    """Export the fixture CNN and transformer (progress on the terminal)."""
    from portable.exporters import demo_models

    return [result.path for result in demo_models(OUT).values()]


def main() -> int:
    build = _fixture_builder()
    OUT.mkdir(parents=True, exist_ok=True)
    paths = _exported()
    for rule, kind in (("PORT004", "bad"), ("PORT006", "bad"), ("PORT010", "bad")):
        path = OUT / f"{rule.lower()}_{kind}.onnx"
        path.write_bytes(build.load(rule, kind).SerializeToString())
        paths.append(path)
    reports = [validate(p, Policy()) for p in paths]
    print(get_formatter("text", color=sys.stdout.isatty()).render(reports), end="")
    bad = [r.path for r in reports if not r.ok]
    print(f"\nThe bad models above fail as they should ({len(bad)} of {len(reports)}); "
          f"try `.venv/bin/portable validate {OUT} --format sarif`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
