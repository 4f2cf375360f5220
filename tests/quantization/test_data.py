"""Samples: seeded ones are reproducible and never the calibration ones; the user's are checked and split."""

from __future__ import annotations

import numpy as np
import pytest

from portable.errors import UsageError
from portable.quantization.data import (
    CALIBRATION_SEED_SALT,
    HELD_OUT_SEED_SALT,
    held_out_split,
    load_samples,
    seeded_samples,
)
from portable.runners.inputs import InputSpec

IMAGE = InputSpec("x", "float32", ("batch", 3, 8, 8))
IDS = InputSpec("ids", "int64", ("batch", 16))
MASK = InputSpec("mask", "int64", ("batch", 16))


def _seeded(salt: int, count: int = 6, **kwargs):
    return seeded_samples([IMAGE, IDS, MASK], count, seed=0, salt=salt, batch=4, static=False,
                          int_ranges={"ids": (0, 50)}, **kwargs)


def test_seeded_samples_are_reproducible_and_held_out_ones_differ():
    first, again, held = _seeded(CALIBRATION_SEED_SALT), _seeded(CALIBRATION_SEED_SALT), _seeded(HELD_OUT_SEED_SALT)
    assert all(np.array_equal(first.arrays[k], again.arrays[k]) for k in first.arrays)
    assert not np.array_equal(first.arrays["x"], held.arrays["x"])
    assert first.arrays["x"].shape == (6, 3, 8, 8) and first.arrays["x"].dtype == np.float32
    ids, mask = first.arrays["ids"], first.arrays["mask"]
    assert ids.min() >= 0 and ids.max() < 50 and len(np.unique(ids)) > 10 and (mask == 1).all()
    assert [len(b["x"]) for b in first.batches()] == [4, 2]


def test_a_static_batch_takes_whole_batches_and_a_symbolic_dim_is_refused(tmp_path):
    path = tmp_path / "s.npz"
    np.savez(path, x=np.zeros((6, 3, 8, 8), np.float32))
    with pytest.raises(UsageError, match="give a multiple of 4 samples"):
        load_samples(path, [InputSpec("x", "float32", (4, 3, 8, 8))], 4, static=True)
    assert load_samples(path, [IMAGE], 4, static=False).count == 6
    with pytest.raises(UsageError, match="static dims after it"):
        load_samples(path, [InputSpec("x", "float32", ("batch", 3, "h", 8))], 4, static=False)


def test_the_split_holds_out_the_last_quarter_and_refuses_a_single_sample(tmp_path):
    path = tmp_path / "s.npz"
    np.savez(path, x=np.arange(8 * 192, dtype=np.float32).reshape(8, 3, 8, 8))
    calibration, held = held_out_split(load_samples(path, [IMAGE], 4, static=False))
    assert (calibration.count, held.count) == (6, 2)
    assert held.arrays["x"][0, 0, 0, 0] == 6 * 192  # the last samples, in order
    np.savez(path, x=np.zeros((1, 3, 8, 8), np.float32))
    with pytest.raises(UsageError, match="cannot be split"):
        held_out_split(load_samples(path, [IMAGE], 4, static=False))
