"""An unknown target name is bad input on every way in: the command line (validate, fix), the policy
table, the Python API and the profile generator each stop with a usage error (exit 2) that lists the
known names, which come from the one registry (``TARGETS``), new profiles included; nothing is checked."""

from __future__ import annotations

import re

import pytest
from onnx import TensorProto, helper
from support import save

from portable.errors import ConfigError, ExitCode, UsageError
from portable.policy import Policy, policy_from_mapping
from portable.validators import validate
from portable.validators.targets import TARGETS
from portable.validators.targets import generate as gen

KNOWN = ", ".join(TARGETS)


@pytest.fixture
def relu(tmp_path) -> str:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return str(save(model, tmp_path / "relu.onnx"))


def test_the_known_names_include_the_new_profiles():
    assert {"webgpu", "migraphx", "litert", "directml", "webnn"} <= set(TARGETS)


@pytest.mark.parametrize("command", [("validate",), ("fix", "-o", "{out}")])
def test_the_command_line_exits_2_listing_the_known_names(cli, relu, tmp_path, command):
    args = [a.format(out=tmp_path / "fixed.onnx") for a in command]
    result = cli(*args, "--target", "webgpu,npu9000", relu)
    assert result.exit_code == int(ExitCode.USAGE) == 2, result.output
    assert f"unknown target(s) npu9000 (known: {KNOWN}, or all)" in result.output
    assert not (tmp_path / "fixed.onnx").exists()


def test_the_policy_table_names_the_key_and_the_known_names():
    with pytest.raises(ConfigError, match=re.escape(f"'targets': unknown target(s) tpu (known: {KNOWN}, or all)")):
        policy_from_mapping({"targets": ["webgpu", "tpu"]})


def test_the_python_api_refuses_an_unknown_name_before_any_work(relu):
    """Not an internal error of PORT201 (its profile file missing): the same usage error as the CLI's."""
    with pytest.raises(UsageError, match=re.escape(f"unknown target(s) npu9000 (known: {KNOWN}, or all)")) as caught:
        validate(relu, Policy(targets=("webgpu", "npu9000")))
    assert caught.value.exit_code == ExitCode.USAGE
    assert validate(relu, Policy(targets=("webgpu", "migraphx"))).error is None


def test_the_generator_exits_2_listing_its_targets(capsys):
    with pytest.raises(SystemExit) as exited:
        gen.main(["webgpu", "npu9000"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "unknown target(s) npu9000" in err and all(name in err for name in TARGETS)
