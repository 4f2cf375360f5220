"""Atomic writes, overwrite refusal, size limits; an export killed mid-write leaves no file."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import onnx_ir as ir
import pytest

from portable.errors import FindingsError, UsageError
from portable.exporters.writer import check_size, weights_bytes, write_atomic

ROOT = Path(__file__).resolve().parents[2]


def test_refuses_to_overwrite_without_force(tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    with pytest.raises(UsageError, match="--force"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    write_atomic(target, b"new", force=True)
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_cli_refuses_to_overwrite_before_exporting(cli, tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    result = cli("export", "fixtures/models/cnn.py:build", "-o", str(target), "-q")
    assert result.exit_code == 2 and "--force" in result.output
    assert target.read_bytes() == b"old"


def test_weights_above_the_limit_are_refused_with_size_and_limit(cnn_export):
    model = ir.load(str(cnn_export.path))
    size = weights_bytes(model)
    assert check_size(model, size) == size
    with pytest.raises(FindingsError, match=rf"{size:,} bytes, above the policy's max-size \({size - 1:,} bytes\)"):
        check_size(model, size - 1)


def test_oversized_export_writes_nothing(tmp_path):
    from portable.exporters.spec_export import export_spec
    from portable.policy import Policy

    with pytest.raises(FindingsError, match="max-size"):
        export_spec(f"{ROOT}/fixtures/models/branch.py:build".replace("branch", "specialize"), tmp_path / "m.onnx",
                    batch=2, policy=Policy(max_size_bytes=100))
    assert list(tmp_path.iterdir()) == []


KILLED = """
import os, signal, sys, time
# Ctrl-C and SIGTERM as at a terminal. A child of a background job (`cmd &` in a script, as CI may run)
# inherits SIGINT ignored, and Python then keeps it ignored; a harness may also start the suite with both
# signals blocked (the mask is inherited through exec, and a handler does not unblock it). Either way the
# signal would never reach the export, which then finishes its write: not the case under test.
SIGNALS = {signal.SIGINT, signal.SIGTERM}
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
WRITER = sys.argv[3] == "writer"
if WRITER:  # the kernel must give the signal to the writer thread: the main thread blocks it
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
def stall(fd):  # the bytes are in the temporary file; hold here until the test signals
    if WRITER:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    print("WRITING", flush=True)
    time.sleep(120)
os.fsync = stall
from portable.exporters.spec_export import export_spec
export_spec(sys.argv[1], sys.argv[2], verify=False)
"""


# ``writer``: the signal lands on the writing thread, as the kernel may choose (CI's run showed SIGTERM
# waiting out the stall while the main thread waited for the writer without a timeout).
@pytest.mark.parametrize("lands_on", ["main", "writer"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_export_killed_mid_write_leaves_no_file(sig, lands_on, tmp_path):
    target = tmp_path / "cnn.onnx"
    child = subprocess.Popen([sys.executable, "-c", KILLED, f"{ROOT}/fixtures/models/cnn.py:build", str(target),
                              lands_on], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout.readline().strip() == "WRITING"
        partial = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert partial and partial[0].stat().st_size > 0  # mid-write: a temporary file with bytes
        child.send_signal(sig)
        assert child.wait(timeout=60) != 0
    finally:
        child.kill()
    assert not target.exists()
    leftovers = {p.name for p in tmp_path.iterdir()}
    if sig != signal.SIGKILL:  # SIGKILL cannot be caught: only a hidden temporary file may remain
        assert leftovers == set()
    assert all(name.startswith(".cnn.onnx.") for name in leftovers)
