"""``one_line``: every one-line failure summary in the package goes through it."""

from __future__ import annotations

import pytest

from portable.errors import one_line


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("broken __str__")


@pytest.mark.parametrize(("exc", "typed", "expected"), [
    (RuntimeError("first\nsecond"), True, "RuntimeError: first"),
    (RuntimeError("  padded line  \nmore"), False, "padded line"),
    (RuntimeError(), True, "RuntimeError"),  # an empty message used to be an IndexError in five places
    (KeyError(), False, "KeyError"),
    (RuntimeError("   \n  "), True, "RuntimeError"),
    (Unprintable(), True, "Unprintable"),
])
def test_one_line(exc: BaseException, typed: bool, expected: str) -> None:
    assert one_line(exc, typed=typed) == expected


def test_one_line_caps_the_message() -> None:
    assert one_line(ValueError("x" * 500), limit=10) == "ValueError: " + "x" * 10
