"""Mutation fuzzing of the validator over the fixture models' bytes and protobuf fields.

The suite runs a fixed-seed sample (200 cases per strategy); ``make fuzz`` runs
``PORTABLE_FUZZ_EXAMPLES`` (1,000+) and records the counts in ``bench/results/fuzz.json``.
No case may raise, hang past the time bound, or crash the process; and the verdict must agree
with what protobuf and ``onnx.checker`` say on their own (:func:`assert_sound`): bytes protobuf
cannot parse are unreadable (exit 3), a model that passes (exit 0) passes the full checker.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import onnx
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ROOT, rule_fixtures

from portable.errors import ExitCode
from portable.policy import Policy
from portable.report import ValidationReport
from portable.validators import validate

EXAMPLES = int(os.environ.get("PORTABLE_FUZZ_EXAMPLES", "200"))
TIME_BOUND_S = 20
SEEDS = [rule_fixtures.load(rule, kind) for rule, kind in rule_fixtures.fixture_names()]
SEED_BYTES = [m.SerializeToString() for m in SEEDS]
COUNTS: dict[str, int] = {}
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def check(model_or_path, label: str) -> None:
    COUNTS[label] = COUNTS.get(label, 0) + 1
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_BOUND_S)
    try:
        report = validate(model_or_path, Policy())
    except _Timeout:
        pytest.fail(f"validation hung for more than {TIME_BOUND_S} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert_sound(model_or_path, report)


def _full_parse(model_or_path) -> onnx.ModelProto | None:
    """The model as protobuf parses it whole (not the validator's lean parse), or None if it cannot."""
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    data, proto = Path(model_or_path).read_bytes(), onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RecursionError):
        return None
    return proto if data else None


def _checker_passes(proto: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError):
        return False
    return True


def assert_sound(model_or_path, report: ValidationReport) -> None:
    """The report's verdict against protobuf's and the checker's, and its error one clear line."""
    assert report.error is None or "\n" not in report.error
    assert not (report.error or "").startswith("internal error"), report.error
    proto = _full_parse(model_or_path)
    if proto is None:
        assert report.exit_code == ExitCode.ERROR, f"protobuf cannot parse it, yet exit {int(report.exit_code)}"
    if report.exit_code == ExitCode.OK:
        assert proto is not None and _checker_passes(proto), "passed a model that onnx.checker rejects"


byte_edit = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10_000), st.integers(0, 64)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=16)),
)


def _mutate_bytes(data: bytes, edits) -> bytes:
    buf = bytearray(data)
    for kind, pos, arg in edits:
        pos = pos % (len(buf) + 1)
        if kind == "flip" and pos < len(buf):
            buf[pos] ^= arg
        elif kind == "cut":
            del buf[pos:pos + arg]
        elif kind == "insert":
            buf[pos:pos] = arg
    return bytes(buf)


@FUZZ
@given(seed=st.integers(0, len(SEED_BYTES) - 1), edits=st.lists(byte_edit, min_size=1, max_size=4))
def test_fuzz_bytes(tmp_path_factory, seed, edits):
    path = tmp_path_factory.getbasetemp() / "fuzz_bytes.onnx"
    path.write_bytes(_mutate_bytes(SEED_BYTES[seed], edits))
    check(path, "bytes")


INTS = st.one_of(st.integers(-3, 8), st.sampled_from([0, -1, 2**31, 2**62, -(2**62)]))
OPS = st.sampled_from(["", "Relu", "If", "Loop", "NonZero", "Reshape", "Gelu", "Foo", "Shape", "Concat", "Constant"])
field_edit = st.one_of(
    st.tuples(st.just("dim"), st.integers(0, 50), INTS),
    st.tuples(st.just("op"), st.integers(0, 50), OPS),
    st.tuples(st.just("elem"), st.integers(0, 50), st.integers(0, 30)),
    st.tuples(st.just("opset"), st.integers(0, 5), st.integers(-1, 30)),
    st.tuples(st.just("input"), st.integers(0, 50), st.sampled_from(["", "x", "y", "nope", "w"])),
    st.tuples(st.just("attr"), st.integers(0, 50), st.integers(0, 14)),
    st.tuples(st.just("domain"), st.integers(0, 50), st.sampled_from(["", "ai.onnx", "com.microsoft", "x"])),
    st.tuples(st.just("dup"), st.integers(0, 50), st.just(0)),
)


def _mutate_fields(model: onnx.ModelProto, edits) -> onnx.ModelProto:
    g = model.graph
    values = [*g.input, *g.output, *g.value_info]
    for kind, i, arg in edits:
        nodes = g.node
        if kind == "dim" and values:
            dims = values[i % len(values)].type.tensor_type.shape.dim
            if dims:
                dims[i % len(dims)].dim_value = arg
        elif kind == "elem" and values:
            values[i % len(values)].type.tensor_type.elem_type = arg
        elif kind == "opset" and model.opset_import:
            model.opset_import[i % len(model.opset_import)].version = arg
        elif kind in ("op", "input", "attr", "domain", "dup") and nodes:
            _mutate_node(g, nodes[i % len(nodes)], kind, arg)
    return model


def _mutate_node(g, node, kind, arg) -> None:
    if kind == "op":
        node.op_type = arg
    elif kind == "input":
        node.input.append(arg) if not node.input else node.input.__setitem__(0, arg)
    elif kind == "attr" and node.attribute:
        node.attribute[0].type = arg
    elif kind == "attr":
        node.attribute.add(name="axis", type=arg)
    elif kind == "domain":
        node.domain = arg
    elif kind == "dup":
        g.node.append(node)


@FUZZ
@given(seed=st.integers(0, len(SEEDS) - 1), edits=st.lists(field_edit, min_size=1, max_size=5))
def test_fuzz_fields(seed, edits):
    model = onnx.ModelProto()
    model.CopyFrom(SEEDS[seed])
    check(_mutate_fields(model, edits), "fields")


def test_the_check_fails_a_validator_that_reads_garbage(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff" * 32)
    assert _full_parse(garbage) is None
    with pytest.raises(AssertionError, match="protobuf cannot parse it"):
        assert_sound(garbage, ValidationReport(path=str(garbage), policy=Policy()))


def test_the_check_fails_a_validator_that_passes_a_broken_model():
    broken = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
        g (float[1, 2] x) => (float[1, 2] y) { y = Relu(nowhere) }""")
    with pytest.raises(AssertionError, match="onnx.checker rejects"):
        assert_sound(broken, ValidationReport(path="<memory>", policy=Policy()))
    assert_sound(broken, validate(broken, Policy()))  # the real validator finds it (PORT011)
    with pytest.raises(AssertionError, match="internal error"):
        assert_sound(broken, ValidationReport(path="<memory>", policy=Policy(), error="internal error in rule X"))


def teardown_module(module):
    if "PORTABLE_FUZZ_EXAMPLES" in os.environ:
        out = ROOT / "bench" / "results" / "fuzz.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"cases": COUNTS, "total": sum(COUNTS.values()), "time_bound_s": TIME_BOUND_S},
                                  indent=2) + "\n")
        print(json.dumps(COUNTS))
