"""The fixture models ``make demo`` exports."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from portable.exporters.api import ExportResult

__all__ = ["DEMO_SPECS", "demo_models"]

_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "models"
DEMO_SPECS = {
    "cnn": f"{_FIXTURES / 'cnn.py'}:build",
    "transformer": f"{_FIXTURES / 'transformer.py'}:build",
}


def demo_models(out_dir: str | Path = "out", *, quiet: bool = False) -> dict[str, ExportResult]:
    """Export the fixture CNN and transformer into ``out_dir``; name -> ExportResult."""
    from portable.exporters.spec_export import export_spec

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    return {name: export_spec(spec, folder / f"{name}.onnx", force=True, quiet=quiet) for name, spec in DEMO_SPECS.items()}
