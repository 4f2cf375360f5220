"""Figures of the house: function sizes, import graph, mypy error counts (docs/house.md).

    .venv/bin/python bench/house_stats.py [--mypy] [--root DIR]

Function sizes are counted with ``ast`` over the package's folders (a function's lines from its ``def``
to its last statement, docstring included; nested functions count on their own too). The import graph
comes from ``tests/test_import_graph.py`` (module-level imports, then with the imports inside functions
too), with its module-level edges between areas (``AREAS``) and the base folder's own. ``--mypy`` runs
mypy, as configured and ``--strict``, on a tree of links laid out as the package (the layout
``make typecheck`` checks), which takes a minute or two. JSON on stdout.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import statistics
from pathlib import Path
from typing import Any

FOLDERS = ("portable", "exporters", "validators", "runners")
# The areas of docs/house.md's import graph, most specific first; a module of none is the base folder's.
AREAS = ("portable.cli", "portable.formatters", "portable.repair", "portable.quantization",
         "portable.validators.rules", "portable.validators.pairs", "portable.validators.targets", "portable.validators",
         "portable.exporters", "portable.runners")


def _functions(root: Path) -> list[tuple[str, int]]:
    """Every function as (``path::name``, its lines)."""
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.append((f"{path.relative_to(root)}::{node.name}", (node.end_lineno or node.lineno) - node.lineno + 1))
    return found


def _percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _graph_module(root: Path) -> Any:
    spec = importlib.util.spec_from_file_location("import_graph", root / "tests" / "test_import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _area(module: str) -> str:
    return next((a for a in AREAS if module == a or module.startswith(a + ".")), "portable (base)")


def _areas(graph: dict[str, frozenset[str]]) -> dict[str, int]:
    """Module-level edges between areas: ``"a -> b"`` -> how many."""
    counts: dict[str, int] = {}
    for name, targets in graph.items():
        for target in targets:
            if _area(name) != _area(target):
                key = f"{_area(name)} -> {_area(target)}"
                counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _base_edges(graph: dict[str, frozenset[str]]) -> dict[str, list[str]]:
    """The base folder's own modules that import others of the package at module level, and what."""
    return {name: sorted(targets) for name, targets in sorted(graph.items())
            if _area(name) == "portable (base)" and targets}


def _graph(root: Path) -> dict[str, Any]:
    tool = _graph_module(root)
    sources = {name: path.read_text() for name, path in tool.module_files().items()}
    eager, lazy = tool.import_graph(sources), tool.import_graph(sources, lazy=True)
    return {"modules": len(eager), "edges": sum(map(len, eager.values())),
            "edges_with_lazy": sum(map(len, lazy.values())), "cycles": tool.cycles(eager),
            "cycles_with_lazy": tool.cycles(lazy), "upward_imports": tool.upward_imports(eager),
            "areas": _areas(eager), "base_edges": _base_edges(eager)}


def _link_tree(root: Path, tree: Path) -> None:
    """``tree/portable``: links laid out as the package (the Makefile's ``typecheck`` target does the same)."""
    package = tree / "portable"
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in sorted((root / "portable").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for folder in FOLDERS[1:]:
        (package / folder).symlink_to(root / folder)


def _mypy(root: Path, strict: bool) -> int:
    """mypy's error count on the package layout (``packages`` given here, so an older tree whose pyproject
    listed folders as ``files`` is counted the same way)."""
    from mypy import api

    tree = root / "build" / "house-stats"
    _link_tree(root, tree)
    args = ["--config-file", str(root / "pyproject.toml"), "--cache-dir", str(tree / ".mypy_cache"), "-p", "portable"]
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        out, _, _ = api.run(args + (["--strict"] if strict else []))
    finally:
        os.chdir(cwd)
    found = re.search(r"Found (\d+) error", out)
    return int(found.group(1)) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--mypy", action="store_true")
    args = parser.parse_args()
    functions = _functions(args.root)
    sizes = [size for _, size in functions]
    result: dict[str, Any] = {
        "functions": len(sizes), "lines_p50": int(statistics.median(sizes)), "lines_p90": _percentile(sizes, 0.9),
        "lines_max": max(sizes), "over_40_lines": sum(s > 40 for s in sizes),
        "over_40": {name: size for name, size in functions if size > 40}, "import_graph": _graph(args.root)}
    if args.mypy:
        result["mypy_package_layout"] = _mypy(args.root, strict=False)
        result["mypy_package_layout_strict"] = _mypy(args.root, strict=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
