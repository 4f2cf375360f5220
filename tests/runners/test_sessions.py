"""The one ONNX Runtime session factory: options applied, failures worded once, no silent fallback."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from portable.runners.comparator import compare_outputs
from portable.runners.sessions import SessionFailed, SessionSpec, session_from_onnx
from portable.runners.tolerances import ToleranceTable


def _relu() -> bytes:
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[2, 3] x) => (float[2, 3] y) { y = Relu(x) }""")
    return model.SerializeToString()


def test_the_spec_reaches_the_session_options():
    session = session_from_onnx(_relu(), SessionSpec(spinning=False, intra_op_threads=1, optimize=False))
    options = session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 1
    assert options.get_session_config_entry("session.load_model_format") == "ONNX"
    default = session_from_onnx(_relu()).get_session_options()
    with pytest.raises(Exception, match="does not have configuration"):  # ONNX Runtime's own default, unset
        default.get_session_config_entry("session.intra_op.allow_spinning")
    assert default.intra_op_num_threads == 0


def test_a_model_it_cannot_load_is_one_line_naming_what_and_the_provider(tmp_path):
    broken = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 6]>
    g (float[2, 3] x, float[2, 3] b) => (float[2, 3] y) { y = Add(x, b) }""")  # no Add(6) kernel today
    path = tmp_path / "add6.onnx"
    onnx.save(broken, path)
    with pytest.raises(SessionFailed) as caught:
        session_from_onnx(path, what="the original model")
    message, detail = caught.value.message, caught.value.detail
    assert message.startswith("ONNX Runtime's CPU provider cannot load the original model: ")
    assert "Add(6)" in detail and str(path) not in detail and "\n" not in message


def test_a_provider_that_is_not_there_is_an_error_not_a_fallback():
    with pytest.raises(SessionFailed, match="CUDA"):
        session_from_onnx(_relu(), SessionSpec("CUDAExecutionProvider"))


def test_a_failing_pair_is_worded_once_naming_both_sides():
    table = ToleranceTable()
    good = np.arange(6, dtype=np.float32)
    bad = good.copy()
    bad[2] += 1.0
    pair = compare_outputs(("the fixed model", [bad]), ("the original", [good]), ["y"], ["float32"], 3, table)
    assert pair.message == ("batch 3: output 'y' differs by up to 1 (1 of 6 element(s) beyond atol/rtol 0.0001/0.001)")
    nan = good.copy()
    nan[0] = np.nan
    pair = compare_outputs(("ONNX Runtime", [nan]), ("PyTorch", [good]), ["y"], ["float32"], 1, table)
    assert pair.problems() == ("output 'y' has NaN/Inf (1 in ONNX Runtime, 0 in PyTorch)",)
    pair = compare_outputs(("a", [good[:3]]), ("b", [good]), ["y"], ["float32"], 1, table)
    assert pair.problems() == ("output 'y' has shape [3] vs [6] (a vs b)",) and pair.max_abs == 0.0
    same = compare_outputs(("a", [good]), ("b", [good]), ["y"], ["float32"], 1, table)
    assert same.passed and same.message == "" and same.problems() == ()


def test_config_entries_reach_the_session():
    """``config_entries`` (validate --live's graph assignment): without it ONNX Runtime refuses the question."""
    key = "session.record_ep_graph_assignment_info"
    with pytest.raises(Exception, match=key):
        session_from_onnx(_relu()).get_provider_graph_assignment_info()
    session = session_from_onnx(_relu(), SessionSpec(config_entries={key: "1"}))
    assert session.get_session_options().get_session_config_entry(key) == "1"
    assert [len(sub.get_nodes()) for sub in session.get_provider_graph_assignment_info()] == [1]
