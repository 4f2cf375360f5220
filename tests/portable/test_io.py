"""Atomic writes, staged in the background while the caller checks the data."""

from __future__ import annotations

import pytest

from portable.io import StagedWrite, atomic_write_bytes


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_commit_renames_the_whole_file_onto_the_target(tmp_path):
    target = tmp_path / "model.onnx"
    data = bytes(range(256)) * 40_000  # 10 MB: more than one chunk of the writer
    with StagedWrite(target, data) as staged:
        assert not target.exists()  # nothing at the target until commit
        staged.commit()
    assert target.read_bytes() == data
    assert _leftovers(tmp_path) == []


def test_pieces_are_written_in_order_and_readable_before_the_commit(tmp_path):
    """An export's pieces (views of its weights among them) go out one after another; a check that
    reads the file itself gets the whole temporary, tail included, before the rename."""
    import numpy as np

    target = tmp_path / "model.onnx"
    weights = np.arange(3_000_000, dtype=np.float32)  # 12 MB: more than one chunk
    pieces = [b"head", memoryview(weights).cast("B"), memoryview(b"-middle-")[1:7], b""]
    expected = b"head" + weights.tobytes() + b"middle" + b"tail"
    with StagedWrite(target, pieces, tail=True) as staged:
        with pytest.raises(RuntimeError, match="tail was never appended"):
            staged.readable()
        staged.append(b"tail")
        assert staged.readable().read_bytes() == expected
        assert not target.exists()
        staged.commit()
    assert target.read_bytes() == expected
    assert _leftovers(tmp_path) == []


def test_readable_raises_what_the_writer_met(tmp_path, monkeypatch):
    import portable.io

    def disk_full(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(portable.io, "_write_all", disk_full)
    with pytest.raises(OSError, match="No space left"), StagedWrite(tmp_path / "m.onnx", [b"a", b"b"]) as staged:
        staged.readable()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("existing", [None, b"old"])
def test_a_failed_check_leaves_the_target_as_it_was(tmp_path, existing):
    target = tmp_path / "model.onnx"
    if existing is not None:
        target.write_bytes(existing)
    with pytest.raises(RuntimeError, match="validation failed"), StagedWrite(target, b"new" * 1000):
        raise RuntimeError("validation failed")
    assert (target.read_bytes() if target.exists() else None) == existing
    assert _leftovers(tmp_path) == []


def test_a_write_error_is_raised_by_commit_and_leaves_nothing(tmp_path, monkeypatch):
    import portable.io

    def disk_full(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(portable.io, "_write_all", disk_full)
    target = tmp_path / "model.onnx"
    with pytest.raises(OSError, match="No space left"), StagedWrite(target, b"data") as staged:
        staged.commit()
    assert not target.exists()
    assert _leftovers(tmp_path) == []


def test_atomic_write_bytes_replaces(tmp_path):
    target = tmp_path / "a" / "m.bin"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert _leftovers(target.parent) == []


def test_a_failed_check_does_not_wait_for_a_stalled_disk(tmp_path, monkeypatch):
    """Ctrl-C or a failed check while the fsync of a large file is still running: the block is left
    within ABANDON_WAIT_S, the temporary is removed, and the writer removes nothing else when it ends."""
    import os
    import threading
    import time

    import portable.io

    release = threading.Event()

    def slow_disk(fd: int, data: bytes) -> None:
        os.write(fd, data)
        release.wait(30)  # an fsync that takes long

    monkeypatch.setattr(portable.io, "_write_all", slow_disk)
    target = tmp_path / "model.onnx"
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), StagedWrite(target, b"x" * 1000) as staged:
        raise KeyboardInterrupt
    assert time.perf_counter() - start < portable.io.ABANDON_WAIT_S + 2
    assert not target.exists() and _leftovers(tmp_path) == []
    release.set()
    staged._thread.join(5)
    assert not staged._thread.is_alive() and list(tmp_path.iterdir()) == []


def test_a_tail_appended_during_the_checks_ends_the_file(tmp_path):
    target = tmp_path / "model.onnx"
    data = bytes(range(256)) * 40_000
    with StagedWrite(target, data, tail=True) as staged:
        staged.append(b"fingerprint")
        staged.commit()
    assert target.read_bytes() == data + b"fingerprint"
    with pytest.raises(RuntimeError, match="no tail was announced"), StagedWrite(tmp_path / "b", b"x") as plain:
        plain.append(b"y")


def test_a_tail_never_given_is_refused_at_commit_and_a_failed_check_leaves_nothing(tmp_path):
    import time

    target = tmp_path / "model.onnx"
    with pytest.raises(RuntimeError, match="never appended"), StagedWrite(target, b"x" * 1000, tail=True) as staged:
        staged.commit()  # would wait forever for the writer
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="validation failed"), StagedWrite(target, b"x" * 1000, tail=True) as staged:
        raise RuntimeError("validation failed")
    staged._thread.join(5)  # the writer waiting for its tail was released and removed its file
    assert time.perf_counter() - start < 2 and not staged._thread.is_alive()
    assert list(tmp_path.iterdir()) == []
