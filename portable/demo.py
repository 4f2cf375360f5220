"""``make demo``: the main job on built-in fixture models.

Exports the fixture CNN and transformer (``fixtures/models``) and validates them (each should
pass), validates some deliberately broken rule fixtures (``fixtures/rules``: each should fail),
then tries to export the deliberately broken PyTorch fixtures (``torch.cond``, ``nonzero``, a
data-dependent branch) and shows their findings, located at the Python source line. Each block
says what its models are and what they should do; the last line says whether every model did,
and so does the exit code (issue 48: "5 models checked: 2 passed, 3 failed" and exit 0 read as a
failure that was not one). Run from the repository root: the fixtures are not part of the wheel,
so nothing here is public API.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from portable.formatters import get_formatter
from portable.policy import Policy
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
    """Export the bad fixture models; each should be refused (nothing written) with located findings (one
    that is not shows its clean report, and the demo's verdict says so)."""
    from portable.exporters import ExportFailed, export_spec

    reports = []
    for name in ("cond", "nonzero", "branch"):
        try:
            made = export_spec(f"fixtures/models/{name}.py:build", OUT / f"{name}.onnx", force=True, verify=False)
        except ExportFailed as failed:
            reports.append(failed.report)
        else:
            reports.append(made.report)
    return reports


@dataclass(frozen=True)
class Block:
    """One block of the demo: its models' reports, what they are, and whether each should pass."""

    name: str  # "deliberately broken ONNX files"
    note: str  # what they are and what they should do
    reports: tuple[ValidationReport, ...]
    should_pass: bool

    @property
    def heading(self) -> str:
        return f"{self.name[0].upper()}{self.name[1:]} ({self.note}):"

    @property
    def expected(self) -> int:
        """How many of its models came out as they should."""
        return sum(r.ok == self.should_pass for r in self.reports)

    def tally(self) -> str:
        """``2 of 2 pass``, ``3 of 3 fail, as they should``."""
        verb = "pass" if self.should_pass else "fail, as they should"
        return f"{self.expected} of {len(self.reports)} {verb}" if self.expected == len(self.reports) else (
            f"{len(self.reports) - self.expected} of {len(self.reports)} did NOT {'pass' if self.should_pass else 'fail'}")


def verdict(blocks: Sequence[Block]) -> tuple[str, int]:
    """The demo's last line and exit code: 0 when every model came out as its block says it should."""
    ok = all(b.expected == len(b.reports) for b in blocks)
    parts = "; ".join(f"{b.name}: {b.tally()}" for b in blocks)
    return (f"demo {'as expected' if ok else 'NOT as expected'}: {parts}", 0 if ok else 1)


def _blocks() -> list[Block]:
    from portable.validators import validate

    build = _fixture_builder()
    OUT.mkdir(parents=True, exist_ok=True)
    good = [validate(p, Policy()) for p in _exported()]
    broken = []
    for rule in ("PORT004", "PORT006", "PORT010"):
        path = OUT / f"{rule.lower()}_bad.onnx"
        path.write_bytes(build.load(rule, "bad").SerializeToString())
        broken.append(validate(path, Policy()))
    return [Block("exported fixture models", "each should pass", tuple(good), True),
            Block("deliberately broken ONNX files", "one rule's bad fixture each: each should fail", tuple(broken), False),
            Block("deliberately broken PyTorch models", "each export should be refused: nothing is written, the "
                  "findings point at the source line", tuple(_refused()), False)]


def main() -> int:
    text = get_formatter("text", color=sys.stdout.isatty())
    blocks = _blocks()
    for index, block in enumerate(blocks):
        print(f"{'' if index == 0 else chr(10)}{block.heading}")
        print(text.render(block.reports), end="")
    line, code = verdict(blocks)
    print(f"\n{line}")
    print(f"Next: `.venv/bin/portable validate {OUT} --format sarif`, "
          f"`.venv/bin/portable compare {OUT}/cnn.onnx --reference fixtures/models/cnn.py:build`.")
    return code


if __name__ == "__main__":
    sys.exit(main())
