"""``make demo`` labels its deliberately broken models as such and says whether each model came out as it should
(issue 48 item 8: its first block read "5 models checked: 2 passed, 3 failed" and the demo exited 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portable import demo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def quick_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo from the repository root, writing under ``tmp_path``, its exports replaced by rule fixtures: a
    good one for the two it makes, bad ones for the three it refuses (the exports and their refusals are tested
    in tests/exporters; the blocks, their labels and the verdict are what is tested here)."""
    from portable.policy import Policy
    from portable.validators import validate

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(demo, "OUT", tmp_path)

    def fixture(rule: str, kind: str) -> Path:
        path = tmp_path / f"torch_{rule.lower()}_{kind}.onnx"
        path.write_bytes(demo._fixture_builder().load(rule, kind).SerializeToString())
        return path

    monkeypatch.setattr(demo, "_exported", lambda: [fixture("PORT004", "good")])
    monkeypatch.setattr(demo, "_refused", lambda: [validate(fixture(r, "bad"), Policy()) for r in ("PORT004", "PORT006")])
    return tmp_path


def test_each_block_says_what_its_models_are_and_the_last_line_that_all_came_out_as_they_should(quick_demo, capsys):
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "Exported fixture models (each should pass):" in out
    assert "Deliberately broken ONNX files (one rule's bad fixture each: each should fail):" in out
    assert "Deliberately broken PyTorch models (each export should be refused" in out
    assert ("demo as expected: exported fixture models: 1 of 1 pass; deliberately broken ONNX files: 3 of 3 fail, "
            "as they should; deliberately broken PyTorch models: 2 of 2 fail, as they should") in out
    assert "models checked: 1 passed, 3 failed" not in out  # the good and the broken are never counted together


def test_a_broken_model_that_passes_or_a_good_one_that_fails_is_not_as_expected(quick_demo):
    from portable.policy import Policy
    from portable.validators import validate

    build = demo._fixture_builder()
    reports = {}
    for kind in ("good", "bad"):
        path = quick_demo / f"port006_{kind}.onnx"
        path.write_bytes(build.load("PORT006", kind).SerializeToString())
        reports[kind] = validate(path, Policy())
    good, bad = reports["good"], reports["bad"]
    assert demo.verdict([demo.Block("models", "should pass", (good,), True)]) == (
        "demo as expected: models: 1 of 1 pass", 0)
    line, code = demo.verdict([demo.Block("exported", "should pass", (good, bad), True),
                               demo.Block("broken", "should fail", (bad, good), False)])
    assert (line, code) == ("demo NOT as expected: exported: 1 of 2 did NOT pass; broken: 1 of 2 did NOT fail", 1)
