"""``portable fix`` on optimum's feature-extraction export with the batch left dynamic (issue 44 item 4).

optimum's file (``optimum-cli export onnx --task feature-extraction``), its sequence fixed, failed PORT007
("Expand of a run-time shape") and PORT009 unless the batch was fixed too. Three remedies make it portable
with the batch dynamic: ``static-dims`` (``x.size(1)`` read from the fixed dim), ``constant-of-shape`` (the
``ConstantOfShape`` torch.onnx's ``expand`` writes, which onnxscript's folder keeps) and ``expand-batch-shapes``
(the mask's ``Expand`` to a constant, its input already holding the batch). ``fixtures/fix/build.py::optimum_bert``
has the same patterns without optimum, so CI covers them; the real file is made where optimum-cli is installed
(``make peers-venv``), else that test is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from support import fix_fixtures

from portable.repair import REMEDIES, fix
from portable.repair import run as fix_run
from portable.validators import validate

ROOT = Path(__file__).resolve().parents[2]
NEW = ("static-dims", "constant-of-shape", "expand-batch-shapes")


def _failing(path: Path) -> set[str]:
    return {f.rule_id for f in validate(path).failing()}


def _batch_dims(path: Path) -> list[str]:
    graph = onnx.load(str(path), load_external_data=False).graph
    return [v.type.tensor_type.shape.dim[0].dim_param for v in (*graph.input, *graph.output)]


def test_optimums_shape_computations_are_folded_with_the_batch_dynamic(tmp_path: Path) -> None:
    source = fix_fixtures.write("optimum_bert", tmp_path)
    assert {"PORT007", "PORT008", "PORT009"} <= _failing(source)  # as optimum's file
    result = fix(source, tmp_path / "fixed.onnx", dims={"sequence_length": 8})
    statuses = {r.name: r for r in result.remedies}
    assert all(statuses[name].status == "applied" for name in NEW), result.remedies
    assert statuses["static-dims"].detail == "input_ids dim 1 -> 8, attention_mask dim 1 -> 8"
    assert statuses["expand-batch-shapes"].detail.endswith("-> [1, 1, 8, 8] (its input has the batch)")
    assert result.ok and result.written and _failing(result.path) == set()
    assert result.proof is not None and result.proof.ok and result.proof.batches == (1, 3)
    assert result.proof.max_abs_diff == 0.0  # exact: every remedy here only folds what the shapes fix
    assert _batch_dims(result.path) == ["batch", "batch", "batch"]  # the batch stays dynamic
    ops = {n.op_type for n in onnx.load(str(result.path)).graph.node}
    assert not ops & {"Shape", "ConstantOfShape", "Where", "Equal", "Concat"}, ops  # no run-time shape left
    drawn = result.proof.constraints["attention_mask"]  # the proof ran on real padding (runners/constraints.py)
    assert drawn and drawn[0].startswith("a padding mask")


# remedy left out -> what is left: constant-of-shape is what the contract needs (the mask's size reads as more than
# the batch without it); the other two turn a computation from the batch only (allowed, an info) into a constant
LEFT = {"constant-of-shape": ("error", "Expand"), "static-dims": ("info", "Slice"), "expand-batch-shapes": ("info", "Expand")}


@pytest.mark.parametrize("left_out", NEW)
def test_each_of_the_three_remedies_is_needed(left_out: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fix_run, "REMEDIES", tuple(r for r in REMEDIES if r.name != left_out))
    source = fix_fixtures.write("optimum_bert", tmp_path)
    result = fix(source, tmp_path / "fixed.onnx", dims={"sequence_length": 8})
    severity, op = LEFT[left_out]
    left = [(f.severity.value, f.location.op_type) for f in validate(result.path).findings if f.rule_id == "PORT007"]
    assert left == [(severity, op)]
    assert result.ok == (severity == "info")


def _optimum_cli() -> str | None:
    """optimum-cli of ``make peers-venv`` (its own venv: optimum-onnx 0.1.0 pins transformers < 4.58), or on PATH."""
    local = ROOT / ".venv-peers" / "bin" / "optimum-cli"
    return str(local) if local.is_file() else shutil.which("optimum-cli")


@pytest.mark.slow
@pytest.mark.skipif(_optimum_cli() is None, reason="optimum-cli is not installed (make peers-venv installs it); "
                                                   "fixtures/fix/build.py::optimum_bert covers its patterns")
def test_optimums_trained_minilm_export_is_made_portable_with_the_batch_dynamic(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from fixtures.models.minilm import folder

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run([str(_optimum_cli()), "export", "onnx", "--model", str(folder()), "--task", "feature-extraction",
                    str(tmp_path / "optimum")], check=True, env=env, capture_output=True, timeout=600)
    source = tmp_path / "optimum" / "model.onnx"
    assert {"PORT007", "PORT008"} <= _failing(source)
    result = fix(source, tmp_path / "fixed.onnx", dims={"sequence_length": 128})
    assert all({r.name: r.status for r in result.remedies}[name] == "applied" for name in NEW), result.remedies
    assert result.ok and result.written and _failing(result.path) == set()
    assert result.proof is not None and result.proof.ok and result.proof.batches == (1, 3)
    assert _batch_dims(result.path)[0] == "batch"
