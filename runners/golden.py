"""The golden bundle: a comparison's inputs and reference outputs in ONNX's test-data layout,
``DIR/test_data_set_N/input_K.pb`` and ``output_K.pb`` (``TensorProto``, named after the graph's
inputs and outputs), which onnx's backend test runner, ONNX Runtime's ``onnx_test_runner`` and the
device toolchains read. One set per batch size, in the comparison's batch order.

Written whole or not at all: the sets are made in a temporary folder beside ``DIR`` and moved in;
sets of an earlier, longer bundle in ``DIR`` (``test_data_set_N`` past the new ones) are removed, so
the folder holds this comparison alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

__all__ = ["read_golden", "write_golden"]


def _tensor_file(path: Path, array: np.ndarray, name: str) -> None:
    from onnx import numpy_helper

    path.write_bytes(numpy_helper.from_array(np.asarray(array), name=name).SerializeToString())


def write_golden(folder: str | Path, feeds: Mapping[int, Mapping[str, np.ndarray]],
                 outputs: Mapping[int, Sequence[np.ndarray]], output_names: Sequence[str]) -> Path:
    """Write one ``test_data_set_N`` per batch of ``feeds`` (inputs in the graph's order) with ``outputs``."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".golden-", dir=target))
    try:
        for index, batch in enumerate(feeds):
            data = staging / f"test_data_set_{index}"
            data.mkdir()
            for k, (name, array) in enumerate(feeds[batch].items()):
                _tensor_file(data / f"input_{k}.pb", array, name)
            for k, (name, array) in enumerate(zip(output_names, outputs[batch])):
                _tensor_file(data / f"output_{k}.pb", array, name)
        for data in sorted(staging.iterdir()):
            final = target / data.name
            if final.exists():
                shutil.rmtree(final)
            os.replace(data, final)
        _drop_stale(target, len(feeds))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _drop_stale(target: Path, count: int) -> None:
    for data in target.glob("test_data_set_*"):
        suffix = data.name.rsplit("_", 1)[1]
        if data.is_dir() and suffix.isdigit() and int(suffix) >= count:
            shutil.rmtree(data)


def read_golden(folder: str | Path) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """Each set's (inputs by name, outputs by name), read back with ``onnx.numpy_helper``."""
    from onnx import TensorProto, numpy_helper

    def read(path: Path) -> tuple[str, np.ndarray]:
        tensor = TensorProto()
        tensor.ParseFromString(path.read_bytes())
        return tensor.name, numpy_helper.to_array(tensor)

    def ordered(data: Path, kind: str) -> list[Path]:
        return sorted(data.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))

    sets = sorted(Path(folder).glob("test_data_set_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return [(dict(map(read, ordered(d, "input"))), dict(map(read, ordered(d, "output")))) for d in sets]
