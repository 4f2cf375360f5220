"""CI gates on compare: latency and error budgets exit 1 when exceeded, 0 when met."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MODELS_FILE = Path(__file__).resolve().with_name("runner_models.py")
BASE = ["--reference", f"{MODELS_FILE}:cnn", "--device", "cpu", "--no-compile", "-q", "--batch", "2"]
FAST = ["--warmup-ms", "0", "--iterations", "3", "--duration-ms", "0"]


def run(cli, *args: str):
    result = cli(*args)
    return result.exit_code, result.stdout, result.stderr


def test_latency_budget_below_and_above_the_measurement(cli, cnn_onnx: Path) -> None:
    code, out, err = run(cli, "compare", str(cnn_onnx), *BASE, *FAST, "--format", "json", "--max-latency-ms", "p50=1e-6")
    assert code == 1, err
    checks = json.loads(out)["budgets"]
    assert checks and not checks[0]["passed"] and checks[0]["subject"].startswith("ort-cpu")
    assert "budget exceeded: latency p50" in err
    code, out, err = run(cli, "compare", str(cnn_onnx), *BASE, *FAST, "--format", "json",
                         "--max-latency-ms", "ort-cpu:p99=100000", "--max-latency-ms", "eager:mean=100000")
    assert code == 0, err
    assert [c["passed"] for c in json.loads(out)["budgets"]] == [True, True]


def test_error_budget_below_and_above_the_measurement(cli, cnn_scaled_onnx: Path) -> None:
    wide = ["--atol", "10", "--rtol", "10", "--no-latency"]  # parity passes; only the budget decides
    code, out, err = run(cli, "compare", str(cnn_scaled_onnx), *BASE, *wide, "--format", "json", "--max-error", "1e-6")
    assert code == 1, err
    (check,) = json.loads(out)["budgets"]
    assert not check["passed"] and check["measured"] > 1e-6
    code, _, err = run(cli, "compare", str(cnn_scaled_onnx), *BASE, *wide, "--max-error", "10")
    assert code == 0, err


@pytest.mark.parametrize(("args", "message"), [
    (["--max-latency-ms", "p42=3"], "--max-latency-ms"),
    (["--max-latency-ms", "p50=fast"], "not a number"),
    (["--max-error", "-1"], "must be positive"),
    (["--no-latency", "--max-latency-ms", "p50=3"], "drop --no-latency"),
    (["--max-latency-ms", "nosuch:p50=3"], "no latency measured"),
    (["--max-error", "nosuch=1"], "no ONNX Runtime vs eager comparison"),
])
def test_bad_budgets_are_usage_errors(cli, cnn_onnx: Path, args: list[str], message: str) -> None:
    code, _, err = run(cli, "compare", str(cnn_onnx), *BASE, *FAST, *args)
    assert code == 2 and message in err
