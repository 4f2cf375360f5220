"""Fixtures shared by the tests (a rule fixture on disk, the CLI in-process), and the gpu marker's skip.

transformers imports torchvision when it is installed (``make zoo-venv``); PyPI's torchvision is a CUDA
build whose ops do not load beside the CPU torch, so they are defined first, as the zoo's harness does
(without them every transformers model fails: "Could not import module 'LlamaConfig'")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from support import rule_fixtures, save

if importlib.util.find_spec("torchvision") is not None:
    from portable.torchvision_ops import register_torchvision_ops

    register_torchvision_ops()


@pytest.fixture
def fixture_file(tmp_path: Path):
    """Write a rule fixture to disk: ``fixture_file("PORT004", "bad") -> Path``."""

    def make(rule: str, kind: str) -> Path:
        return save(rule_fixtures.load(rule, kind), tmp_path / rule / f"{kind}.onnx")

    return make


@pytest.fixture(scope="session")
def cli():
    """The ``portable`` CLI run in-process by click's runner: ``cli("validate", path) -> Result``.

    Exceptions the CLI does not handle propagate (``catch_exceptions=False``), so a crash
    fails the test with its traceback instead of passing as some exit code. Each call gets a
    fresh runner, so the fixture holds no state: session scope lets module-scoped fixtures use it."""
    from click.testing import CliRunner

    from portable.cli import cli as group

    def invoke(*args: str, **kwargs):
        kwargs.setdefault("catch_exceptions", False)
        return CliRunner().invoke(group, list(args), **kwargs)

    return invoke


@pytest.fixture
def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if any(item.get_closest_marker("gpu") for item in items):
        import torch

        if not torch.cuda.is_available():
            skip = pytest.mark.skip(reason="needs CUDA")
            for item in items:
                if item.get_closest_marker("gpu"):
                    item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_llm_pair(tmp_path_factory):
    """A text-generation pair of ``fixtures/models/tiny_llm.py:llama`` (C 64, P 8), exported once per session
    (with its proof: 16 greedy tokens): ``(result, model)``."""
    from support import FIXTURES

    from portable.exporters.textgen import export_text_generation_spec

    out = tmp_path_factory.mktemp("tiny_llm") / "llama"
    spec = f"{FIXTURES / 'models' / 'tiny_llm.py'}:llama"
    result = export_text_generation_spec(spec, out, context=64, prefill=8, tokens=16)
    from portable.spec import load_spec

    return result, load_spec(spec).module
