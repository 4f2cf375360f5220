"""``validate --target qnn --live``: Qualcomm's HTP (onnxruntime-qnn's simulator) answers for the model, node by
node with QNN's own reason, and the offline profile agrees with it where it was taught (issue 47).

The HTP runs where the ``qnn`` extra is installed (``make test`` installs it); the tests that need it skip, saying
why, elsewhere. Every model is a few nodes: the simulator makes a session in about 0.1-0.5 s for such a graph."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from support import fixture_module, save

from portable.policy import Policy
from portable.validators import validate

htp = fixture_module("htp")
HTP = pytest.mark.skipif(importlib.util.find_spec("onnxruntime_qnn") is None,
                         reason="onnxruntime-qnn is not installed (pip install 'portable-onnx[qnn]')")


def _qnn(path: Path, live: bool = True):
    report = validate(path, Policy(targets=("qnn",), targets_live=live))
    return report, report.targets[0]


@HTP
def test_the_htp_refuses_asin_with_qnns_reason_and_the_offline_verdict_agrees(cli, tmp_path):
    path = save(htp.conv_tanh_asin(), tmp_path / "asin.onnx")
    report, qnn = _qnn(path)
    live = dict(qnn.live)
    assert live["runtime"].startswith("onnxruntime-qnn 2.7.0") and "QAIRT 2.51.0" in live["backend"]
    assert live["verdict"].startswith("the HTP takes 2/3 nodes in 2 partitions, refuses Asin x1; compiles (HTP prepare)")
    assert "a run on seeded inputs succeeds" in live["verdict"]
    ((op, node, reason),) = qnn.live_refusals
    assert (op, node) == ("Asin", "asin")
    assert "Unsupported input/output datatypes requested for the HTP Op 'ElementWiseAsin'" in reason
    assert "INT16, INT8 only" in reason
    # the profile learnt it (validators/targets/measured/qnn-htp.json): offline and live agree
    assert dict(qnn.unsupported) == {"Asin": 1} and live["disagreements"] == "0"
    found = [f for f in report.findings if f.rule_id == "PORT201"]
    assert {f.message.split(":")[0] for f in found} == {"qnn", "qnn (live, onnxruntime-qnn 2.7.0)"}
    assert all(f.location.node == "asin" for f in found)
    result = cli("validate", "--target", "qnn", "--live", "--format", "sarif", str(path))
    sarif = json.loads(result.output)
    messages = [r["message"]["text"] for r in sarif["runs"][0]["results"] if r["ruleId"] == "PORT201"]
    assert any("refuses Asin node 'asin'" in m and "ElementWiseAsin" in m for m in messages)


@HTP
def test_a_dynamic_batch_is_answered_at_batch_1_by_the_live_and_the_offline_check(tmp_path):
    _report, qnn = _qnn(save(htp.conv_tanh_asin("batch"), tmp_path / "dynamic.onnx"))
    live = dict(qnn.live)
    assert live["verdict"].startswith("answered for a copy at batch 1: QNN needs every dim fixed and the file's "
                                      "batch 'batch' is symbolic")
    assert "`portable export --batch N`" in live["verdict"] and live["batch"].startswith("fixed to 1")
    assert "refuses Asin x1" in live["verdict"]
    line = qnn.line()  # offline: as it is, nothing; with the batch fixed, what the HTP takes
    assert line.startswith("qnn: does not run there as it is: 0/3 nodes, 0 partitions")
    assert "with a fixed batch: 2/3 nodes, 1 partition, fallback: Asin x1" in line


def test_the_offline_qnn_verdict_needs_a_fixed_batch_without_the_extra(tmp_path):
    """The profile states fixed sizes (measured: 'Cannot get shape' on every node of a symbolic batch)."""
    _report, qnn = _qnn(save(htp.conv_tanh_asin("batch"), tmp_path / "dynamic.onnx"), live=False)
    assert qnn.fixed_batch is not None and qnn.supported == 0 and qnn.fixed_batch[0] == 2


@HTP
def test_a_qdq_file_at_batch_1_runs_whole_on_the_htp(tmp_path):
    """Asin in a QDQ unit is taken (the HTP takes it in fixed point); only the graph's input Q and output DQ stay on
    the CPU, by the EP's design."""
    _report, qnn = _qnn(save(htp.qdq_conv(), tmp_path / "qdq.onnx"))
    live = dict(qnn.live)
    assert live["verdict"].startswith("the HTP takes 7/9 nodes in 1 partition (2 graph-boundary Q/DQ kept on the CPU")
    assert qnn.live_refusals == () and live["disagreements"] == "0" and live["compiles"] == "yes"
    assert live["run"].startswith("a run on seeded inputs succeeds")
    assert qnn.unsupported == ()  # offline: a quantized Asin is no refusal


@HTP
def test_a_graph_the_htp_cannot_compile_is_an_error_naming_its_words(cli, tmp_path):
    """Erf falls back; IsNaN and Where pass the node validation but the HTP's prepare fails on Where: the session
    fails, as it would on the phone."""
    path = save(htp.erf_isnan_where(), tmp_path / "erf.onnx")
    result = cli("validate", "--target", "qnn", "--live", "--format", "json", str(path))
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)["reports"][0]
    errors = [f for f in data["findings"] if f["severity"] == "error"]
    assert len(errors) == 1 and "the HTP cannot compile the graph" in errors[0]["message"]
    assert '"where" generated: could not create op' in errors[0]["message"]
    assert data["targets"][0]["live"]["compiles"].startswith("no: ")


def test_without_the_extra_one_line_names_it_and_the_offline_verdict_stands(cli, tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime_qnn" else real(name, *a))
    path = save(htp.conv_tanh_asin(), tmp_path / "asin.onnx")
    result = cli("validate", "--target", "qnn", "--live", str(path))
    assert result.exit_code == 0, result.output
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("  target   qnn:")]
    assert line.startswith("  target   qnn: 2/3 nodes, 1 partition, fallback: Asin x1; ")
    assert line.endswith("; live (onnxruntime-qnn): not installed: pip install 'portable-onnx[qnn]' (onnxruntime-qnn, "
                         "the QNN EP with its HTP simulator)")


def _one_op(op: str, dtype: int, name: str = "probe") -> bytes:
    from onnx import helper

    value = helper.make_tensor_value_info
    model = helper.make_model(helper.make_graph([helper.make_node(op, ["x"], ["y"], name=name)], "m",
                                               [value("x", dtype, [1, 4, 8, 8])], [value("y", dtype, [1, 4, 8, 8])]),
                              opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString()


# unary ops the HTP refuses in float32 (measured/qnn-htp.json) and ops it takes, each as written and as a QDQ unit
AGREEMENT_OPS = ("Asin", "Elu", "Round", "Relu", "Sigmoid", "Tanh")


@HTP
def test_the_profile_holds_to_the_htps_answer(tmp_path):
    """Wherever the extra is installed: the qnn profile and the HTP agree on each op as written and in a QDQ unit."""
    import numpy as np
    from onnx import TensorProto

    from portable.validators.targets.htp import ask_htp
    from portable.validators.targets.htp_answers import PROBE, qdq_unit

    rng = np.random.default_rng(0)
    feeds = {"x": (rng.uniform(-0.9, 0.9, (1, 4, 8, 8))).astype(np.float32)}
    disagree = []
    for op in AGREEMENT_OPS:
        plain = _one_op(op, TensorProto.FLOAT)
        for kind, model in (("float32", plain), ("quantized", qdq_unit(plain, feeds, [feeds["x"]]))):
            path = tmp_path / f"{op}.{kind}.onnx"
            path.write_bytes(model)
            (summary,) = validate(path, Policy(targets=("qnn",))).targets
            offline = op in dict(summary.unsupported)
            answer = ask_htp(str(path), (), run=False)
            node = next(n for n in answer.nodes if n.node == PROBE)
            live = answer.compiled or ("" if node.taken else node.reason)  # a prepare that fails is a refusal too
            if offline != bool(live):
                disagree.append(f"{op} as {kind}: offline {'refused' if offline else 'taken'}, HTP {live or 'taken'}")
    assert disagree == []


def test_inspect_gives_the_target_lines_and_asks_the_htp_with_live(cli, tmp_path):
    path = str(save(htp.conv_tanh_asin("batch"), tmp_path / "dynamic.onnx"))
    text = cli("inspect", path, "--target", "qnn")
    assert text.exit_code == 0, text.output
    assert "target qnn: does not run there as it is: 0/3 nodes" in text.output and "live" not in text.output
    assert cli("inspect", path, "--live").exit_code == 2  # --live without a target
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        return
    data = json.loads(cli("inspect", path, "--target", "qnn", "--live", "--format", "json").output)
    (qnn,) = data["targets"]
    assert qnn["live"]["verdict"].startswith("answered for a copy at batch 1") and qnn["live_refusals"][0]["op"] == "Asin"


@HTP
def test_the_fleets_live_step_gets_the_htp_through_ask(tmp_path):
    """``live.ask`` is what ``validate --live`` calls and what the fleet's live step calls, with a path alone."""
    from portable.validators.targets.live import ask

    answer = dict(ask("qnn", str(save(htp.conv_tanh_asin(), tmp_path / "asin.onnx"))))
    assert answer["verdict"].startswith("the HTP takes 2/3 nodes") and answer["disagreements"] == "not compared"
    assert "Asin 'asin'" in answer["refused"]


def test_the_htp_answers_parser_refuses_what_every_probe_refused_and_notes_the_rest():
    """measured/qnn-htp.json's format: a kind refused in every probe (twice, or once for its data types) is a
    refusal; one refused in some probes, or once for an attribute, a note; an op taken once is an op the HTP has."""
    from portable.validators.targets.parsers import htp_answers

    text = json.dumps({"format": 1, "runtime": "onnxruntime-qnn 9 (QAIRT 9)", "ops": {
        "Asin": {"float32": {"taken": 0, "refused": 2, "reason": "HTP: Unsupported input/output datatypes in the node 'p'",
                             "case": "test_asin"}, "quantized": {"taken": 2, "refused": 0}},
        "Gemm": {"float32": {"taken": 3, "refused": 1, "reason": "QNN FullyConnected Op only support alpha=1.0.",
                             "case": "test_gemm_alpha"}},
        "Mod": {"int32": {"taken": 0, "refused": 1, "reason": "QNN Mod Op only support fmod == 0", "case": "test_mod"}},
        "Swish": {"float32": {"taken": 1, "refused": 0}},
        "QuantizeLinear": {"float32": {"taken": 0, "refused": 3, "reason": "standalone", "case": "q"}}}})
    refused, notes, runtime, taken = htp_answers(text)
    assert runtime == "onnxruntime-qnn 9 (QAIRT 9)" and set(refused) == {"Asin"}
    ((kind, reason),) = refused["Asin"]
    assert kind == "float32" and reason.startswith("the HTP refused it in every probe (onnxruntime-qnn 9 (QAIRT 9)): ")
    assert "in the node" not in reason  # the probe's node name is not the model's
    assert set(notes) == {"Gemm", "Mod"} and notes["Gemm"][0][1].startswith("the HTP (onnxruntime-qnn 9 (QAIRT 9)) "
                                                                              "refused 1 of its 4 float32 probes")
    assert taken == {"Asin", "Gemm", "Swish"}  # Q and DQ alone are not judged


FIRST_SESSION_THEN_LIVE = """
import sys
from pathlib import Path
from portable.policy import Policy
from portable.runners.sessions import qnn_htp, session_from_onnx
from portable.validators import validate
import numpy as np
session = session_from_onnx(Path(sys.argv[1]), qnn_htp())  # as the runner makes one: its log kept from the user
for _ in range(5):
    session.run(None, {i.name: np.ones([1 if isinstance(d, str) else d for d in i.shape], np.float32)
                       for i in session.get_inputs()})
print(validate(Path(sys.argv[1]), Policy(targets=("qnn",), targets_live=True)).targets[0].live_refusals[0][2])
"""


@HTP
def test_a_qnn_session_made_before_does_not_take_the_htps_words_from_the_live_check(tmp_path):
    """The HTP backend keeps the log level of the process's first QNN session (a fresh process, so that it is the
    first): the live check still reads the HTP's reason (found by the suite, where a runner test ran first)."""
    import subprocess
    import sys

    path = save(htp.conv_tanh_asin(), tmp_path / "asin.onnx")
    done = subprocess.run([sys.executable, "-c", FIRST_SESSION_THEN_LIVE, str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Unsupported input/output datatypes requested for the HTP Op 'ElementWiseAsin'" in done.stdout
    assert "[V:onnxruntime" not in done.stderr and "ExecuteGraph" not in done.stderr  # the runs say nothing
