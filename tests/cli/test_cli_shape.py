"""The commands stay thin: no function in ``portable/cli/`` is over 40 lines, counted from its ``def`` line to
the last line of its body (decorators aside, docstring in). A command that outgrows it is several: a mode of
``compare`` is its own function over its own options (issue 31)."""

from __future__ import annotations

import ast

from support import ROOT

CLI = ROOT / "portable" / "cli"
LIMIT = 40


def long_functions(source: str, name: str, limit: int = LIMIT) -> list[str]:
    """``NAME:LINE FUNCTION: N lines`` for each function (nested and methods too) over ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_of_the_cli_is_over_40_lines():
    found = [line for path in sorted(CLI.rglob("*.py"))
             for line in long_functions(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], f"over {LIMIT} lines (split them): " + "; ".join(found)


def test_a_long_function_is_named_and_one_of_40_lines_is_not():
    body = "\n".join(f"        x{i} = {i}" for i in range(40))
    source = f"def short():\n    pass\n\n\nclass C:\n    @property\n    def long(self):\n{body}\n"
    assert long_functions(source, "m.py") == ["m.py:7 long: 41 lines"]
    fits = "def fits():\n" + "\n".join(f"    x{i} = {i}" for i in range(39)) + "\n"
    assert long_functions(fits, "m.py") == []
    assert long_functions(fits, "m.py", limit=39) == ["m.py:1 fits: 40 lines"]


SHARED = ("--format", "--config", "--select", "--ignore")  # declared once, in portable/cli/options.py
OWN_WORDS = {("rules.py", "--format")}  # `rules --format text|markdown`: a listing, not a report


def restated_options(source: str, name: str) -> list[str]:
    """``NAME:LINE --flag`` for each ``click.option("--flag", ...)`` of a shared option declared outside options.py."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "option"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in SHARED
                and (name.split("/")[-1], node.args[0].value) not in OWN_WORDS):
            found.append(f"{name}:{node.lineno} {node.args[0].value}")
    return found


def test_the_shared_options_are_declared_once():
    found = [line for path in sorted(CLI.rglob("*.py")) if path.name != "options.py"
             for line in restated_options(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "use portable/cli/options.py's decorator: " + "; ".join(found)
    bad = 'import click\n@click.option("--format", "fmt")\ndef f(fmt): ...\n'
    assert restated_options(bad, "portable/cli/x.py") == ["portable/cli/x.py:2 --format"]
