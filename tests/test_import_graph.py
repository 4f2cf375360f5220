"""The static import graph of the package (module-level imports only, read with ``ast``): no cycles,
and the base folder ``portable/`` imports none of the folders above it (``validators``,
``exporters``, ``runners``) at module level. Imports inside functions and under
``if TYPE_CHECKING:`` do not run at import time, so they are not edges."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
# Where each folder's modules live in the package (pyproject's package-dir).
FOLDERS = {"portable": "portable", "exporters": "portable.exporters", "validators": "portable.validators",
           "runners": "portable.runners"}
UPPER = tuple(FOLDERS.values())[1:]

Graph = Mapping[str, frozenset[str]]


def module_files() -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts[:-1])) if parts[-1] == "__init__" else ".".join((package, *parts))
            modules[name] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(body: list[ast.stmt], lazy: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is imported; with ``lazy``, those in functions too."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            yield from _imports(node.body + node.orelse, lazy)
        elif isinstance(node, ast.Try):
            yield from _imports(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body], lazy)
        elif isinstance(node, (ast.With, ast.ClassDef, ast.For, ast.While)):
            yield from _imports(node.body, lazy)
        elif lazy and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _imports(node.body, lazy)


def _targets(node: ast.Import | ast.ImportFrom, known: set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    for alias in node.names:  # `from pkg import sub` imports the submodule when there is one
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base


def import_graph(sources: Mapping[str, str], *, lazy: bool = False) -> dict[str, frozenset[str]]:
    """Module -> the package modules it imports at module level (``lazy``: in functions too)."""
    known = set(sources)
    graph = {}
    for name, source in sources.items():
        targets = {t for node in _imports(ast.parse(source).body, lazy) for t in _targets(node, known)}
        graph[name] = frozenset(t for t in targets if t in known and t != name)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def upward_imports(graph: Graph) -> list[str]:
    """Module-level imports from the base folder (portable/, not its three upper subpackages) upwards."""
    def is_base(module: str) -> bool:
        return not any(module == up or module.startswith(up + ".") for up in UPPER)

    return sorted(f"{a} -> {b}" for a, targets in graph.items() if is_base(a) for b in targets if not is_base(b))


def _sources() -> dict[str, str]:
    return {name: path.read_text() for name, path in module_files().items()}


@pytest.fixture(scope="module")
def graph() -> dict[str, frozenset[str]]:
    return import_graph(_sources())


def test_the_graph_covers_the_package(graph):
    assert len(graph) > 80
    assert "portable.validators.rules.port004_control_flow" in graph["portable.validators.rules"]
    assert "portable.ruleinfo" in graph["portable.validators.rules.base"]


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def test_the_base_folder_imports_no_upper_folder_at_module_level(graph):
    assert upward_imports(graph) == []


def test_no_import_cycles_even_through_lazy_imports():
    """The imports inside functions too: no module reaches itself again, whenever its imports run (the
    rule catalogue imports the rules inside catalogue(); portable.repair imports the exporter's passes
    inside its remedies; nothing below imports them back)."""
    lazy = import_graph(_sources(), lazy=True)
    assert "portable.validators.rules" in lazy["portable.catalogue"]
    assert "portable.exporters.artefact" in lazy["portable.repair.run"]
    assert cycles(lazy) == []


def test_the_checks_fail_on_a_bad_graph():
    bad = import_graph({
        "portable.report": "from portable.formatters import sarif\n",
        "portable.formatters": "",
        "portable.formatters.sarif": "import portable.report\nfrom portable.validators.rules import ALL_RULES\n",
        "portable.validators.rules": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import portable.report\n",
        "portable.validators.engine": "def f():\n    import portable.report\n",
    })
    assert cycles(bad) == [["portable.formatters.sarif", "portable.report"]]
    assert upward_imports(bad) == ["portable.formatters.sarif -> portable.validators.rules"]
    assert bad["portable.validators.rules"] == bad["portable.validators.engine"] == frozenset()
    lazy = import_graph({"a": "def f():\n    import b\n", "b": "import a\n"}, lazy=True)
    assert cycles(lazy) == [["a", "b"]]


# (importer, imported): edges that must not exist, even through imports inside functions; the exceptions
# are the only lazy edges downwards that the layering allows (docs/layout.md, "Floors").
FORBIDDEN = (("portable.validators", "portable.exporters"), ("portable.runners", "portable.exporters"),
             ("portable.validators", "portable.runners"), ("portable.runners", "portable.repair"),
             ("portable.exporters", "portable.repair"), ("portable.validators", "portable.repair"))
ALLOWED = {("portable.validators.rules.port014_ort_session", "portable.runners.sessions"),
           ("portable.validators.targets.live", "portable.runners.sessions"),
           ("portable.validators.targets.htp", "portable.runners.sessions")}


def crossings(graph: Graph) -> list[str]:
    def inside(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if (a, b) not in ALLOWED and any(inside(a, x) and inside(b, y) for x, y in FORBIDDEN))


def test_the_folders_keep_their_floors():
    assert crossings(import_graph(_sources(), lazy=True)) == []
    bad = import_graph({"portable.validators.engine": "def f():\n    import portable.exporters.api\n",
                        "portable.exporters.api": ""}, lazy=True)
    assert crossings(bad) == ["portable.validators.engine -> portable.exporters.api"]
