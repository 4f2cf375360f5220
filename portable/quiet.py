"""Keep the libraries' chatter (torch's warnings, log lines and graph dumps; onnx-ir's and onnxscript's log
lines) out of portable's output."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import warnings
from collections.abc import Iterator

__all__ = ["debug_requested", "quiet_libraries", "quiet_user_code"]


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence Python warnings and log records below ERROR while a library works (torch exports, a remedy runs).

    What matters in them reaches the user as findings (torch.export's exceptions) or
    through the validators; the rest (deprecations, "torchvision is not installed",
    dumps of the traced graph) is noise.
    """
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def debug_requested() -> bool:
    """``portable --debug`` (or ``COMMAND --debug``) on the command running now."""
    if "click" not in sys.modules:
        return False
    import click

    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return bool(root and isinstance(root.obj, dict) and root.obj.get("debug"))


@contextlib.contextmanager
def quiet_user_code() -> Iterator[None]:
    """A SPEC's own code (loading a model): the libraries' warnings, log records and progress bars written to
    Python's stderr (transformers' "Loading weights", its GGUF "de-quantizing" bar) are noise in portable's
    output; what fails reaches the user as the exception. All of it shows under ``--debug``."""
    if debug_requested():
        yield
        return
    with quiet_libraries(), contextlib.redirect_stderr(io.StringIO()):
        yield
