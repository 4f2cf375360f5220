"""Which optional packages are installed here, and at which version, without importing them."""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version

__all__ = ["installed_version"]


def installed_version(package: str) -> str | None:
    """The installed version of ``package`` (its distribution named alike), None when it is not installed."""
    if importlib.util.find_spec(package) is None:
        return None
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown version"
