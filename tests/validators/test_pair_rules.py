"""The pair rules (PORT301-304) on small pairs of three naming conventions (fixtures/pairs/build.py), each
rule seen passing on a good pair and failing on a pair broken in its one way; and ``portable validate --pair``."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from support import load_builder, save

from portable.errors import UsageError
from portable.policy import Policy
from portable.validators.pairs.engine import validate_pair

pairs = load_builder("pairs")


def _write(tmp_path: Path, built: tuple[onnx.ModelProto, onnx.ModelProto]) -> tuple[Path, Path]:
    return save(built[0], tmp_path / "m.prefill.onnx"), save(built[1], tmp_path / "m.decode.onnx")


def _found(tmp_path: Path, built, **kwargs) -> list[tuple[str, str, str]]:
    """(graph, rule, message) of every pair finding."""
    reports = validate_pair(*_write(tmp_path, built), Policy(select=("PORT301", "PORT302", "PORT303", "PORT304")),
                            **kwargs)
    return [(Path(r.path).name.split(".")[1], f.rule_id, f.message) for r in reports for f in r.findings]


@pytest.mark.parametrize("style", ["portable", "qualcomm"])
def test_a_good_pair_passes_every_rule(tmp_path, style):
    prefill, decode = validate_pair(*_write(tmp_path, pairs.pair(style=style)))
    assert prefill.ok and decode.ok, prefill.findings + decode.findings
    assert {"PORT301", "PORT302", "PORT303", "PORT304", "PORT001"} <= set(decode.rules)
    assert prefill.model["weights_fingerprint"] == decode.model["weights_fingerprint"]


def test_port301_finds_a_weight_that_differs(tmp_path):
    found = _found(tmp_path, pairs.pair(weight_scale=1.01))
    assert [(g, r) for g, r, _ in found] == [("prefill", "PORT301"), ("decode", "PORT301")]
    assert "1 of the prefill graph's 1 weight(s) have no identical tensor" in found[0][2]


@pytest.mark.parametrize(("changes", "context", "expected"), [
    ({"decode_context": 14}, None, "'past_key_0' float32[1, 2, 14, 4] and 3 more of the decode graph: no axis of 16 or 15"),
    ({}, 32, "of the prefill graph: no axis of 32 or 28 slots"),
])
def test_port302_finds_a_cache_of_another_length(tmp_path, changes, context, expected):
    found = _found(tmp_path, pairs.pair(**changes), context=context)
    assert any(r == "PORT302" and expected in m for _, r, m in found), found


def test_port302_finds_a_dynamic_cache(tmp_path):
    """Optimum's names, and the symbolic length torch.onnx and Optimum give a dynamic cache."""
    reports = validate_pair(*_write(tmp_path, pairs.pair(style="optimum")), Policy(select=("PORT302",)))
    (finding,) = reports[0].findings
    assert "'past_key_values.0.key'" in finding.message and "'past_sequence_length'" in finding.hint


@pytest.mark.parametrize(("changes", "expected"), [
    ({"cache_dtype": onnx.TensorProto.FLOAT16}, "differs from the prefill graph's 'past_key_0' float32"),
    ({"layers": 1}, "no cache input for layer 1's keys"),
    ({"drop_output": "present_value_1"}, "'past_value_1' float32[1, 2, 16, 4] has no cache output"),
])
def test_port303_finds_caches_that_disagree(tmp_path, changes, expected):
    found = _found(tmp_path, pairs.pair(**changes))
    assert any(r == "PORT303" and expected in m for _, r, m in found), found


@pytest.mark.parametrize(("changes", "expected"), [
    ({"tokens": 2}, "do not take one token per row"),
    ({"vocab": 33}, "differ from the prefill graph's 'logits' float32[1, 4, 32]"),
    ({"batch": 2}, "(dtype, rank or batch)"),
    ({"extra_input": True}, "input 'token_type_ids' is in the decode graph only"),
])
def test_port304_finds_step_inputs_that_disagree(tmp_path, changes, expected):
    found = _found(tmp_path, pairs.pair(**changes))
    assert any(r == "PORT304" and expected in m for _, r, m in found), found


def test_the_exported_pair_passes_and_a_mixed_one_fails(tiny_llm_pair, tmp_path):
    result, _ = tiny_llm_pair
    prefill, decode = validate_pair(result.prefill.path, result.decode.path, context=64)
    assert prefill.ok and decode.ok
    foreign = save(pairs.step(1), tmp_path / "other.onnx")
    mixed = validate_pair(result.prefill.path, foreign)
    assert {f.rule_id for r in mixed for f in r.findings} >= {"PORT301", "PORT303", "PORT304"}


def test_selection_takes_pair_ids_and_refuses_unknown_ones(tmp_path):
    paths = _write(tmp_path, pairs.pair(weight_scale=2.0))
    only = validate_pair(*paths, Policy(select=("PORT301",)))
    assert only[0].rules == ("PORT301",) and [f.rule_id for f in only[0].findings] == ["PORT301"]
    ignored = validate_pair(*paths, Policy(ignore=("PORT301",)))
    assert ignored[0].ok and "PORT301" not in ignored[0].rules and "PORT001" in ignored[0].rules
    with pytest.raises(UsageError, match="PORT299"):
        validate_pair(*paths, Policy(select=("PORT299",)))


def test_an_unreadable_graph_is_exit_3_for_both(tmp_path):
    prefill, _ = _write(tmp_path, pairs.pair())
    reports = validate_pair(prefill, tmp_path / "missing.onnx")
    assert [int(r.exit_code) for r in reports] == [3, 3] and "no such file" in reports[1].error


def test_the_cli_validates_pairs_beside_files_with_one_exit_code(cli, tmp_path):
    good = _write(tmp_path, pairs.pair())
    ok = cli("validate", "--pair", *map(str, good), "--format", "json")
    assert ok.exit_code == 0 and [r["ok"] for r in json.loads(ok.stdout)["reports"]] == [True, True]
    (tmp_path / "bad").mkdir()
    bad = _write(tmp_path / "bad", pairs.pair(weight_scale=3.0))
    failed = cli("validate", str(good[0]), "--pair", *map(str, bad), "--format", "sarif")
    assert failed.exit_code == 1
    results = json.loads(failed.stdout)["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"PORT301"} and len(results) == 2
    assert cli("validate", str(good[0]), "--select", "PORT301").exit_code == 2  # a pair rule on a single file
    assert cli("validate").exit_code == 2
