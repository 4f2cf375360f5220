"""Writing files atomically: the target is either untouched or complete, never partial.

The data goes to a hidden ``.NAME.PID.tmp`` beside the target, is synced, then renamed
onto it. Any catchable failure removes the temporary file; SIGTERM is turned into
KeyboardInterrupt while writing, so it unwinds and cleans up too. SIGKILL cannot be
caught: its temporary file (never the target) stays until the next write to the same
target, which removes temporaries whose process is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_text"]

CHUNK = 8 * 1024**2


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While writing, SIGTERM unwinds like Ctrl-C so nothing is left half-done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    for start in range(0, len(view), CHUNK):
        chunk = view[start:start + CHUNK]
        while chunk:
            chunk = chunk[os.write(fd, chunk):]
    os.fsync(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_temps(path: Path) -> None:
    """Remove temporary files of writers that were killed (their pid is gone)."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:-4]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: str | Path, data: bytes | memoryview) -> None:
    """Write ``data`` to ``path`` atomically (the folder is created if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    with _terminate_as_interrupt():
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies
        try:
            _write_all(fd, data)
            os.close(fd)
            fd = -1
            os.replace(tmp, path)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            tmp.unlink(missing_ok=True)
            raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
