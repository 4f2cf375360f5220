"""Python stack frames as the torch exporter records them (``pkg.torch.onnx.stack_trace``).

One parser for the exporter (which makes the paths relative), the validators (which turn a
node's trace into the finding's source line) and the runners (which name the line of a
divergent node): each wants the innermost frame of the user's own code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Frame", "frames_of", "innermost_user_frame", "is_library"]

# `File "f.py", line 9, in forward` and, on the next line unless it is the next frame, the code.
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>\S+))?'
                    r'(?:\n(?![ \t]*File ")[ \t]*(?P<code>[^\n]*))?')
# Library frames, absolute or as the exporter labels them (``site-packages/...``,
# ``<stdlib>/...``), and pseudo-files of generated code (torch.fx's ``<eval_with_key>.5``).
_LIBRARY = re.compile(r"(site-packages|dist-packages|^<|/torch/|/onnxscript/|/lib/python3\.\d+/)")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str | None = None
    code: str | None = None


def frames_of(trace: str) -> list[Frame]:
    """Every frame of a trace, outermost first."""
    return [Frame(m["file"], int(m["line"]), m["function"], (m["code"] or "").strip() or None)
            for m in _FRAME.finditer(trace or "")]


def is_library(file: str) -> bool:
    return bool(_LIBRARY.search(file))


def innermost_user_frame(frames: list[Frame]) -> Frame | None:
    """The innermost frame of the user's code (the line that made the op, not its caller);
    the innermost frame of all when the trace holds no user code."""
    user = [f for f in frames if not is_library(f.file)]
    return user[-1] if user else (frames[-1] if frames else None)
