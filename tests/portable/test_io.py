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
