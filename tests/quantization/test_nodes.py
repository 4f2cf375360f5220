"""The worst-nodes table's arithmetic: dequantization in wide types, SQNR of identical tensors."""

from __future__ import annotations

import numpy as np
import pytest

from portable.quantization.accuracy import PERFECT_DB, sqnr_db
from portable.quantization.nodes import _activation_sqnr, _activation_sums, _dequantized


def test_a_uint8_weight_with_a_zero_point_of_128_is_dequantized_without_wrapping_around():
    q = np.array([100, 200, 0, 255], np.uint8)
    assert _dequantized(q, np.array(0.5, np.float32), np.array(128, np.uint8), 0).tolist() == [-14.0, 36.0, -64.0, 63.5]


def test_per_axis_scales_and_zero_points_go_along_their_axis():
    q = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    got = _dequantized(q, np.array([1.0, 10.0], np.float32), np.array([1, 0], np.int8), 0)
    assert got.tolist() == [[0.0, 1.0, 2.0], [40.0, 50.0, 60.0]]
    got = _dequantized(q, np.array([1.0, 2.0, 3.0], np.float32), None, 1)
    assert got.tolist() == [[1.0, 4.0, 9.0], [4.0, 10.0, 18.0]]


def test_an_all_zero_tensor_kept_exactly_is_perfect_not_zero_db():
    zeros = [np.zeros(16, np.float32)] * 2
    ramp = [np.linspace(-1, 1, 16, dtype=np.float32)] * 2
    noisy = [r + 0.01 for r in ramp]
    assert _activation_sqnr(_activation_sums({"pre_qdq": zeros, "post_qdq": zeros, "float": zeros})) == (PERFECT_DB,
                                                                                                         PERFECT_DB)
    own, vs_float = _activation_sqnr(_activation_sums({"pre_qdq": ramp, "post_qdq": noisy, "float": ramp}))
    assert 30 < own == vs_float < 40


def test_sums_over_batches_give_the_sqnr_of_the_samples_joined():
    rng = np.random.default_rng(0)
    pre = [rng.standard_normal(32) for _ in range(3)]
    post = [p + 0.05 * rng.standard_normal(32) for p in pre]
    batches = sum(_activation_sums({"pre_qdq": [p], "post_qdq": [q], "float": [p]}) for p, q in zip(pre, post))
    joined = sqnr_db(np.concatenate(pre), np.concatenate(post))
    assert _activation_sqnr(batches) == pytest.approx((joined, joined), abs=1e-9) and 20 < joined < 40
