"""The rule catalogue is sound: ids ``PORT\\d{3}`` and names unique, every model rule in a module
named by its id and listed in ``ALL_RULES`` (every pair rule likewise in ``PAIR_RULES``), every rule
(pre-export and pair too) documented with *Why*, *Bad* and *Fix*. Each check is also run on a bad
catalogue, to see that it can fail."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from portable.catalogue import catalogue
from portable.ruleinfo import RuleInfo
from portable.validators.pairs import PAIR_RULES
from portable.validators.rules import ALL_RULES, get_rule

RULES_DIR = Path(__file__).parents[2] / "validators" / "rules"
PAIRS_DIR = Path(__file__).parents[2] / "validators" / "pairs"
# Model rules: PORT0nn on the contract, PORT2nn per target (`--target`); pre-export rules: PORT1nn; pair rules: PORT3nn.
_PHASE_IDS = {"model": re.compile(r"PORT[02]\d\d"), "pre-export": re.compile(r"PORT1\d\d"), "pair": re.compile(r"PORT3\d\d")}


def _duplicates(values: Sequence[str]) -> list[str]:
    return sorted(v for v, n in Counter(values).items() if n > 1)


def catalogue_problems(rules: Sequence[RuleInfo]) -> list[str]:
    """What is wrong with a catalogue, one line per problem."""
    problems = [f"duplicate id {v}" for v in _duplicates([r.id for r in rules])]
    problems += [f"duplicate name {v}" for v in _duplicates([r.name for r in rules])]
    for rule in rules:
        if not _PHASE_IDS[rule.phase].fullmatch(rule.id):
            problems.append(f"{rule.id}: not a {rule.phase} rule id")
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name):
            problems.append(f"{rule.id}: name {rule.name!r} is not kebab-case")
        problems += [f"{rule.id}: no {part} in its docs" for part in ("*Why*", "*Bad*", "*Fix*") if part not in rule.docs]
        if not rule.summary or not rule.hint:
            problems.append(f"{rule.id}: no summary or no hint")
    return problems


def module_problems(classes: Sequence[Any]) -> list[str]:
    """Model rules whose module is not named ``portNNN_...`` after their id."""
    return [f"{cls.id} lives in {cls.__module__}" for cls in classes
            if not cls.__module__.rsplit(".", 1)[-1].startswith(f"{cls.id.lower()}_")]


def test_the_catalogue_is_sound():
    assert catalogue_problems(catalogue().rules) == []


def test_every_model_rule_lives_in_a_module_named_by_its_id():
    assert module_problems(ALL_RULES) == []
    assert module_problems(PAIR_RULES) == []


def test_every_rule_module_is_listed_in_all_rules():
    files = sorted(p.stem for p in RULES_DIR.glob("port[0-9][0-9][0-9]_*.py"))
    assert files == sorted(cls.__module__.rsplit(".", 1)[-1] for cls in ALL_RULES)
    pairs = sorted(p.stem for p in PAIRS_DIR.glob("port[0-9][0-9][0-9]_*.py"))
    assert pairs == sorted(cls.__module__.rsplit(".", 1)[-1] for cls in PAIR_RULES)


def test_the_catalogue_holds_every_rule_once_model_rules_first():
    rules = catalogue().rules
    assert [r.id for r in rules[:len(ALL_RULES)]] == [cls.id for cls in ALL_RULES]
    rest = rules[len(ALL_RULES):]
    assert [r.phase for r in rest] == ["pre-export"] * 7 + ["pair"] * len(PAIR_RULES)
    assert [r.id for r in rest[:7]] == [f"PORT10{n}" for n in range(1, 8)]
    assert [r.id for r in rest[7:]] == [cls.id for cls in PAIR_RULES]
    assert all(catalogue()[r.id] is r and catalogue()[r.name] is r for r in rules)
    assert catalogue().get("port004") is catalogue()["no-control-flow"] and catalogue().get("PORT999") is None


def test_model_records_are_the_rule_classes():
    for cls in (*ALL_RULES, *PAIR_RULES):
        info = catalogue()[cls.id]
        assert cls in PAIR_RULES or get_rule(cls.name) is cls
        assert (info.name, info.severity, info.hint, info.message, info.opt_in) == \
            (cls.name, cls.severity, cls.hint, cls.message, cls.opt_in)
        assert info.docs == cls.doc() and info.summary == cls.summary()


_GOOD = catalogue()["PORT004"]


@pytest.mark.parametrize(("bad", "problem"), [
    ((_GOOD, dataclasses.replace(_GOOD, name="other-name")), "duplicate id PORT004"),
    ((_GOOD, dataclasses.replace(_GOOD, id="PORT016")), "duplicate name no-control-flow"),
    ((dataclasses.replace(_GOOD, id="PORT4"),), "PORT4: not a model rule id"),
    ((dataclasses.replace(_GOOD, id="PORT004", phase="pre-export"),), "PORT004: not a pre-export rule id"),
    ((dataclasses.replace(_GOOD, name="NoControlFlow"),), "PORT004: name 'NoControlFlow' is not kebab-case"),
    ((dataclasses.replace(_GOOD, docs=_GOOD.docs.replace("*Bad*", "Bad")),), "PORT004: no *Bad* in its docs"),
    ((dataclasses.replace(catalogue()["PORT101"], docs="Short."),), "PORT101: no *Why* in its docs"),
    ((dataclasses.replace(catalogue()["PORT301"], id="PORT016"),), "PORT016: not a pair rule id"),
    ((dataclasses.replace(_GOOD, hint=""),), "PORT004: no summary or no hint"),
])
def test_the_catalogue_check_fails_on_a_bad_catalogue(bad, problem):
    assert problem in catalogue_problems(bad)


def target_rule_problems(classes: Sequence[Any]) -> list[str]:
    """Target rules (PORT2nn) that do not need targets or are on by default, and rules that need
    targets outside PORT2nn: the engine runs them only when the policy names targets."""
    problems = [f"{c.id}: a PORT2nn rule that does not need targets" for c in classes
                if c.id.startswith("PORT2") and not c.needs_targets]
    problems += [f"{c.id}: needs targets outside PORT2nn" for c in classes if c.needs_targets and not c.id.startswith("PORT2")]
    return problems + [f"{c.id}: a target rule on by default" for c in classes if c.needs_targets and not c.opt_in]


def test_target_rules_are_port2nn_opt_in_and_need_targets():
    assert [c.id for c in ALL_RULES if c.needs_targets] == ["PORT201", "PORT202", "PORT203", "PORT204"]
    assert target_rule_problems(ALL_RULES) == []


def test_the_target_rule_check_fails_on_a_bad_rule():
    loose = type("Loose", (), {"id": "PORT205", "needs_targets": False, "opt_in": True})
    stray = type("Stray", (), {"id": "PORT016", "needs_targets": True, "opt_in": False})
    assert target_rule_problems([loose, stray]) == ["PORT205: a PORT2nn rule that does not need targets",
                                                    "PORT016: needs targets outside PORT2nn", "PORT016: a target rule on by default"]


def test_the_module_check_fails_on_a_misplaced_rule():
    misplaced = type("Misplaced", (), {"id": "PORT004", "__module__": "portable.validators.rules.port005_sequences"})
    assert module_problems([misplaced]) == ["PORT004 lives in portable.validators.rules.port005_sequences"]
