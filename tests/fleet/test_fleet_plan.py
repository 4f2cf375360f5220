"""Bad input to ``portable fleet run`` is one line, exit 2, before any work: a TOML error with its line and
key, an unknown step or target, a model named twice, an unreachable --address, --engine ray without Ray."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest

GOOD = '[defaults]\nsteps = ["export", "validate"]\ntargets = ["qnn"]\n\n[[model]]\nname = "a"\nmodel = "m.onnx"\n'


def _run(cli, tmp_path: Path, text: str, *extra: str):
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    result = cli("fleet", "run", str(path), "-o", str(tmp_path / "out"), *extra)
    return result, result.output.strip().splitlines()


@pytest.mark.parametrize(("text", "said"), [
    (GOOD.replace('targets = ["qnn"]', 'targets = ["qnn"'), "not valid TOML at line 5, key 'targets' (its value began at line 3)"),
    (GOOD.replace('model = "m.onnx"', 'model = m.onnx'), "not valid TOML at line 7, key 'model'"),
    (GOOD.replace('"validate"', '"validat"'), "unknown step 'validat' in model 'a' (known: export, validate"),
    (GOOD.replace('"qnn"', '"qnx"'), "unknown target 'qnx' for model 'a'"),
    (GOOD + '\n[[model]]\nname = "a"\nmodel = "n.onnx"\n', "model 'a' is named twice"),
    (GOOD.replace("model = ", "modle = "), "unknown key 'model[0].modle'"),
    (GOOD.replace('"m.onnx"', '"m.onnx"\ntimeout-s = -1'), "'model[0].timeout-s' must be a number >= 1"),
])
def test_a_bad_fleet_file_is_one_line_exit_2_and_nothing_runs(cli, tmp_path, text, said):
    result, lines = _run(cli, tmp_path, text)
    assert result.exit_code == 2 and len(lines) == 1 and said in lines[0], result.output
    assert str(tmp_path / "fleet.toml") in lines[0] and not (tmp_path / "out").exists()


def test_a_good_file_passes_the_same_checks(cli, tmp_path):
    from portable.fleet import check_fleet

    (tmp_path / "fleet.toml").write_text(GOOD)
    fleet = check_fleet(tmp_path / "fleet.toml")
    assert fleet.models[0].settings.steps == ("export", "validate") and fleet.models[0].settings.targets == ("qnn",)
    assert fleet.models[0].model == "m.onnx"  # not beside the fleet file: as written (its record will say it is missing)


def test_a_missing_onnx_model_is_its_records_error_naming_the_file(tmp_path):
    from portable.fleet.builtin import export
    from portable.fleet.records import StepContext

    missing = str(tmp_path / "m.onnx")
    outcome = export(StepContext("a", missing, (), None, (), {"batch": "dynamic"}, None, str(tmp_path)))
    assert outcome.status == "error" and outcome.reason == f"exit 3: {missing}: no such file"


def test_an_unreachable_address_is_exit_2_before_any_work(cli, tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    result, lines = _run(cli, tmp_path, GOOD, "--engine", "ray", "--address", f"127.0.0.1:{port}")
    assert result.exit_code == 2 and len(lines) == 1 and f"cannot reach the Ray cluster at 127.0.0.1:{port}" in lines[0]
    assert not (tmp_path / "out").exists()


def test_the_ray_engine_without_ray_names_the_extra(cli, tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    result, lines = _run(cli, tmp_path, GOOD, "--engine", "ray")
    assert result.exit_code == 2 and len(lines) == 1
    assert "--engine ray needs Ray, which is not installed here: pip install 'portable-onnx[ray]'" in lines[0]
