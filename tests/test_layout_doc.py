"""docs/layout.md names every product module and every command: a new module or command gets its line on the
developer's map, or this test names it. The files the developer pages cite (docs/layout.md, docs/house.md) exist.

A module is named by its path (``runners/sessions.py``) anywhere on the page, or by its file name
(``sessions.py``) where the page speaks of the folder nearest above it (``runners/``): that folder's row of the
folders table or its ``### `runners/` `` section, so that the four ``api.py`` are each named where they live."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "docs" / "layout.md"
FOLDERS = ("portable", "exporters", "validators", "runners")
_ROW = re.compile(r"^\| `([\w/]+/)` \|(.*)$", re.M)
# A path from the checkout in backticks (`tests/test_import_graph.py`, `bench/house_stats.py --mypy`); one with
# a placeholder in capitals (`runners/NAME_runner.py`) stands for a kind of file.
_CITED = re.compile(r"`((?:tests|bench|portable|exporters|validators|runners|fixtures|docs)/[\w./-]*\.\w+)[`: ]")
_SECTION = re.compile(r"^### `([\w/]+/)`[^\n]*\n(.*?)(?=^#|\Z)", re.M | re.S)


def product_modules(root: Path = ROOT) -> list[str]:
    """Every module of the four folders (``__init__.py`` aside) as a path from the checkout."""
    return sorted(str(p.relative_to(root)) for folder in FOLDERS for p in (root / folder).rglob("*.py")
                  if p.name != "__init__.py" and "__pycache__" not in p.parts)


def blocks(page: str) -> dict[str, str]:
    """Folder (``validators/targets/``) -> what the page says of it: its row of the folders table, its section."""
    found: dict[str, str] = {}
    for folder, text in [*_ROW.findall(page), *_SECTION.findall(page)]:
        found[folder] = found.get(folder, "") + "\n" + text
    return found


def _row_of(module: str, table: dict[str, str]) -> str:
    above = [folder for folder in table if module.startswith(folder)]
    return table[max(above, key=len)] if above else ""


def unnamed(modules: list[str], page: str) -> list[str]:
    """The modules ``page`` does not name."""
    table = blocks(page)
    return [m for m in modules if f"`{m}" not in page and f"`{Path(m).name}`" not in _row_of(m, table)]


def commands() -> list[str]:
    """Every command and subcommand, as typed after ``portable``."""
    import click

    from portable.cli import COMMANDS, cli

    found = []
    for name in COMMANDS:
        command = cli.get_command(click.Context(cli), name)
        subs = command.list_commands(click.Context(command)) if isinstance(command, click.Group) else []
        found += [f"{name} {sub}" for sub in subs] or [name]
    return found


def homeless(names: list[str], page: str) -> list[str]:
    """The commands that what the page says of ``portable/cli/`` does not name (``NAME`` or ``portable NAME``)."""
    row = blocks(page).get("portable/cli/", "")
    return [n for n in names if f"`{n}`" not in row and f"`portable {n}`" not in row]


def absent(page: str, root: Path = ROOT) -> list[str]:
    """The files ``page`` cites by path that the checkout lacks."""
    return sorted({p for p in _CITED.findall(page) if not re.search(r"[A-Z]{3}", p) and not (root / p).exists()})


@pytest.mark.parametrize("name", ["layout.md", "house.md"])
def test_the_files_the_developer_pages_cite_exist(name):
    assert absent((ROOT / "docs" / name).read_text()) == []


def test_a_cited_file_that_is_gone_is_named():
    page = ("`tests/test_import_graph.py`, `tests/test_typing.py` (marked slow), `bench/house_stats.py --mypy`,\n"
            "`runners/NAME_runner.py`, `validators/rules/portNNN_name.py`, `exporters/fix_run.py:12`\n")
    assert absent(page) == ["exporters/fix_run.py", "tests/test_typing.py"]


def test_layout_names_every_product_module():
    missing = unnamed(product_modules(), LAYOUT.read_text())
    assert missing == [], f"docs/layout.md does not name these modules (add each to its folder's section): {missing}"


def test_every_command_has_a_home_in_layout():
    names = commands()
    assert {"precheck", "matrix", "report merge"} <= set(names)
    missing = homeless(names, LAYOUT.read_text())
    assert missing == [], f"docs/layout.md's portable/cli/ section does not name these commands: {missing}"


def test_the_checks_fail_on_a_page_that_lacks_a_module_or_a_command():
    page = ("| `runners/` | `portable.runners` | the API (`api.py`) |\n"
            "| `portable/repair/` | `portable.repair` | the run (`run.py`) |\n"
            "| `portable/cli/` | `portable.cli` | `validate.py` (`portable validate`) |\n\n"
            "### `portable/cli/`\n\n- `compare.py`: `matrix`\n\n## Elsewhere\n\n`validators/wire.py`, `run.py`.\n")
    modules = ["runners/api.py", "portable/repair/api.py", "portable/repair/run.py", "validators/wire.py",
               "validators/shapes.py", "runners/run.py"]
    assert unnamed(modules, page) == ["portable/repair/api.py", "validators/shapes.py", "runners/run.py"]
    assert homeless(["validate", "matrix", "report merge"], page) == ["report merge"]
