"""``portable compare``'s three modes (ONNX Runtime against PyTorch, ``--runtime``, ``--task text-generation``):
one table says which mode each option belongs to (``COMPARE_MODES``), each mode's options dataclass has the
table's options for it, and an option given in another mode is refused (exit 2) naming it and its mode,
before anything is loaded."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import click
import pytest
from click.testing import CliRunner

from portable.cli.compare import (
    COMPARE_MODES,
    PYTORCH,
    RUNTIMES,
    TEXT_GENERATION,
    TorchCompareOptions,
    compare,
    compare_mode,
)
from portable.cli.options import ModeTable
from portable.cli.runtimes import RuntimesCompareOptions
from portable.cli.textgen import TextGenCompareOptions
from portable.errors import UsageError

DATACLASSES = {PYTORCH: TorchCompareOptions, RUNTIMES: RuntimesCompareOptions, TEXT_GENERATION: TextGenCompareOptions}
SELECTOR = "task"  # it picks the mode: no mode's dataclass holds it
NOWHERE = "nowhere.py:nothing"  # a reference that cannot load: a refusal comes first


def _options() -> set[str]:
    return {p.name for p in compare.params if p.name and p.name != "debug"}  # --debug: every command's


def test_the_table_names_every_option_of_compare():
    assert set(COMPARE_MODES.homes) == _options()


@pytest.mark.parametrize("mode", DATACLASSES)
def test_each_mode_dataclass_holds_the_table_options_of_its_mode(mode):
    assert {f.name for f in fields(DATACLASSES[mode])} == COMPARE_MODES.options_of(mode) - {SELECTOR}


def test_the_options_dataclasses_are_frozen():
    params = {name: None for name in COMPARE_MODES.homes}
    options = TorchCompareOptions.of(params)
    with pytest.raises(FrozenInstanceError):
        options.seed = 1


def test_runtime_and_task_pick_the_mode():
    assert compare_mode(None, "model") == PYTORCH
    assert compare_mode("ort", "model") == RUNTIMES
    assert compare_mode(None, "text-generation") == TEXT_GENERATION
    with pytest.raises(UsageError, match="--task text-generation has its own proof"):
        compare_mode("ort", "text-generation")


def _refused(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0], result.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "message"), [
    (["--runtime", "ort", "--ep", "cpu"],
     "--ep: an option of compare (ONNX Runtime against PyTorch) and compare --task text-generation, not of "
     "compare --runtime"),
    (["--runtime", "ort", "--compile-mode", "default"],  # given at its default is given
     "--compile-mode: an option of compare (ONNX Runtime against PyTorch), not of compare --runtime"),
    (["--runtime", "ort", "--no-latency", "--iterations", "3"],
     "--no-latency, --iterations: options of compare (ONNX Runtime against PyTorch) and compare --task "
     "text-generation, not of compare --runtime"),
    (["--reference", NOWHERE, "--golden", "g"],
     "--golden: an option of compare --runtime, not of compare (ONNX Runtime against PyTorch)"),
    (["--reference", NOWHERE, "--tokens", "4", "--reference-cap", "5"],
     "--reference-cap: an option of compare --runtime, not of compare (ONNX Runtime against PyTorch); "
     "--tokens: an option of compare --task text-generation, not of compare (ONNX Runtime against PyTorch)"),
    (["--reference", NOWHERE, "--task", "text-generation", "--tf32", "--batch", "2"],
     "--tf32: an option of compare (ONNX Runtime against PyTorch), not of compare --task text-generation; "
     "--batch: an option of compare (ONNX Runtime against PyTorch) and compare --runtime, not of compare --task "
     "text-generation"),
])
def test_an_option_of_another_mode_is_refused_naming_its_mode(cli, tmp_path, args, message):
    line = _refused(cli("compare", str(tmp_path / "m.onnx"), *args))
    assert line == f"portable: error: {message}"


def test_runtime_with_text_generation_is_refused(cli, tmp_path):
    line = _refused(cli("compare", str(tmp_path / "m.onnx"), "--runtime", "ort", "--task", "text-generation"))
    assert "--runtime compares single-graph models" in line


def test_options_of_every_mode_pass_the_table(cli, tmp_path):
    """--seed, --atol, --format... in --runtime mode: past the table, on to the runtimes' own check."""
    result = cli("compare", str(tmp_path / "m.onnx"), "--runtime", "bogus", "--seed", "3", "--atol", "1e-3",
                 "--format", "json", "--task", "model")
    assert "unknown runtime" in _refused(result)


def test_weights_without_a_reference_are_refused_in_runtime_mode(cli, tmp_path):
    line = _refused(cli("compare", str(tmp_path / "m.onnx"), "--runtime", "ort", "--weights", "w.pt"))
    assert "--weights" in line and "--reference" in line


def test_a_table_of_an_undeclared_mode_is_refused():
    with pytest.raises(ValueError, match="options of no declared mode: tokens"):
        ModeTable(labels={"a": "cmd"}, homes={"seed": frozenset({"a"}), "tokens": frozenset({"b"})})


def test_the_table_refuses_in_any_command():
    table = ModeTable(labels={"one": "cmd", "two": "cmd --two"},
                      homes={"size": frozenset({"one"}), "name": frozenset({"one", "two"})})

    @click.command()
    @click.option("--size", type=int, default=1)
    @click.option("--name", default="x")
    @click.option("--two", is_flag=True)
    def cmd(size: int, name: str, two: bool) -> None:
        table.refuse_others(click.get_current_context(), "two" if two else "one")
        click.echo("ran")

    runner = CliRunner()
    assert runner.invoke(cmd, ["--size", "2", "--name", "y"]).output == "ran\n"
    refused = runner.invoke(cmd, ["--two", "--size", "2", "--name", "y"])
    assert isinstance(refused.exception, UsageError)
    assert str(refused.exception) == "--size: an option of cmd, not of cmd --two"
