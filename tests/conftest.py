"""Fixtures shared by the tests, and the gpu marker's skip."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import rule_fixtures, save


@pytest.fixture
def fixture_file(tmp_path: Path):
    """Write a rule fixture to disk: ``fixture_file("PORT004", "bad") -> Path``."""

    def make(rule: str, kind: str) -> Path:
        return save(rule_fixtures.load(rule, kind), tmp_path / rule / f"{kind}.onnx")

    return make


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
