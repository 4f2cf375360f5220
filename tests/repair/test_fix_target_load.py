"""Issue 32's bad input: ``fix --target NAME`` on a model the target cannot load at all is exit 1, the target and
the reason named (PORT201, an error where the target has no fallback: webnn), while a target that falls back
takes it as a warning; the file is still written (what remains is listed), unless ``--strict``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from portable.errors import ExitCode
from portable.policy import Policy
from portable.repair import fix
from portable.validators.targets import load_profile

WHY = "webnn: Mod is not in webnn's table; the model does not load there (no fallback)"


def _mod_model(path: Path) -> Path:
    """x[batch, 4] -> Relu -> Mod(fmod, 3): webnn's table has no Mod row."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Mod", ["r", "d"], ["y"], fmod=1, name="mod")]
    graph = helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(np.array([3.0], np.float32), "d")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def test_the_premise_webnn_has_no_fallback_and_no_mod() -> None:
    profile = load_profile("webnn")
    assert profile.fallback is None and profile.entry("", "Mod") is None


def test_fix_for_a_target_that_cannot_load_the_model_is_exit_1_naming_it(tmp_path: Path) -> None:
    result = fix(_mod_model(tmp_path / "in.onnx"), tmp_path / "out.onnx", policy=Policy(targets=("webnn",)))
    assert result.exit_code == ExitCode.FINDINGS and not result.ok
    assert [(f.rule_id, f.severity.value, f.message) for f in result.remaining] == [("PORT201", "error", WHY)]
    assert result.remaining[0].location.node == "mod"
    assert result.proof is not None and result.proof.ok  # the fix itself is sound: what remains is the target's
    assert result.written and (tmp_path / "out.onnx").exists()  # written, as for any finding (not under --strict)
    assert result.partitions["webnn"]["after"] == 0  # does not load: no partition


def test_the_cli_says_which_target_and_why(cli, tmp_path: Path) -> None:
    source = _mod_model(tmp_path / "in.onnx")
    text = cli("fix", str(source), "-o", str(tmp_path / "out.onnx"), "--target", "webnn")
    assert text.exit_code == 1, text.output
    assert f"PORT201 error: main, node 'mod' (Mod): {WHY}" in text.stdout
    data = json.loads(cli("fix", str(source), "-o", str(tmp_path / "out2.onnx"), "--target", "webnn",
                          "--format", "json").stdout)
    assert data["exit_code"] == 1 and [(f["rule"], f["severity"], f["message"]) for f in data["remaining"]] == [
        ("PORT201", "error", WHY)]
    strict = cli("fix", str(source), "-o", str(tmp_path / "out3.onnx"), "--target", "webnn", "--strict")
    assert strict.exit_code == 1 and not (tmp_path / "out3.onnx").exists()


def test_a_target_with_a_fallback_takes_it_as_a_warning(tmp_path: Path) -> None:
    """webgpu has no Mod either, but hands it to the CPU EP: the model loads, split; exit 0."""
    assert load_profile("webgpu").fallback == "CPUExecutionProvider" and load_profile("webgpu").entry("", "Mod") is None
    result = fix(_mod_model(tmp_path / "in.onnx"), tmp_path / "out.onnx", policy=Policy(targets=("webgpu",)))
    assert result.exit_code == ExitCode.OK and not result.remaining
    assert result.report is not None
    found = [(f.rule_id, f.severity.value) for f in result.report.findings if f.rule_id == "PORT201"]
    assert found == [("PORT201", "warning")]
