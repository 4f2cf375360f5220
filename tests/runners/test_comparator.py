"""Per-output comparison statistics, tolerances and seeded inputs, on fixed arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from portable.errors import InputError, UsageError
from portable.runners.comparator import compare_arrays, compare_outputs
from portable.runners.inputs import InputSpec, dims_from_examples, graph_io, make_feeds, parse_dims, parse_int_range
from portable.runners.tolerances import DEFAULT_TOLERANCES, TF32_TOLERANCE, Tolerance, parse_overrides

TOL = Tolerance(1e-4, 1e-3)
EXPECTED = np.array([1.0, -2.0, 0.5, 0.0], dtype=np.float32)


def test_identical_arrays_pass_with_zero_error() -> None:
    stats = compare_arrays(EXPECTED.copy(), EXPECTED, TOL)
    assert stats.passed and stats.max_abs == 0.0 and stats.beyond == 0 and stats.cosine == pytest.approx(1.0)
    assert stats.histogram[0] == 4  # every element in the exact-zero bin


def test_statistics_on_a_fixed_perturbation() -> None:
    actual = EXPECTED + np.array([0.0, 0.01, 0.0, 1e-5], dtype=np.float32)
    stats = compare_arrays(actual, EXPECTED, TOL)
    assert stats.max_abs == pytest.approx(0.01, rel=1e-5)
    assert stats.max_rel == pytest.approx(0.005, rel=1e-4)  # 0.01 / |-2|; the zero element is excluded
    assert stats.mean_abs == pytest.approx((0.01 + 1e-5) / 4, rel=1e-4)
    assert stats.beyond == 1 and stats.share_beyond == 0.25  # 1e-5 at 0.0 is within atol
    assert not stats.passed


def test_within_tolerance_passes_just_beyond_fails() -> None:
    inside = compare_arrays(np.array([1.0 + 1e-3]), np.array([1.0]), TOL)  # atol + rtol*1 = 1.1e-3
    outside = compare_arrays(np.array([1.0 + 1.2e-3]), np.array([1.0]), TOL)
    assert inside.passed and not outside.passed


def test_rms_term_scales_the_absolute_allowance_with_the_output() -> None:
    tol = Tolerance(0.0, 0.0, atol_rms=0.01)
    expected = np.array([100.0, -100.0, 0.0, 0.0])  # rms 70.7: allowance 0.707 on every element
    assert compare_arrays(expected + [0, 0, 0.7, 0], expected, tol).passed
    assert compare_arrays(expected + [0, 0, 0.72, 0], expected, tol).beyond == 1
    small = expected / 100  # the same relative error on an output 100x smaller: same verdicts
    assert compare_arrays(small + [0, 0, 0.007, 0], small, tol).passed
    assert not compare_arrays(small + [0, 0, 0.0072, 0], small, tol).passed
    assert tol.describe() == "0+0.01*rms/0" and TOL.describe() == "0.0001/0.001"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_on_either_side_fails(bad: float) -> None:
    broken = EXPECTED.copy()
    broken[1] = bad
    left, right = compare_arrays(broken, EXPECTED, TOL), compare_arrays(EXPECTED, broken, TOL)
    assert (left.nonfinite_actual, left.nonfinite_expected) == (1, 0) and not left.passed
    assert (right.nonfinite_actual, right.nonfinite_expected) == (0, 1) and not right.passed
    assert not compare_arrays(broken, broken.copy(), TOL).passed  # NaN on both sides is still a failure


def test_shape_mismatch_fails_and_says_so() -> None:
    stats = compare_arrays(np.zeros((2, 3)), np.zeros((3, 2)), TOL)
    assert not stats.passed and stats.shape_mismatch == "shape [2, 3] vs [3, 2]"
    assert stats.to_dict()["max_abs"] is None  # NaN is not JSON: it becomes null


def test_cosine_similarity_of_opposite_vectors() -> None:
    assert compare_arrays(-EXPECTED, EXPECTED, TOL).cosine == pytest.approx(-1.0)


def test_compare_outputs_names_the_failing_output_and_counts_mismatch() -> None:
    table = parse_overrides([], [])
    pair = compare_outputs(("ort-cpu", [EXPECTED, EXPECTED + 1]), ("eager", [EXPECTED, EXPECTED]),
                           ["ok", "bad"], ["float32", "float32"], 4, table)
    assert pair.failing_outputs == ("bad",) and not pair.passed
    short = compare_outputs(("ort-cpu", [EXPECTED]), ("eager", [EXPECTED, EXPECTED]), ["a", "b"],
                            ["float32"] * 2, 1, table)
    assert not short.passed and "1 outputs" in (short.error or "")


def test_tolerance_defaults_overrides_and_tf32() -> None:
    table = parse_overrides(["1e-2", "logits=0.5"], ["scores=0"])
    assert table.for_output("logits", "float32") == Tolerance(0.5, 1e-3, "user")
    assert table.for_output("scores", "float32") == Tolerance(1e-2, 0.0, "user")
    assert parse_overrides([], []).for_output("x", "float16") == DEFAULT_TOLERANCES["float16"]
    assert DEFAULT_TOLERANCES["float16"].atol_rms > 0 and DEFAULT_TOLERANCES["float32"].atol_rms == 0
    assert parse_overrides(["1e-3"], []).for_output("x", "float16") == Tolerance(1e-3, 1e-2, "user")  # no rms term
    assert parse_overrides([], [], tf32=True).for_output("x", "float32") == TF32_TOLERANCE
    assert parse_overrides([], []).for_output("ids", "int64").atol == 0.0
    with pytest.raises(UsageError):
        parse_overrides(["x=abc"], [])
    with pytest.raises(UsageError):
        parse_overrides(["-1"], [])


def test_seeded_inputs_are_identical_per_seed_and_respect_dtype_ranges() -> None:
    specs = [InputSpec("x", "float32", ("batch", 3)), InputSpec("ids", "int64", ("batch", "seq")),
             InputSpec("mask", "bool", ("batch", 4))]
    first = make_feeds(specs, 2, seed=1, dims={"seq": 5}, int_range=(3, 7))
    again = make_feeds(specs, 2, seed=1, dims={"seq": 5}, int_range=(3, 7))
    other = make_feeds(specs, 2, seed=2, dims={"seq": 5}, int_range=(3, 7))
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not np.array_equal(first["x"], other["x"])
    assert first["x"].shape == (2, 3) and first["x"].dtype == np.float32
    assert first["ids"].shape == (2, 5) and first["ids"].min() >= 3 and first["ids"].max() < 7
    assert first["mask"].dtype == np.bool_


def test_symbolic_axes_need_a_size() -> None:
    spec = InputSpec("ids", "int64", ("batch", "seq"))
    with pytest.raises(UsageError, match="--dim seq=SIZE"):
        make_feeds([spec], 1)
    assert dims_from_examples([spec], [np.zeros((2, 9))]) == {"seq": 9}


def test_parse_dims_and_int_range() -> None:
    assert parse_dims(["seq=128"]) == {"seq": 128}
    assert parse_int_range("0:30522") == (0, 30522)
    for bad in ("seq", "seq=0", "seq=x"):
        with pytest.raises(UsageError):
            parse_dims([bad])
    with pytest.raises(UsageError):
        parse_int_range("5:5")


@pytest.mark.parametrize(("elem_type", "dtype"), [(onnx.TensorProto.FLOAT, "float32"), (onnx.TensorProto.INT64, "int64"),
                                                  (onnx.TensorProto.BOOL, "bool"), (onnx.TensorProto.BFLOAT16, "bfloat16"),
                                                  (onnx.TensorProto.STRING, None), (onnx.TensorProto.COMPLEX64, None),
                                                  (onnx.TensorProto.FLOAT8E4M3FN, None)])
def test_graph_io_dtypes_and_refusals(tmp_path: Path, elem_type: int, dtype: str | None) -> None:
    from onnx import helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem_type, ["batch", 4])],
                              [helper.make_tensor_value_info("y", elem_type, ["batch", 4])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    if dtype is None:
        with pytest.raises(InputError, match="unsupported element type"):
            graph_io(path)
    else:
        inputs, outputs = graph_io(path)
        assert inputs[0].dtype == outputs[0].dtype == dtype and inputs[0].shape == ("batch", 4)


@pytest.mark.parametrize("scale", [0.0, 1e-16, 1e-6])
def test_an_output_an_all_zero_export_would_match_is_degenerate(scale: float) -> None:
    expected = np.full(8, scale, dtype=np.float32)
    stats = compare_arrays(expected.copy(), expected, TOL)
    assert stats.passed and stats.degenerate and stats.rms_expected == pytest.approx(scale)
    pair = compare_outputs(("ort", [expected]), ("eager", [expected]), ["logits"], ["float32"], 1,
                           parse_overrides([], []))
    assert pair.passed and len(pair.warnings) == 1
    assert pair.warnings[0].startswith("output 'logits': degenerate: parity proves nothing")
    assert pair.to_dict()["outputs"][0]["degenerate"] is True


def test_an_output_with_signal_is_not_degenerate() -> None:
    stats = compare_arrays(EXPECTED.copy(), EXPECTED, TOL)
    assert not stats.degenerate and stats.rms_expected == pytest.approx(float(np.sqrt(np.mean(EXPECTED ** 2))))
    pair = compare_outputs(("ort", [EXPECTED]), ("eager", [EXPECTED]), ["y"], ["float32"], 1, parse_overrides([], []))
    assert pair.warnings == () and pair.to_dict()["outputs"][0]["warning"] is None


def _noisy(scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 values near zero, the reference off them by up to 1e-3, the runtime by ``scale`` times that."""
    rng = np.random.default_rng(0)
    exact = rng.normal(0, 0.01, 4096)
    noise = rng.uniform(-1e-3, 1e-3, 4096)
    return exact + scale * noise[::-1], exact + noise, exact


def test_the_noise_floor_passes_fp32_arithmetic_and_fails_what_is_beyond_it() -> None:
    from portable.runners.comparator import NOISE_FACTOR

    table = parse_overrides([], [])
    for scale, passes in ((1.5, True), (NOISE_FACTOR * 1.5, False)):
        actual, expected, exact = _noisy(scale)
        pair = compare_outputs(("ort", [actual]), ("eager", [expected]), ["y"], ["float32"], 1, table, exact=[exact])
        [row] = pair.outputs
        assert not row.stats.passed  # the plain bound alone refuses both
        assert row.passed is passes and row.noise is not None
        assert row.judged_by == ("noise floor" if passes else "tolerance")
        text = row.verdict("ort", "eager")
        assert ("passes by the float64 noise floor" in text and "cleared by" in text) if passes else \
            ("the noise floor; allowed 4x" in text and pair.message.startswith("batch 1: output 'y' differs"))


def test_the_noise_floor_is_not_used_for_given_tolerances_or_other_dtypes() -> None:
    actual, expected, exact = _noisy(1.5)
    given = compare_outputs(("ort", [actual]), ("eager", [expected]), ["y"], ["float32"], 1,
                            parse_overrides(["1e-4"], []), exact=[exact])
    assert given.outputs[0].noise is None and not given.passed
    half = compare_outputs(("ort", [actual.astype(np.float16)]), ("eager", [expected.astype(np.float16)]), ["y"],
                           ["float16"], 1, parse_overrides([], []), exact=[exact])
    assert half.outputs[0].noise is None
