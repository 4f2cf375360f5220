"""The engine chooses the rules once; the context does not call back into the engine (no rule
needs the context to know which rules run: PORT014 hands onnxruntime the file itself)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support import ROOT, rule_fixtures, save

import portable.validators.engine as engine
from portable.discovery import Target
from portable.parallel import validate_many
from portable.policy import Policy
from portable.validators import validate


@pytest.fixture
def calls(monkeypatch) -> list[Policy]:
    seen: list[Policy] = []
    real = engine.select_rules

    def counting(policy: Policy):
        seen.append(policy)
        return real(policy)

    monkeypatch.setattr(engine, "select_rules", counting)
    monkeypatch.setattr("portable.validators.select_rules", counting)
    return seen


def _models(tmp_path: Path) -> list[Path]:
    return [save(rule_fixtures.load(rule, "good"), tmp_path / f"{rule}.onnx") for rule in ("PORT001", "PORT014")]


def test_one_model_selects_rules_once(tmp_path, calls):
    path = _models(tmp_path)[0]
    assert validate(path, Policy(ort=True)).exit_code == 0
    assert validate(tmp_path / "missing.onnx", Policy()).exit_code == 3
    assert validate(rule_fixtures.load("PORT001", "bad"), Policy()).exit_code == 1
    assert len(calls) == 3


def test_a_run_selects_rules_once(tmp_path, calls):
    targets = [Target(path=str(p)) for p in _models(tmp_path)] + [Target(path="gone.onnx", error="no such file")]
    reports = list(validate_many(targets, Policy(ort=True)))
    assert [r.exit_code for r in reports] == [0, 0, 3]
    assert all("PORT014" in r.rules for r in reports)
    assert len(calls) == 1


def test_context_does_not_import_the_engine():
    tree = ast.parse((ROOT / "validators" / "context.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("portable.validators.engine") for m in imported)
    assert "PORT014" not in (ROOT / "validators" / "context.py").read_text(encoding="utf-8")
