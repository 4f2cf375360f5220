"""The ONNX Runtime runner's I/O binding (the path GPU providers are timed through), run on the CPU device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from portable.runners.inputs import graph_io, make_feeds
from portable.runners.ort_runner import bind_io


def test_io_binding_gives_the_outputs_of_a_plain_run(encoder_onnx: Path) -> None:
    session = ort.InferenceSession(str(encoder_onnx), providers=["CPUExecutionProvider"])
    specs, outputs = graph_io(encoder_onnx)
    feeds = make_feeds(specs, 3, dims={specs[0].shape[1]: 8}, int_range=(0, 50))
    binding = bind_io(session, feeds, "cpu")
    session.run_with_iobinding(binding)
    binding.synchronize_outputs()
    bound = binding.copy_outputs_to_cpu()
    plain = session.run(None, feeds)
    assert len(bound) == len(plain) == len(outputs) == 2
    for got, expected in zip(bound, plain):
        assert got.shape == expected.shape and np.array_equal(got, expected)
    session.run_with_iobinding(binding)  # a second timed step reuses the bound inputs
    assert np.array_equal(binding.copy_outputs_to_cpu()[0], plain[0])
