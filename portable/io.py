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
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["StagedWrite", "atomic_write_bytes", "atomic_write_text", "check_writable", "terminate_as_interrupt"]

CHUNK = 8 * 1024**2
ABANDON_WAIT_S = 1.0  # how long a check that failed waits for the writer before removing its file
# The main thread waits for the writer in slices this long. The kernel may deliver SIGTERM or SIGINT to
# the writer thread (whichever thread does not block it); Python then runs the handler in the main
# thread only when that thread is back in the interpreter, and a wait without a timeout never returns
# before the fsync does, however slow the disk.
WAIT_SLICE_S = 0.1


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
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
    view = memoryview(data).cast("B")
    for start in range(0, len(view), CHUNK):
        chunk = view[start:start + CHUNK]
        while chunk:
            chunk = chunk[os.write(fd, chunk):]


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


def atomic_write_bytes(path: str | Path, data: bytes | memoryview | Sequence[bytes | memoryview]) -> None:
    """Write ``data`` (bytes, or buffers one after another) to ``path`` atomically (the folder is
    created if missing)."""
    with terminate_as_interrupt(), StagedWrite(path, data) as staged:
        staged.commit()


class StagedWrite:
    """An atomic write whose bytes go to the temporary file in a background thread (``os.write``
    and ``fsync`` release the GIL), so a caller can check the data meanwhile; :meth:`commit`
    waits and renames it onto the target, leaving the block without it removes the temporary.

    Used as ``with StagedWrite(path, data) as staged: <checks>; staged.commit()``: a check
    that raises (or Ctrl-C, or SIGTERM under :func:`terminate_as_interrupt`) leaves the
    target as it was. The writer keeps its own reference to ``data``.
    """

    def __init__(self, path: str | Path, data: bytes | memoryview | Sequence[bytes | memoryview], *,
                 tail: bool = False) -> None:
        """``data``: the bytes, or a sequence of buffers written one after another (an export's
        pieces, views of its tensors among them). ``tail=True``: more bytes follow (:meth:`append`),
        known only after the checks began; the writer writes ``data`` at once and waits for them
        before its fsync."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(self.path)
        self.tmp = self.path.parent / f".{self.path.name}.{os.getpid()}.tmp"
        self._error: BaseException | None = None
        self._done = self._abandoned = False
        self._tail: list[bytes] = []
        self._tail_given = threading.Event()
        self._written = threading.Event()
        if not tail:
            self._tail_given.set()
        pieces = (data,) if isinstance(data, (bytes, bytearray, memoryview)) else tuple(data)
        self._thread = threading.Thread(target=self._write, args=(pieces,), name="portable-write", daemon=True)
        self._thread.start()

    def append(self, data: bytes) -> None:
        """The last bytes of a ``tail=True`` write, written after the first ones, before the fsync."""
        if self._tail_given.is_set():
            raise RuntimeError("StagedWrite.append: no tail was announced, or it was given already")
        self._tail.append(data)
        self._tail_given.set()

    def readable(self) -> Path:
        """The temporary file once every byte is in it (its fsync may still run): for a check that
        reads the file itself. Raises what the writer met."""
        if not self._tail_given.is_set():
            raise RuntimeError("StagedWrite.readable: the announced tail was never appended")
        while not self._written.wait(WAIT_SLICE_S):
            pass
        if self._error is not None:
            raise self._error
        return self.tmp

    def _write(self, pieces: tuple[bytes | memoryview, ...]) -> None:
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies
            try:
                for piece in pieces:
                    _write_all(fd, piece)
                self._tail_given.wait()
                for more in self._tail:
                    _write_all(fd, more)
                self._written.set()
                if not self._abandoned:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by commit()
            self._error = exc
        finally:
            self._written.set()
        if self._abandoned:  # the caller left without committing while the bytes were still going out
            self.tmp.unlink(missing_ok=True)

    def commit(self) -> None:
        """Wait for the bytes to be on disk, then rename them onto the target."""
        if not self._tail_given.is_set():
            raise RuntimeError("StagedWrite.commit: the announced tail was never appended")
        while self._thread.is_alive():
            self._thread.join(WAIT_SLICE_S)
        if self._error is not None:
            raise self._error
        os.replace(self.tmp, self.path)
        self._done = True

    def __enter__(self) -> StagedWrite:
        return self

    def __exit__(self, *exc: object) -> None:
        """Without a commit, the temporary goes. A writer still in the disk (a slow fsync) is waited for
        only briefly, so Ctrl-C or SIGTERM ends the run at once; it removes its file when it is done."""
        if not self._done:
            self._abandoned = True
            self._tail_given.set()  # a writer waiting for its tail goes on, to remove its file
            self._thread.join(timeout=ABANDON_WAIT_S)
            self.tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def check_writable(path: str | Path, *, what: str = "output", folder: bool = False) -> None:
    """Refuse, before any work, a ``path`` that cannot be written: a usage error (exit 2) naming it.

    A probe file is created and removed in the nearest folder that exists (the one the write would
    create its folders in); ``os.access`` is not enough: root passes it on /sys or /proc, where the
    write then fails. A folder in the way, or a folder named as the file, is refused too; with
    ``folder``, ``path`` is a folder to write into (a file of that name is refused).
    """
    from portable.errors import UsageError

    target = Path(path)
    if target.is_dir() and not folder:
        raise UsageError(f"the {what} is a folder, not a file", path=str(target))
    if target.exists() and not target.is_dir() and folder:
        raise UsageError(f"the {what} is a file, not a folder", path=str(target))
    nearest = target if folder else target.parent
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise UsageError(f"cannot write the {what}: {nearest} is not a folder", path=str(target))
    _probe(nearest, target, what)


def _probe(folder: Path, target: Path, what: str) -> None:
    from portable.errors import UsageError

    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot write the {what} here ({reason} in {folder})", path=str(target),
                         hint="choose a folder you can write to") from None
