"""Test support shared by every test module (importable: pytest's pythonpath holds tests/)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]  # the checkout
FIXTURES = ROOT / "fixtures"


def load_builder(folder: str):
    """``fixtures/FOLDER/build.py`` as a module (the fixtures are not a package)."""
    spec = importlib.util.spec_from_file_location(f"portable_{folder}_fixtures", FIXTURES / folder / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rule_fixtures = load_builder("rules")
fix_fixtures = load_builder("fix")


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def spec_of(name: str) -> str:
    """The SPEC of a fixture model (``fixtures/models/NAME.py:build``), relative to the repository root
    (the tests run from there)."""
    return f"fixtures/models/{name}.py:build"


def runner_spec(name: str) -> str:
    """A SPEC for ``compare --reference``: the callable ``name`` of tests/runners/runner_models.py."""
    return f"{ROOT / 'tests' / 'runners' / 'runner_models.py'}:{name}"
def _loaded(name: str, path: Path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def fixture_module(model: str):
    """``fixtures/models/MODEL.py`` as a module, loaded on first use."""
    return _loaded(f"portable_{model}_fixtures", FIXTURES / "models" / f"{model}.py")


def photos():
    """``fixtures/photos.py`` (crops of scikit-image's photos, calibration and held-out splits), loaded on first use."""
    return _loaded("portable_photo_fixtures", FIXTURES / "photos.py")


def tiny_llm():
    """``fixtures/models/tiny_llm.py`` as a module (its ``build(family, seed=...)``), loaded on first use (torch)."""
    return fixture_module("tiny_llm")


ML_PROGRAM = "coreml_supported_mlprogram_ops.md"


def checker_partitions(path: Path) -> int:
    """The CoreML ML Program partitions ONNX Runtime's usability checker counts (fixed sizes required, as its
    ``checker`` asks first), on the file with ONNX shape inference run, as the checker needs."""
    from onnxruntime.tools.mobile_helpers.usability_checker import check_coreml_partitions

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    saved = onnx.NodeProto.__hash__
    try:
        info = check_coreml_partitions(model, True, ML_PROGRAM)
    finally:
        onnx.NodeProto.__hash__ = saved  # the checker makes every NodeProto hashable by id()
    return int(info.num_partitions)


def load_fixture(relative: str, name: str | None = None):
    """A fixture module by its path under ``fixtures/`` (``models/minilm.py``, ``sentences.py``)."""
    spec = importlib.util.spec_from_file_location(name or f"portable_{Path(relative).stem}_fixture", FIXTURES / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
