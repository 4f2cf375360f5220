"""SIGKILL at random points of an export never leaves a partial target or damages an existing one."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from support import ROOT

from portable.io import atomic_write_bytes

SPEC = f"{ROOT}/fixtures/models/cnn.py:build"
TRIALS = 20


def _export(target, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "portable.cli", "export", SPEC, "-i", "x=1x3x32x32",
                             "-o", str(target), "--force", "--quiet", "--no-verify", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A complete export of the same model, and how long one takes."""
    target = tmp_path_factory.mktemp("ref") / "cnn.onnx"
    start = time.perf_counter()
    assert _export(target).wait(timeout=300) == 0
    return target.read_bytes(), time.perf_counter() - start


@pytest.mark.slow
def test_sigkill_at_random_points(tmp_path, reference):
    complete, duration = reference
    old = b"the previous model, which must survive intact"
    rng = random.Random(20261129)
    outcomes = {"old": 0, "new": 0}
    for trial in range(TRIALS):
        target = tmp_path / "cnn.onnx"
        target.write_bytes(old)
        child = _export(target)
        time.sleep(rng.uniform(0.0, duration * 1.1))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        data = target.read_bytes()
        assert data in (old, complete), f"trial {trial}: the target is neither the old file nor a complete export"
        outcomes["old" if data == old else "new"] += 1
    assert outcomes["old"] > 0  # some kills did land mid-export
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("cnn.onnx", "cnn.onnx.json")]
    assert all(name.startswith(".cnn.onnx.") and name.endswith(".tmp") for name in leftovers), leftovers


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".model.onnx.{dead.stdout.strip()}.tmp"
    stale.write_bytes(b"half")
    live = tmp_path / f".model.onnx.{os.getpid() + 0}.tmp"  # our own pid: alive, kept
    live.write_bytes(b"busy")
    atomic_write_bytes(tmp_path / "model.onnx", b"complete")
    assert not stale.exists()
    assert (tmp_path / "model.onnx").read_bytes() == b"complete"
