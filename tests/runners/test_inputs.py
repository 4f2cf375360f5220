"""Per-input integer ranges: each integer input drawn from its example's own range, or given by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from portable.errors import UsageError
from portable.runners.inputs import (
    InputSpec,
    int_ranges_from_examples,
    make_feeds,
    parse_int_ranges,
    tensor_leaves,
)

SPECS = [InputSpec("ids", "int64", ("batch", 6)), InputSpec("mask", "int64", ("batch", 6)),
         InputSpec("x", "float32", ("batch", 3)), InputSpec("flags", "bool", ("batch", 2))]
EXAMPLES = (torch.randint(5, 50, (2, 6)), torch.ones(2, 6, dtype=torch.int64), torch.randn(2, 3),
            torch.zeros(2, 2, dtype=torch.bool))


def test_each_integer_input_keeps_its_examples_range() -> None:
    ranges = int_ranges_from_examples(SPECS, EXAMPLES)
    assert ranges == {"ids": (int(EXAMPLES[0].min()), int(EXAMPLES[0].max()) + 1), "mask": (1, 2)}
    feeds = make_feeds(SPECS, 4, seed=0, int_ranges=ranges)
    assert (feeds["mask"] == 1).all()  # an all-ones attention mask stays a mask
    assert feeds["ids"].min() >= ranges["ids"][0] and feeds["ids"].max() < ranges["ids"][1]
    assert len(np.unique(feeds["ids"])) > 1


def test_one_shared_range_would_break_the_mask() -> None:
    """What compare did before: every integer input from one range; the mask is no longer all ones."""
    feeds = make_feeds(SPECS, 4, seed=0, int_range=(1, 50))
    assert not (feeds["mask"] == 1).all()


def test_examples_in_lists_and_dicts_map_to_graph_inputs_in_order() -> None:
    a, b, c = torch.zeros(1), torch.ones(2), torch.full((3,), 7)
    assert [t.shape[0] for t in tensor_leaves(([a, b], {"c": c}, 3))] == [1, 2, 3]
    specs = [InputSpec(n, "int64", (1,)) for n in ("xs_0", "xs_1", "extra_c")]
    assert int_ranges_from_examples(specs, ([a.long(), b.long()], {"c": c})) == {
        "xs_0": (0, 1), "xs_1": (1, 2), "extra_c": (7, 8)}


def test_parse_int_ranges_per_input_and_shared() -> None:
    assert parse_int_ranges(["attention_mask=0:2", "5:100", "ids=0:30522"]) == (
        (5, 100), {"attention_mask": (0, 2), "ids": (0, 30522)})
    assert parse_int_ranges([]) == (None, {})
    for bad in ("=0:2", "mask=3:3", "mask=a:b", "mask"):
        with pytest.raises(UsageError, match="--int-range"):
            parse_int_ranges([bad])


def test_compare_draws_each_integer_input_from_its_own_example_and_given_ranges_win() -> None:
    """An all-ones attention mask stays all ones beside token ids in [0, 1000) (one range for both
    would feed the mask values in [0, 1000)); ``--int-range`` (for all, or NAME=) overrides."""
    from portable.runners.api import IntRanges

    specs = [InputSpec("ids", "int64", ("batch", 8)), InputSpec("mask", "int64", ("batch", 8))]
    ids = torch.randint(0, 1000, (2, 8), generator=torch.Generator().manual_seed(0))
    examples = (ids, torch.ones(2, 8, dtype=torch.int64))
    ranges = IntRanges.of(specs, examples, None, None)
    assert ranges.per_input == {"ids": (int(ids.min()), int(ids.max()) + 1), "mask": (1, 2)}
    feeds = make_feeds(specs, 3, seed=0, int_range=ranges.default, int_ranges=ranges.per_input)
    assert (feeds["mask"] == 1).all() and feeds["ids"].max() > 100
    assert IntRanges.of(specs, examples, (0, 5), {"mask": (0, 2)}).per_input == {"mask": (0, 2)}
    assert parse_int_ranges(["0:5", "mask=0:2"]) == ((0, 5), {"mask": (0, 2)})
