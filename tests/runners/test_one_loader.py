"""One loader per runtime (issue 31): every ONNX Runtime session, OpenVINO model and tract model the product
makes comes from ``portable.runners.sessions`` (``session_from_onnx``, ``openvino_model`` /
``openvino_compiled``, ``tract_model``), for the runners and ``validate --live`` alike. The product's source is
parsed and a runtime's constructor called anywhere else fails here, unless it is listed below with its reason.

The loaders themselves are run on fake ``openvino`` and ``tract`` modules (both are optional, ``make
targets-venv``; the real ones are run by tests/runners/test_runtimes.py where they are installed)."""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from portable.runners.base import RunnerFailed
from portable.runners.sessions import LoadFailed, openvino_compiled, openvino_model, tract_model

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("portable", "exporters", "validators", "runners")  # the packages installed as portable.*
FACTORY = "runners/sessions.py"
CONSTRUCTORS = {  # the name called -> what the call makes
    "InferenceSession": "an ONNX Runtime session (use session_from_onnx)",
    "read_model": "an OpenVINO model (use openvino_model)",
    "compile_model": "an OpenVINO compiled model (use openvino_compiled)",
    "onnx": "tract's ONNX loader, tract.onnx() (use tract_model)",
}
EXCEPTIONS: dict[tuple[str, str], str] = {  # (constructor, file relative to the repository) -> why it may call it
    # none today: portable/quantization/ and portable/cli/quantize.py use the factory (speed.cpu_session); a
    # construction there would be listed as "quantize's sessions: next change"
}


def _called(node: ast.Call) -> str | None:
    """The name ``node`` calls: ``x.NAME(...)``, ``NAME(...)``, or ``getattr(x, "NAME")(...)``."""
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    if (isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "getattr"
            and len(func.args) > 1 and isinstance(func.args[1], ast.Constant) and isinstance(func.args[1].value, str)):
        return func.args[1].value
    return None


def constructions(source: str) -> dict[str, list[int]]:
    """Constructor -> the lines that call it, however it is reached (``ort.InferenceSession``, a bare imported
    name, ``core.read_model``, ``self._tract.onnx()``, ``getattr(ort, "InferenceSession")(...)``); comments,
    docstrings and strings that hold the name are no call."""
    found: dict[str, list[int]] = {}
    for node in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)):
        name = _called(node)
        if name in CONSTRUCTORS:
            found.setdefault(name, []).append(node.lineno)
    return {name: sorted(lines) for name, lines in found.items()}


def product_constructions() -> dict[str, dict[str, list[int]]]:
    """Constructor -> file -> lines, over the product's sources (not tests/, bench/, docs/)."""
    found: dict[str, dict[str, list[int]]] = {name: {} for name in CONSTRUCTORS}
    for package in PRODUCT:
        for file in sorted((ROOT / package).rglob("*.py")):
            for name, lines in constructions(file.read_text(encoding="utf-8")).items():
                found[name][file.relative_to(ROOT).as_posix()] = lines
    return found


@pytest.mark.parametrize("name", list(CONSTRUCTORS))
def test_each_runtime_is_loaded_only_by_the_factory(name: str) -> None:
    found = product_constructions()[name]
    assert FACTORY in found, f"the factory itself no longer calls {name}(: update this test"
    stray = {file: lines for file, lines in found.items() if file != FACTORY and (name, file) not in EXCEPTIONS}
    assert not stray, f"{name}( called outside {FACTORY}, making {CONSTRUCTORS[name]}: {stray}"


def test_every_listed_exception_still_holds_a_construction() -> None:
    found = product_constructions()
    stale = [key for key in EXCEPTIONS if key[1] not in found[key[0]]]
    assert not stale, f"no such construction left in {stale}: drop them from EXCEPTIONS"


def test_the_scan_sees_every_spelling() -> None:
    source = ('"""A docstring: ort.InferenceSession(path), core.read_model(path), tract.onnx().load(path)."""\n'
              "import onnxruntime as ort\nfrom onnxruntime import InferenceSession\n"
              "a = ort.InferenceSession('m.onnx')\nb = InferenceSession('m.onnx')\n"
              "c = getattr(ort, 'InferenceSession')('m.onnx')\nd = 'InferenceSession(' \n"
              "# core.compile_model(model) in a comment\n"
              "e = core.read_model('m.onnx')\nf = ov.Core().compile_model(e, 'CPU')\n"
              "g = tract.onnx().load('m.onnx')\nh = self._tract.onnx()\n")
    assert constructions(source) == {"InferenceSession": [4, 5, 6], "read_model": [9], "compile_model": [10],
                                     "onnx": [11, 12]}


# --- the loaders, on fake runtimes ------------------------------------------------------------------------


def _relu(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    return path


class _Op:
    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind

    def get_friendly_name(self) -> str:
        return self.name

    def get_type_name(self) -> str:
        return self.kind


COMPILED: list[tuple[str, str, dict[str, str]]] = []  # what the fake Core compiled: (path, device, config)


class _Compiled:
    """OpenVINO's compiled model of the Relu: called on the feeds, results keyed by its outputs."""

    outputs = ("y",)

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": np.maximum(feeds["x"], 0)}


class _Core:
    """OpenVINO's ``Core``: ``read_model`` fails on a path holding "bad", ``compile_model`` on device "GPU"."""

    def read_model(self, path: str) -> Any:
        if "bad" in path:
            raise RuntimeError("Exception from src/frontends/onnx.cpp:\nCould not find a translator for NoSuchOp")
        return SimpleNamespace(path=path, get_ops=lambda: [_Op("x", "Parameter"), _Op("relu", "Relu"),
                                                           _Op("sin", "Sin")])

    def compile_model(self, model: Any, device: str, config: dict[str, str]) -> Any:
        if device == "GPU":
            raise RuntimeError("no GPU plugin")
        COMPILED.append((model.path, device, config))
        return _Compiled()

    def query_model(self, model: Any, device: str) -> dict[str, str]:
        return {"relu": device}


@pytest.fixture
def fake_openvino(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = ModuleType("openvino")
    module.Core = _Core  # type: ignore[attr-defined]
    module.get_version = lambda: "fake-2025"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "openvino", module)
    return module


class _Typed:
    """tract's typed model: ``transform`` records the symbols bound, ``into_runnable`` runs a Relu."""

    def __init__(self) -> None:
        self.symbols: dict[str, int] = {}

    def transform(self, transform: Any) -> None:
        self.symbols.update(transform.symbols)

    def into_runnable(self) -> Any:
        return SimpleNamespace(run=lambda arrays: [SimpleNamespace(to_numpy=lambda a=a: np.maximum(a, 0))
                                                   for a in arrays])


def _inference(path: str) -> Any:
    if "bad" in path:
        raise RuntimeError("Translating node #0 \"n\" NoSuchOp ToTypedTranslator\nStack backtrace:\n  0: tract::x")
    if "untyped" in path:
        return SimpleNamespace(into_model=lambda: (_ for _ in ()).throw(ValueError("Failed analyse for node #3")))
    return SimpleNamespace(into_model=_Typed)


@pytest.fixture
def fake_tract(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module, transform = ModuleType("tract"), ModuleType("tract.transform")
    module.onnx = lambda: SimpleNamespace(load=_inference)  # type: ignore[attr-defined]
    module.version = lambda: "fake-0.23"  # type: ignore[attr-defined]
    transform.SetSymbols = lambda symbols: SimpleNamespace(symbols=symbols)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tract", module)
    monkeypatch.setitem(sys.modules, "tract.transform", transform)
    return module


@pytest.mark.parametrize("package", ["openvino", "tract"])
def test_a_runtime_that_is_not_installed_is_said_once(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import openvino: ImportError
    loader = openvino_model if package == "openvino" else tract_model
    with pytest.raises(LoadFailed) as failed:
        loader("m.onnx")
    assert str(failed.value) == f"{package} is not installed (make targets-venv)"
    assert isinstance(failed.value, RunnerFailed) and isinstance(failed.value.error, ImportError)


def test_openvino_loaders_word_their_refusals(fake_openvino: ModuleType) -> None:
    core, model = openvino_model(Path("good.onnx"))
    assert model.path == "good.onnx"
    with pytest.raises(LoadFailed, match=r"^OpenVINO read_model fails: RuntimeError: Exception from src"):
        openvino_model("bad.onnx")
    with pytest.raises(LoadFailed, match=r"^OpenVINO compile_model\(GPU\) fails: RuntimeError: no GPU plugin$"):
        openvino_compiled(core, model, "GPU")


def test_the_openvino_runner_and_the_live_answer_share_the_loader(fake_openvino: ModuleType, tmp_path: Path) -> None:
    from portable.runners.openvino_runner import CONFIG, OpenVinoRunner
    from portable.validators.targets.live import LIVE

    runner = OpenVinoRunner(_relu(tmp_path / "relu.onnx"))
    runner.load()
    assert COMPILED[-1] == (str(tmp_path / "relu.onnx"), "CPU", CONFIG) and runner.version == "fake-2025"
    out = runner.infer({"x": np.array([[-1.0, 2.0]], np.float32)})
    assert out[0].tolist() == [[0.0, 2.0]]
    with pytest.raises(RunnerFailed, match="^OpenVINO read_model fails: RuntimeError"):
        OpenVinoRunner(tmp_path / "bad.onnx").load()
    ask = LIVE["openvino"][1]
    assert ask(str(tmp_path / "relu.onnx"), Counter()).pairs == (("verdict", "read_model ok; query_model(CPU) takes 1/2 "
                                                                            "operations"),)
    verdict = dict(ask(str(tmp_path / "bad.onnx"), Counter()).pairs)["verdict"]
    assert verdict == "read_model fails: Could not find a translator for NoSuchOp"  # the line that names it


def test_tract_loader_words_its_refusals(fake_tract: ModuleType) -> None:
    assert isinstance(tract_model(Path("good.onnx")), _Typed)
    with pytest.raises(LoadFailed) as failed:
        tract_model("bad.onnx")
    assert str(failed.value) == 'tract does not load the model: RuntimeError: Translating node #0 "n" NoSuchOp ' \
                                "ToTypedTranslator"  # no Rust backtrace
    with pytest.raises(LoadFailed, match="^tract cannot type the model: ValueError: Failed analyse for node #3$"):
        tract_model("untyped.onnx")


def test_the_tract_runner_and_the_live_answer_share_the_loader(fake_tract: ModuleType, tmp_path: Path) -> None:
    from portable.runners.tract_runner import TractRunner
    from portable.validators.targets.live import LIVE

    runner = TractRunner(_relu(tmp_path / "relu.onnx"))
    runner.load()
    assert runner.version == "fake-0.23"
    assert runner.infer({"x": np.array([[-1.0, 2.0]] * 3, np.float32)})[0].tolist() == [[0.0, 2.0]] * 3
    assert list(runner._runnables) == [(("batch", 3),)]
    bad = _relu(tmp_path / "bad.onnx")
    with pytest.raises(RunnerFailed, match="^tract does not load the model: RuntimeError: Translating node"):
        TractRunner(bad).load()
    ask = LIVE["tract"][1]
    assert ask(str(tmp_path / "relu.onnx"), Counter()).pairs == (("verdict", "loads (tract.onnx().load(...).into_model())"),)
    verdict = dict(ask(str(bad), Counter()).pairs)["verdict"]
    assert verdict == 'does not load: RuntimeError: Translating node #0 "n" NoSuchOp ToTypedTranslator'
