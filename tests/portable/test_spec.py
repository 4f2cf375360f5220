"""Loading a SPEC: a file's folder is on sys.path while it loads; a typo in the callable's name is a
usage error that names the close ones."""

from __future__ import annotations

import sys

import pytest

from portable.errors import ExitCode, UsageError
from portable.spec import load_spec

MODEL = """
import torch
from truth_sibling_layers import Block


def build():
    return torch.nn.Sequential(Block()), (torch.randn(2, 4),)
"""
LAYERS = """
import torch


class Block(torch.nn.Linear):
    def __init__(self):
        super().__init__(4, 4)
"""


def test_a_file_spec_imports_its_sibling_and_sys_path_is_restored(tmp_path):
    (tmp_path / "truth_sibling_layers.py").write_text(LAYERS)
    (tmp_path / "truth_sibling_model.py").write_text(MODEL)
    before = list(sys.path)
    loaded = load_spec(f"{tmp_path / 'truth_sibling_model.py'}:build")
    assert type(loaded.module[0]).__name__ == "Block"
    assert sys.path == before


def test_a_typo_in_the_callable_is_a_usage_error_with_did_you_mean(cli):
    with pytest.raises(UsageError, match=r"no attribute 'biuld'; did you mean 'build'\?"):
        load_spec("fixtures/models/cnn.py:biuld")
    result = cli("precheck", "fixtures/models/cnn.py:buidl")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "did you mean 'build'?" in result.stderr and result.stderr.count("\n") == 1


def test_a_name_far_from_any_lists_the_callables():
    with pytest.raises(UsageError, match=r"no attribute 'zzzz'; its callables: .*build"):
        load_spec("fixtures/models/cnn.py:zzzz")
