"""Every rule fires on its bad fixture (plus only the rules named inevitable) and never on a good one."""

from __future__ import annotations

import pytest
from support import rule_fixtures

from portable.findings import Severity
from portable.policy import Policy
from portable.validators import ALL_RULES, validate

# For each bad fixture, rules that must fire along with the rule under test, and why.
INEVITABLE = {
    "PORT003": {"PORT009", "PORT011", "PORT014"},  # the checker and ORT reject an unknown op; its output has no shape
    "PORT005": {"PORT009"},  # a sequence value has no tensor shape
    "PORT006": {"PORT009"},  # NonZero's output dim is data-dependent
    "PORT007": {"PORT009"},  # Range over a data-dependent limit has no static length
    "PORT009": {"PORT007"},  # the reshape target is a graph input
    "PORT011": {"PORT014"},  # ORT rejects the wrong attribute type too
}
ALL_ON = Policy(ort=True)
BAD = sorted({rule for rule, kind in rule_fixtures.fixture_names() if kind == "bad"})
GOOD = sorted((rule, kind) for rule, kind in rule_fixtures.fixture_names() if kind == "good")


def fired(model, policy=ALL_ON) -> set[str]:
    report = validate(model, policy)
    assert report.error is None, report.error
    return {f.rule_id for f in report.findings if f.severity != Severity.INFO}


def test_every_rule_has_fixtures():
    ids = {rule.id for rule in ALL_RULES}
    assert set(BAD) == ids
    assert {rule for rule, _ in GOOD} == ids


@pytest.mark.parametrize("rule", BAD)
def test_bad_fixture_triggers_its_rule(rule):
    assert fired(rule_fixtures.load(rule, "bad")) == {rule} | INEVITABLE.get(rule, set())


@pytest.mark.parametrize("rule,kind", GOOD)
def test_good_fixture_is_clean(rule, kind):
    report = validate(rule_fixtures.load(rule, kind), ALL_ON)
    assert report.findings == ()
    assert report.ok and report.exit_code == 0


@pytest.mark.parametrize("rule", BAD)
def test_bad_fixture_alone_when_selected(rule):
    """--select runs one rule: the bad fixture still fails, through that rule only."""
    assert fired(rule_fixtures.load(rule, "bad"), Policy(select=(rule,))) == {rule}
