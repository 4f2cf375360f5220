"""bench/results/winml_compare.json (winml-cli's rule database against portable's profiles, docs/winml-cli.md)
still describes the committed profiles: portable's verdict of every op it records is the one the profile gives
now, and its counts add up. Offline, from the committed JSON alone: the wheel and pyarrow are needed only to
regenerate it (``bench/winml_compare.py``'s docstring), which is what a failure here asks for."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "winml_compare.json"


def _bench():
    spec = importlib.util.spec_from_file_location("winml_compare", ROOT / "bench" / "winml_compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recorded():
    if not RESULT.exists():
        pytest.skip("bench/results/winml_compare.json is not committed")
    return json.loads(RESULT.read_text())


def test_the_pins_are_the_scripts(recorded):
    bench = _bench()
    database = recorded["winml"]["database"]
    assert (database["wheel"], database["sha256"]) == (bench.WHEEL_NAME, bench.WHEEL_SHA256)
    assert (recorded["winml"]["repository"], recorded["winml"]["commit"]) == (bench.WINML_REPOSITORY, bench.WINML_COMMIT)
    assert [(c["target"], c["winml_ep"], c["device"]) for c in recorded["comparisons"]] == \
        [c[:3] for c in bench.COMPARISONS]


def test_portables_verdicts_are_the_profiles_of_now(recorded):
    bench = _bench()
    stale = []
    for comparison in recorded["comparisons"]:
        for key, (_, ours) in comparison["verdicts (winml, portable)"].items():
            domain, _, op = key.rpartition(":")
            now, _ = bench.portable_verdict(comparison["target"], op, domain)
            if now != ours:
                stale.append(f"{comparison['target']} {key}: recorded {ours}, the profile says {now}")
    assert stale == [], "a profile changed: regenerate bench/results/winml_compare.json and docs/winml-cli.md\n" + \
        "\n".join(stale)


def test_the_counts_add_up(recorded):
    for comparison in recorded["comparisons"]:
        pairs = comparison["verdicts (winml, portable)"]
        differ = {key for key, (theirs, ours) in pairs.items() if theirs != ours}
        assert {d["op"] for d in comparison["disagreements"]} == differ
        union = comparison["union"]
        assert union["ops"] == len(pairs) and union["agree"] == len(pairs) - len(differ)
        assert sum(union["winml"].values()) == sum(union["portable"].values()) == len(pairs)
