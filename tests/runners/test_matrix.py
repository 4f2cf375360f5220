"""``portable matrix`` and ``portable report merge``."""

from __future__ import annotations

import json
from pathlib import Path

from portable.runners.matrix import parse_placement


def invoke(cli, *args: str) -> tuple[int, str, str]:
    result = cli(*args)
    return result.exit_code, result.stdout, result.stderr


def test_matrix_on_cpu_lists_the_cpu_provider(cli, cnn_onnx: Path, tmp_path: Path) -> None:
    md = tmp_path / "m.md"
    code, out, err = invoke(cli, "matrix", str(cnn_onnx), "--ep", "cpu", "--batch", "1,4", "--format", "json", "--markdown",
                            str(md), "-q")
    assert code == 0, err
    data = json.loads(out)
    assert data["schema"] == "portable.matrix" and data["passed"]
    cpu = [c for c in data["cells"] if c["provider"] == "CPUExecutionProvider"]
    assert [c["batch"] for c in cpu] == [1, 4]
    assert all(c["loads"] and c["runs"] and c["parity"] == "reference" and c["fallback_nodes"] == 0 for c in cpu)
    assert all(c["nodes"] >= 4 for c in cpu)
    assert "| cpu | 1 | yes | yes | yes | reference |" in md.read_text()


def test_matrix_lists_an_unavailable_provider_without_failing(cli, cnn_onnx: Path) -> None:
    # MIGraphX (AMD) is in neither the CPU nor the CUDA build of onnxruntime
    code, out, _ = invoke(cli, "matrix", str(cnn_onnx), "--ep", "cpu,migraphx", "-q")
    assert code == 0
    assert "| migraphx | 1 | NO | - | - | n/a |" in out


def test_placement_counts_nodes_off_the_provider() -> None:
    def event(name: str, provider: str, op: str) -> dict[str, object]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "args": {"provider": provider, "op_name": op}}

    profile = [event("conv", "CUDAExecutionProvider", "Conv"), event("nms", "CPUExecutionProvider", "NonMaxSuppression"),
               event("copy", "CPUExecutionProvider", "MemcpyToHost"), event("conv", "CUDAExecutionProvider", "Conv"),
               {"cat": "Session", "name": "model_run", "args": {}}]
    placement = parse_placement(profile, "CUDAExecutionProvider")
    assert (placement.nodes, placement.fallback, dict(placement.fallback_ops)) == (3, 1, {"NonMaxSuppression": 1})
    assert dict(parse_placement(profile, "CPUExecutionProvider").fallback_ops) == {"Conv": 1}


def test_merge_of_two_machines_gives_one_table(cli, cnn_onnx: Path, tmp_path: Path) -> None:
    for target in ("h200", "ci-cpu"):
        code, _, err = invoke(cli, "matrix", str(cnn_onnx), "--ep", "cpu", "--target", target, "--format", "json", "-q",
                              "-o", str(tmp_path / f"{target}.json"))
        assert code == 0, err
    out_md = tmp_path / "matrix.md"
    code, _, err = invoke(cli, "report", "merge", str(tmp_path / "h200.json"), str(tmp_path / "ci-cpu.json"),
                          "-o", str(out_md))
    assert code == 0, err
    text = out_md.read_text()
    assert text.count("## Compatibility matrix") == 1 and text.count("| target | provider |") == 1
    assert "| h200 | cpu | 1 |" in text and "| ci-cpu | cpu | 1 |" in text
    code, _, _ = invoke(cli, "report", "merge", str(tmp_path / "h200.json"), "-o", str(tmp_path / "merged.json"))
    assert code == 0 and len(json.loads((tmp_path / "merged.json").read_text())["matrix"]["rows"]) == 1


def test_merge_refuses_a_file_that_is_not_a_report(cli, tmp_path: Path) -> None:
    bogus = tmp_path / "x.json"
    bogus.write_text('{"schema": "other"}')
    code, _, err = invoke(cli, "report", "merge", str(bogus))
    assert code == 3 and "not a matrix, compare or fleet report" in err
