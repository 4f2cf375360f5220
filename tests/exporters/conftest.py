"""Shared exports: each fixture model is exported once per test session (small models, ~3 s each)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "models"


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exports")


def _export(name: str, out: Path, **kwargs):
    from portable.exporters.spec_export import export_spec

    return export_spec(str(FIXTURES / f"{name}.py") + ":build", out, **kwargs)


@pytest.fixture(scope="session")
def cnn_export(export_dir: Path):
    return _export("cnn", export_dir / "cnn.onnx")


@pytest.fixture(scope="session")
def transformer_export(export_dir: Path):
    return _export("transformer", export_dir / "transformer.onnx")


@pytest.fixture(scope="session")
def transformer_static(export_dir: Path):
    return _export("transformer", export_dir / "transformer_b4.onnx", batch=4)


@pytest.fixture(scope="session")
def translated_transformer():
    """The transformer as torch translates it (before portable's passes), with its batch symbol."""
    from portable.exporters.job import capture_or_fail, make_job
    from portable.exporters.pipeline import translate
    from portable.exporters.spec_export import load_for_export

    module, args, names, root = load_for_export(str(FIXTURES / "transformer.py") + ":build", ())
    job = make_job(module.eval(), args, "unused.onnx", "dynamic", "fp32", None, names, root, None)
    captured = capture_or_fail(job)
    return translate(captured.program, job), captured.batch_symbol, root
