"""``portable report merge``: matrix and compare reports from several machines, one table.

Each input is the JSON of ``portable matrix --format json`` (schema ``portable.matrix``),
``portable compare --format json`` (schema ``portable.compare``), ``portable fleet report --format json``
(schema ``portable.fleet.report``) or a fleet's results folder; rows keep the target (GPU or CPU name, or
``--target``) they were made on, a fleet's rows the results they came from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable.errors import InputError
from portable.runners.matrix import MATRIX_HEADER, MATRIX_SCHEMA, matrix_rows
from portable.runners.render import markdown_table
from portable.runners.report import COMPARE_SCHEMA

FLEET_SCHEMA = "portable.fleet.report"

__all__ = ["COMPARE_MERGE_HEADER", "FLEET_MERGE_HEADER", "MergedReport", "compare_rows", "fleet_rows", "merge_reports",
           "render_merged_markdown"]

FLEET_MERGE_HEADER = ("results", "target", "models", "whole", "partly", "no", "no file", "live whole")
COMPARE_MERGE_HEADER = ("target", "model", "compile mode", "runner", "batch", "p50 ms", "p99 ms", "samples/s",
                        "speed-up vs eager", "parity")


@dataclass(frozen=True)
class MergedReport:
    sources: tuple[str, ...]
    matrix: tuple[tuple[str, ...], ...]
    compare: tuple[tuple[str, ...], ...]
    fleet: tuple[tuple[str, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "portable.merged", "schema_version": 1, "sources": list(self.sources),
                "matrix": {"header": list(MATRIX_HEADER), "rows": [list(r) for r in self.matrix]},
                "compare": {"header": list(COMPARE_MERGE_HEADER), "rows": [list(r) for r in self.compare]},
                "fleet": {"header": list(FLEET_MERGE_HEADER), "rows": [list(r) for r in self.fleet]}}


def _target(data: Mapping[str, Any]) -> str:
    env = data.get("environment") or {}
    return str(data.get("target") or env.get("target") or env.get("host") or "?")


def compare_rows(data: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Latency rows of one compare report, with its parity verdict."""
    speed = {(s["runner"], s["batch"]): s["speedup_over_eager"] for s in data.get("speedup", [])}
    verdict = "pass" if data.get("passed") else "FAIL"
    mode = str((data.get("setup") or {}).get("compile_mode"))
    return [(_target(data), Path(data["model"]).name, mode, r["runner"], str(r["batch"]), f"{r['p50_s'] * 1e3:.3f}",
             f"{r['p99_s'] * 1e3:.3f}", f"{r['throughput']:.1f}",
             f"{speed[(r['runner'], r['batch'])]:.2f}x" if (r["runner"], r["batch"]) in speed else "-", verdict)
            for r in data.get("latency", [])]


def fleet_rows(data: Mapping[str, Any], source: str) -> list[tuple[str, ...]]:
    """Per target of a fleet report: how many models load there whole, partly, not at all, without a file."""
    rows = []
    for t in data.get("targets", []):
        offline, live = t.get("offline", {}), t.get("live", {})
        counts = (str(offline.get(k, 0)) for k in ("whole", "partly", "no", "no file"))
        rows.append((source, str(t["target"]), str(t["models"]), *counts, str(live.get("whole", 0))))
    return rows


def _read_fleet(path: Path) -> dict[str, Any]:
    from portable.fleet.report import load_report

    return load_report(path).to_dict()


def _read(path: Path) -> dict[str, Any]:
    if path.is_dir():
        return _read_fleet(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read report: {exc}", path=str(path)) from None
    if not isinstance(data, dict) or data.get("schema") not in (MATRIX_SCHEMA, COMPARE_SCHEMA, FLEET_SCHEMA):
        raise InputError(f"not a matrix, compare or fleet report (schema {data.get('schema') if isinstance(data, dict) else None!r})",
                         path=str(path))
    return data


def merge_reports(paths: Sequence[Path]) -> MergedReport:
    """Read every report and gather its rows, in the order given."""
    matrix: list[tuple[str, ...]] = []
    compared: list[tuple[str, ...]] = []
    fleets: list[tuple[str, ...]] = []
    for path in paths:
        data = _read(path)
        if data["schema"] == MATRIX_SCHEMA:
            matrix.extend(matrix_rows(data))
        elif data["schema"] == FLEET_SCHEMA:
            fleets.extend(fleet_rows(data, str(path)))
        else:
            compared.extend(compare_rows(data))
    return MergedReport(tuple(str(p) for p in paths), tuple(matrix), tuple(compared), tuple(fleets))


def render_merged_markdown(merged: MergedReport) -> str:
    parts = ["# Merged reports", "", "Sources: " + ", ".join(f"`{s}`" for s in merged.sources), ""]
    if merged.matrix:
        parts += ["## Compatibility matrix", "", markdown_table(MATRIX_HEADER, merged.matrix), ""]
    if merged.compare:
        parts += ["## Latency and parity", "", markdown_table(COMPARE_MERGE_HEADER, merged.compare), ""]
    if merged.fleet:
        parts += ["## Fleets, per target", "", markdown_table(FLEET_MERGE_HEADER, merged.fleet), ""]
    return "\n".join(parts)
