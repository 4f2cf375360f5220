"""Unreadable inputs: one line naming the file and the problem, exit 3, never an exception."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest
from support import rule_fixtures, save

from portable.validators import validate


def _good_bytes() -> bytes:
    return rule_fixtures.load("PORT004", "good").SerializeToString()


def _case(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.onnx"
    if name == "empty":
        path.write_bytes(b"")
    elif name == "random":
        path.write_bytes(bytes(range(256)) * 4 + b"\xff\xff\xff")
    elif name == "not_a_model":  # a valid protobuf of another message type
        path.write_bytes(onnx.StringStringEntryProto(key="", value="not a model").SerializeToString())
    elif name == "over_2gib":  # sparse: costs no disk
        with open(path, "wb") as handle:
            handle.truncate(2 * 1024**3 + 1)
    return path


@pytest.mark.parametrize("name,expected", [
    ("missing", "no such file"),
    ("empty", "empty file"),
    ("random", "not a valid ONNX model"),
    ("not_a_model", "not an ONNX model"),
    ("over_2gib", "protobuf cannot parse"),
])
def test_unreadable_input(tmp_path, name, expected):
    path = _case(tmp_path, name)
    report = validate(path)
    assert report.exit_code == 3
    assert expected in report.error
    assert "\n" not in report.error


@pytest.mark.parametrize("cut", [1, 7, 40, 0.5, -3])
def test_truncated_model_is_never_a_crash(tmp_path, cut):
    data = _good_bytes()
    n = int(len(data) * cut) if isinstance(cut, float) else cut
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[:n])
    report = validate(path)
    # Either protobuf rejects it (3) or what remains parses and then breaks the contract (1).
    assert report.exit_code in (1, 3)
    assert (report.error is None) == (report.exit_code == 1)


def test_external_data_is_never_opened(tmp_path):
    """The declared external file is a named pipe: any reader would block forever."""
    model = rule_fixtures.load("PORT010", "bad")
    os.mkfifo(tmp_path / "weights.bin")
    path = save(model, tmp_path / "model.onnx")
    cwd = os.getcwd()
    os.chdir(tmp_path)  # also where a relative path would resolve from the working directory
    try:
        report = validate(path)
    finally:
        os.chdir(cwd)
    assert {f.rule_id for f in report.findings} == {"PORT010"}


def _external_constant(location: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 4] x) => (float[batch, 4] y) {
      w = Constant <value = float[4] {1.0, 2.0, 3.0, 4.0}> ()
      y = Mul(x, w)
    }""")
    tensor = model.graph.node[0].attribute[0].t
    tensor.ClearField("float_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return model


def test_external_data_in_a_constant_attribute_is_never_opened(tmp_path):
    """The checker must not see the path either: it would stat it (relative to the cwd)."""
    os.mkfifo(tmp_path / "const.bin")
    path = save(_external_constant("const.bin"), tmp_path / "model.onnx")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        report = validate(path)
    finally:
        os.chdir(cwd)
    assert {f.rule_id for f in report.findings} == {"PORT010"}, [f.message for f in report.findings]


def test_git_lfs_pointer_says_what_to_run(tmp_path):
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"ab" * 32 + b"\nsize 2048\n"
    report = validate(save_bytes(tmp_path / "m.onnx", pointer))
    assert report.exit_code == 3
    assert report.error == (f"a Git LFS pointer ({len(pointer)} bytes), not the model (2048 bytes, never fetched): "
                            "run `git lfs pull` in its repository")


def test_a_model_that_starts_like_a_pointer_is_still_parsed(tmp_path):
    """Only a small file is taken for a pointer: a real model's bytes are protobuf, never this text,
    but the size bound keeps a large file from ever being read as one."""
    big = b"version https://git-lfs.github.com/spec/v1\n" + b"x" * 2048
    report = validate(save_bytes(tmp_path / "big.onnx", big))
    assert report.exit_code == 3 and "Git LFS" not in (report.error or "")


def save_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
