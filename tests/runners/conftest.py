"""Shared fixtures: the tiny models, exported once per session, and perturbed copies."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import onnx
import pytest
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent
MODELS_FILE = HERE / "runner_models.py"


def _models() -> ModuleType:
    name = "portable_tests_runner_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, MODELS_FILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def models() -> ModuleType:
    return _models()


@pytest.fixture(scope="session")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runner-onnx")


@pytest.fixture(scope="session")
def cnn_onnx(models: ModuleType, onnx_dir: Path) -> Path:
    module, example = models.cnn()
    return Path(models.export(module, example, str(onnx_dir / "cnn.onnx"), [{0: "batch"}]))


@pytest.fixture(scope="session")
def encoder_onnx(models: ModuleType, onnx_dir: Path) -> Path:
    module, example = models.encoder()
    return Path(models.export(module, example, str(onnx_dir / "encoder.onnx"), [{0: "batch", 1: "seq"}]))


@pytest.fixture(scope="session")
def cnn_nan_onnx(models: ModuleType, onnx_dir: Path) -> Path:
    module, example = models.cnn_nan()
    return Path(models.export(module, example, str(onnx_dir / "cnn_nan.onnx"), [{0: "batch"}]))


def rewrite(source: Path, target: Path, edit: Callable[[onnx.ModelProto], None]) -> Path:
    model = onnx.load(str(source))
    edit(model)
    onnx.save(model, str(target))
    return target


def scale_initializer(name: str, factor: float) -> Callable[[onnx.ModelProto], None]:
    def edit(model: onnx.ModelProto) -> None:
        for index, init in enumerate(model.graph.initializer):
            if init.name == name:
                scaled = numpy_helper.to_array(init) * factor
                model.graph.initializer[index].CopyFrom(numpy_helper.from_array(scaled.astype(scaled.dtype), name))
                return
        raise AssertionError(f"no initializer {name}")

    return edit


def set_float_attribute(op_type: str, attribute: str, value: float) -> Callable[[onnx.ModelProto], None]:
    """Change ``attribute`` on the first ``op_type`` node."""

    def edit(model: onnx.ModelProto) -> None:
        for node in model.graph.node:
            if node.op_type == op_type:
                for attr in node.attribute:
                    if attr.name == attribute:
                        attr.f = value
                        return
                node.attribute.append(onnx.helper.make_attribute(attribute, value))
                return
        raise AssertionError(f"no {op_type} node")

    return edit


@pytest.fixture(scope="session")
def cnn_scaled_onnx(cnn_onnx: Path, onnx_dir: Path) -> Path:
    """The CNN with its second convolution's weight scaled by 1.01."""
    return rewrite(cnn_onnx, onnx_dir / "cnn_scaled.onnx", scale_initializer("conv2.weight", 1.01))


@pytest.fixture(scope="session")
def encoder_eps_onnx(encoder_onnx: Path, onnx_dir: Path) -> Path:
    """The encoder with its first LayerNormalization's epsilon changed from 1e-5 to 0.1."""
    return rewrite(encoder_onnx, onnx_dir / "encoder_eps.onnx", set_float_attribute("LayerNormalization", "epsilon", 0.1))


@pytest.fixture(scope="session")
def encoder_fp16_onnx(models: ModuleType, onnx_dir: Path) -> Path:
    module, example = models.encoder_fp16()
    return Path(models.export(module, example, str(onnx_dir / "encoder_fp16.onnx"), [{0: "batch", 1: "seq"}]))


@pytest.fixture(scope="session")
def encoder_fp16_eps_onnx(encoder_fp16_onnx: Path, onnx_dir: Path) -> Path:
    """The fp16 encoder with its first LayerNormalization's epsilon changed to 0.1."""
    edit = set_float_attribute("LayerNormalization", "epsilon", 0.1)
    return rewrite(encoder_fp16_onnx, onnx_dir / "encoder_fp16_eps.onnx", edit)


@pytest.fixture(scope="session")
def cnn_fp16_onnx(models: ModuleType, onnx_dir: Path) -> Path:
    module, example = models.cnn_fp16()
    return Path(models.export(module, example, str(onnx_dir / "cnn_fp16.onnx"), [{0: "batch"}]))


@pytest.fixture(scope="session")
def cnn_fp16_scaled(cnn_fp16_onnx: Path, onnx_dir: Path) -> dict[float, Path]:
    """The fp16 CNN with its second convolution's weight scaled by 1.01 and by 1.1."""
    return {f: rewrite(cnn_fp16_onnx, onnx_dir / f"cnn_fp16_x{f}.onnx", scale_initializer("conv2.weight", f))
            for f in (1.01, 1.1)}
