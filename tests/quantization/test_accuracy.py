"""The accuracy measures and budgets on arrays whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from portable.quantization.accuracy import PERFECT_DB, OutputAccuracy, check_budgets, compare_outputs, sqnr_db
from portable.quantization.settings import Budgets


def test_sqnr_of_a_noise_a_tenth_of_the_signal_is_20_db():
    signal = np.random.default_rng(0).standard_normal(10_000)
    noise = np.random.default_rng(1).standard_normal(10_000)
    noise *= 0.1 * np.linalg.norm(signal) / np.linalg.norm(noise)
    assert sqnr_db(signal, signal + noise) == pytest.approx(20.0, abs=1e-9)
    assert sqnr_db(signal, signal) == PERFECT_DB
    assert sqnr_db(signal, np.full_like(signal, np.nan)) == -math.inf
    assert sqnr_db(np.zeros(4), np.ones(4)) == -math.inf


def test_top1_agreement_is_for_batch_by_classes_outputs_only():
    logits = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 1.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0]], dtype=np.float32)
    flipped = logits.copy()
    flipped[1] = [0.0, 3.0, 1.0]  # one of four argmaxes changes
    hidden = np.ones((4, 5, 6), dtype=np.float32)
    logit_row, hidden_row = compare_outputs(["logits", "hidden"], [logits, hidden], [flipped, hidden * 1.01])
    assert logit_row.top1_agreement == 0.75 and logit_row.top1_drop_pct == pytest.approx(25.0)
    assert logit_row.max_abs == 3.0 and hidden_row.top1_agreement is None
    assert hidden_row.sqnr_db == pytest.approx(40.0, abs=1e-4) and hidden_row.samples == 4


def _row(name: str, sqnr: float, top1: float | None) -> OutputAccuracy:
    return OutputAccuracy(name, 8, sqnr, 0.1, 1.0, top1)


def test_budgets_pass_and_fail_per_output():
    rows = [_row("logits", 31.0, 0.97), _row("features", 24.0, None)]
    checks = check_budgets(Budgets(min_sqnr_db=25.0, max_top1_drop_pct=5.0), rows)
    assert [(c.budget, c.output, c.passed) for c in checks] == [
        ("min-sqnr", "logits", True), ("min-sqnr", "features", False), ("max-top1-drop", "logits", True)]
    assert check_budgets(Budgets(max_top1_drop_pct=2.0), rows)[0].passed is False  # 3 % drop
    assert check_budgets(Budgets(), rows) == ()


def test_a_top1_budget_on_a_model_without_logits_cannot_be_met():
    (check,) = check_budgets(Budgets(max_top1_drop_pct=5.0), [_row("hidden", 30.0, None)])
    assert not check.passed and "no output judged as logits" in check.output and check.to_dict()["measured"] is None
