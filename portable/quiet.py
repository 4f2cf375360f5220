"""Keep the libraries' chatter (torch's warnings, log lines and graph dumps; onnx-ir's and onnxscript's log
lines) out of portable's output."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

__all__ = ["quiet_libraries"]


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
