"""Issue 25 item 5: ``compare`` runs the list/dict-input model that ``export`` handles, from the same SPEC:
the flat ONNX inputs go back into the examples' structure for PyTorch, as export's verify does."""

from __future__ import annotations

import json

import portable

SPEC = "fixtures/models/containers.py:build"


def test_compare_runs_the_dict_and_list_input_model_that_export_wrote(cli, tmp_path):
    from portable.spec import load_spec

    loaded = load_spec(SPEC)
    out = tmp_path / "containers.onnx"
    portable.export(loaded.module, loaded.example_inputs, out)
    result = cli("compare", str(out), "--reference", SPEC, "--device", "cpu", "--no-compile", "--no-latency",
                 "--batch", "1,3", "--format", "json", "-q")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["passed"] and [r["error"] for r in data["runners"]] == [None, None]
    rows = [o for p in data["parity"] for o in p["outputs"]]
    assert {o["output"] for o in rows} == {"mixed", "scaled"} and len(data["parity"]) == 2  # batches 1 and 3
    assert all(o["passed"] and o["rms_expected"] > 0.1 and not o["degenerate"] for o in rows)
