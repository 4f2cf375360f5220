"""Every rule fires on its bad fixture (plus only the rules named inevitable) and never on a good one."""

from __future__ import annotations

import pytest
from support import rule_fixtures

from portable.findings import Severity
from portable.policy import Policy
from portable.validators import ALL_RULES, validate

# For each bad fixture, rules that must fire along with the rule under test, and why.
INEVITABLE = {
    "PORT003": {"PORT009", "PORT011", "PORT014"},  # the checker and ORT reject an unknown op, which has no shape
    "PORT005": {"PORT009"},  # a sequence value has no tensor shape
    "PORT006": {"PORT009"},  # NonZero's output dim is data-dependent
    "PORT009": {"PORT007"},  # the reshape target is a graph input
    "PORT011": {"PORT014"},  # ORT rejects the wrong attribute type too
    # an int16 zero point at opset 18: outside the Q/DQ type constraint (checker, ORT) and the dtype list
    "PORT030": {"PORT011", "PORT013", "PORT014"},
    "PORT201": {"PORT203"},  # the node QNN lacks falls back: two partitions
    "PORT202": {"PORT013", "PORT201", "PORT203"},  # float64: outside the policy's types and QNN's, so it falls back
}
# The target rules' fixtures are checked on one target each (their policy's `targets`); PORT204's
# findings are information, raised to warnings here so that the harness sees them.
TARGET_OF = {"PORT201": ("qnn",), "PORT202": ("qnn",), "PORT203": ("nnapi",), "PORT204": ("nnapi",)}
RAISED = {"PORT204": (("PORT204", Severity.WARNING),)}
# Fixtures other than good/bad (regressions built like a real failing model) and the exact
# non-info rules each fires with every rule on.
NAMED = {
    ("PORT003", "deprecated"): {"PORT003", "PORT011", "PORT014"},  # checker and ORT reject Scatter-11 too
    ("PORT007", "ir3_initializers"): set(),  # before IR 4, initializers listed as inputs are constants
    # a string model; the kernel's constructor throws; StringNormalizer's output length depends on the strings
    ("PORT014", "kernel_init"): {"PORT009", "PORT013", "PORT014"},
    ("PORT014", "no_kernel"): {"PORT001", "PORT014"},  # opset 6: ORT has no Add(6) kernel
    # ORT's 16-bit contrib Q/DQ: a custom domain (its unknown output shape is PORT009 info under it), a uint16 zero point
    ("PORT030", "contrib"): {"PORT002", "PORT013", "PORT030"},
    ("PORT031", "zero_scale"): {"PORT031"},  # a constant scale of 0
}
ALL_ON = Policy(ort=True)


def policy_for(rule: str, **changes) -> Policy:
    """Every rule on (``ALL_ON``), with the rule's target when it is a target rule."""
    return ALL_ON.with_(targets=TARGET_OF.get(rule, ()), severity=RAISED.get(rule, ()), **changes)

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
    assert fired(rule_fixtures.load(rule, "bad"), policy_for(rule)) == {rule} | INEVITABLE.get(rule, set())


@pytest.mark.parametrize("rule,kind", GOOD)
def test_good_fixture_is_clean(rule, kind):
    report = validate(rule_fixtures.load(rule, kind), policy_for(rule))
    assert report.findings == ()
    assert report.ok and report.exit_code == 0


@pytest.mark.parametrize("rule,kind", sorted(NAMED))
def test_named_fixture_fires_exactly(rule, kind):
    assert (rule, kind) in rule_fixtures.fixture_names()
    assert fired(rule_fixtures.load(rule, kind)) == NAMED[rule, kind]


@pytest.mark.parametrize("rule", BAD)
def test_bad_fixture_alone_when_selected(rule):
    """--select runs one rule: the bad fixture still fails, through that rule only."""
    assert fired(rule_fixtures.load(rule, "bad"), policy_for(rule, select=(rule,), ort=False)) == {rule}
