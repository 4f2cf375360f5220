"""Source locations without the exporting machine's absolute paths.

The torch exporter records, on every node, the Python stack that produced it
(``pkg.torch.onnx.stack_trace``) with absolute file names. Portable files keep the
file:line and module path, but relative: to the project root for the user's code,
``site-packages/...`` for installed libraries and ``<stdlib>/lib/pythonX.Y/...`` for
the standard library (the validators' library-frame pattern recognizes both).
"""

from __future__ import annotations

import re
import sys
import sysconfig
from dataclasses import replace
from functools import lru_cache
from pathlib import Path, PurePosixPath

from portable.findings import SourceLocation
from portable.frames import frames_of, innermost_user_frame

__all__ = ["project_root", "relative_file", "relativize_trace", "user_frame"]

_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` with a project marker; ``start`` if none."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in _MARKERS):
            return folder
    return start


@lru_cache(maxsize=1)
def _library_roots() -> tuple[tuple[str, str], ...]:
    """(absolute prefix, portable label) for installed packages and the standard library, longest first."""
    roots: dict[str, str] = {}
    for path in sys.path:
        if path and ("site-packages" in path or "dist-packages" in path):
            roots[str(Path(path).resolve())] = "site-packages"
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        roots.setdefault(str(Path(stdlib).resolve()), f"<stdlib>/lib/{version}")
    return tuple(sorted(roots.items(), key=lambda item: -len(item[0])))


@lru_cache(maxsize=4096)
def relative_file(file: str, root: str) -> str:
    """``file`` relative to ``root`` (POSIX separators), a library label, or its bare name."""
    path = Path(file)
    if not path.is_absolute():
        return PurePosixPath(*path.parts).as_posix()
    in_root = file.startswith(root + "/")
    for prefix, label in _library_roots():
        # a virtualenv inside the project is still a library; a project installed into one is not
        if file.startswith(prefix + "/") and not (in_root and root.startswith(prefix + "/")):
            return f"{label}/{Path(file).relative_to(prefix).as_posix()}"
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return f"<external>/{path.name}"


def relativize_trace(trace: str, root: Path) -> str:
    """A stack trace with every ``File "..."`` made relative (see :func:`relative_file`)."""
    base = str(root.resolve())
    return re.sub(r'File "([^"]+)"', lambda m: f'File "{relative_file(m.group(1), base)}"', trace)


def user_frame(trace: str, root: Path, module: str | None = None) -> SourceLocation | None:
    """The innermost frame of the user's own code (else the innermost frame), relative."""
    base = str(root.resolve())
    frames = [replace(f, file=relative_file(f.file, base)) for f in frames_of(trace)]
    frame = innermost_user_frame(frames)
    return None if frame is None else SourceLocation(file=frame.file, line=frame.line, module=module)
