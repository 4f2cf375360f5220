"""The DirectML and WebNN profiles: the WebNN table's parser on a small table in its upstream format,
their pinned sources, an op the table lacks (a fallback on directml, an error on webnn, which has
none: the profile's ``fallback`` says so, as data), and a WebNN constraint stated on the node it
restricts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from onnx import TensorProto, helper
from support import save

from portable.validators.targets import TARGETS, load_profile, parsers
from portable.validators.targets import generate as gen
from portable.validators.targets import profile as profile_module
from portable.validators.targets.profile import OpEntry, VersionRange

WEBNN = """## Operators Support Table

| Operator | Opset | WebNN API | Comments |
|:------:|:------:|:------:|:------|
| Widen | ai.onnx(7-12, 13, 14+) | add | |
| Pick| ai.onnx(11-13, 14+) | gather | Input 'axes' if present should be a constant |
| Rotate | ai.onnx(23+), com.example(1+) | add, concat | |
"""


def test_the_webnn_table_gives_ranges_per_domain_and_constraints():
    ops = parsers.webnn_ops(WEBNN).ops
    assert sorted(ops) == ["ai.onnx:Pick", "ai.onnx:Rotate", "ai.onnx:Widen", "com.example:Rotate"]
    assert ops["ai.onnx:Widen"] == OpEntry(versions=(VersionRange(7, 12), VersionRange(13, 13), VersionRange(14)))
    assert ops["ai.onnx:Pick"].notes == "Input 'axes' if present should be a constant"
    assert ops["com.example:Rotate"].versions == (VersionRange(1),) and ops["ai.onnx:Rotate"].versions == (VersionRange(23),)


@pytest.mark.parametrize(("name", "pin", "fallback", "count"), [
    ("directml", gen.KERNELS, "CPUExecutionProvider", 205),
    ("webnn", gen.WEBNN, None, 111),
])
def test_the_new_profiles_carry_their_pinned_sources(name, pin, fallback, count):
    profile = load_profile(name)
    assert name in TARGETS and gen.SPECS[name].pins == (pin,)
    (source,) = profile.sources
    assert (source.repository, source.path, source.commit, source.blob) == (pin.repository, pin.path, pin.commit, pin.blob)
    assert source.url == pin.url and profile.fallback == fallback and len(profile.ops) == count


def _one_op(op: str, tmp_path: Path, shape: tuple[int, ...] = (2, 3), out: tuple[int, ...] | None = None) -> str:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape if out is None else out))
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], name=op.lower())], "m", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return str(save(model, tmp_path / f"{op}.onnx"))


def test_an_op_the_table_lacks_falls_back_on_directml_and_stops_the_load_on_webnn(cli, tmp_path):
    det = cli("validate", "--target", "directml", _one_op("Det", tmp_path, (3, 3), ()))  # the CPU EP has Det, DirectML not
    assert det.exit_code == 0, det.output
    assert "directml: Det is not in directml's table; it falls back to CPUExecutionProvider" in det.output
    atan = cli("validate", "--target", "directml,webnn", _one_op("Atan", tmp_path))
    assert atan.exit_code == 1, atan.output
    assert "error   PORT201" in atan.output and "webnn: Atan is not in webnn's table; the model does not load there " \
                                                 "(no fallback)" in atan.output
    assert "  target   webnn: 0/1 nodes, does not load: Atan x1" in atan.output
    assert "directml: Atan" not in atan.output  # DirectML has an Atan kernel
    assert cli("validate", "--target", "webnn", _one_op("Sin", tmp_path)).exit_code == 0  # WebNN has Sin


@pytest.fixture
def webnn_with_a_fallback(tmp_path, monkeypatch):
    """The committed profiles, with webnn's ``fallback`` changed to the CPU EP: nothing else."""
    folder = tmp_path / "profiles"
    shutil.copytree(profile_module.PROFILES, folder)
    data = json.loads((folder / "webnn.json").read_text())
    (folder / "webnn.json").write_text(json.dumps(data | {"fallback": "CPUExecutionProvider"}))
    monkeypatch.setattr(profile_module, "PROFILES", folder)
    load_profile.cache_clear()
    yield
    load_profile.cache_clear()


def test_the_severity_is_the_profiles_data(cli, tmp_path, webnn_with_a_fallback):
    result = cli("validate", "--target", "webnn", _one_op("Atan", tmp_path))
    assert result.exit_code == 0, result.output  # the same node, on a profile that states a fallback: a warning
    assert "webnn: Atan is not in webnn's table; it falls back to CPUExecutionProvider" in result.output


def _reduce_mean(tmp_path: Path) -> str:
    """ReduceMean-18 whose ``axes`` is a graph input: not the constant WebNN's table asks for."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean")
    model = helper.make_model(helper.make_graph([node], "m", [x, axes], [y]), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return str(save(model, tmp_path / "mean.onnx"))


def test_a_webnn_constraint_is_stated_on_the_node_it_restricts(cli, tmp_path):
    path = _reduce_mean(tmp_path)  # PORT007 would say that axes as an input is itself a problem
    result = cli("validate", "--target", "webnn,directml", "--select", "PORT201,PORT203,PORT204", path)
    assert result.exit_code == 0, result.output  # stated, not checked: information
    assert "PORT204 [target-restrictions] main, node 'mean' (ReduceMean): webnn: 1 ReduceMean node; its table " \
           "states: Input 'axes' if present should be a constant (not checked)" in result.output
    assert "directml: 1 ReduceMean node" not in result.output  # the kernel table states no restrictions
    other = cli("validate", "--target", "webnn", _one_op("Sin", tmp_path))
    assert "PORT204" not in other.output  # Sin's row has no constraint


# How PORT201's and PORT203's docstrings (which SARIF carries) name a target's runtime.
RUNTIME_WORDS = {"ort-cpu": "CPU provider", "openvino": "OpenVINO", "tract": "tract", "webnn": "WebNN",
                 "litert": "LiteRT"}


def test_the_rules_name_the_runtimes_without_a_fallback_as_the_profiles_say():
    """The docstrings list the runtimes without a fallback by hand: they must keep up with the profiles
    (PORT201/PORT203 once named three of the five)."""
    import re

    from portable.validators.rules.port201_target_ops import TargetOpSupport
    from portable.validators.rules.port203_target_partitions import TargetPartitions

    without = {name for name in TARGETS if load_profile(name).fallback is None}
    for rule in (TargetOpSupport, TargetPartitions):
        text = " ".join((rule.__doc__ or "").split())
        listed = re.search(r"(?:has none|without a fallback) \(([^)]*)\)", text)
        assert listed is not None, rule.id
        items = [item.strip() for item in listed.group(1).split(",")]
        named = {name for name in without for item in items if RUNTIME_WORDS[name] in item}
        assert named == without and len(items) == len(without), (rule.id, items)
