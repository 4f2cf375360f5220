"""The compatibility matrix: per execution provider and batch size, does the session load,
does a first run succeed, does it match the CPU provider, and how many nodes fall back.

Node placement comes from ONNX Runtime's profiler: every executed node's event names the
provider that ran it; nodes run by another provider than the one asked (Memcpy nodes
aside) are counted as fallbacks.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import InputError, one_line
from portable.runners.base import RunnerFailed
from portable.runners.comparator import PairComparison, compare_outputs
from portable.runners.environment import describe_environment
from portable.runners.inputs import graph_io, make_feeds
from portable.runners.ort_runner import OnnxRuntimeRunner, available_providers, resolve_providers, short_name
from portable.runners.render import markdown_table
from portable.runners.tolerances import ToleranceTable

__all__ = ["MATRIX_HEADER", "MATRIX_SCHEMA", "MatrixCell", "MatrixReport", "Placement", "matrix_rows", "parse_placement",
           "render_matrix_markdown", "run_matrix", "runtime_columns"]

MATRIX_SCHEMA = "portable.matrix"
CPU = "CPUExecutionProvider"


@dataclass(frozen=True)
class Placement:
    """Which provider ran which node (from one profiled session)."""

    nodes: int
    fallback: int
    fallback_ops: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MatrixCell:
    provider: str
    batch: int
    available: bool
    loads: bool | None = None
    runs: bool | None = None
    parity: str = "n/a"  # "reference" | "pass" | "fail" | "n/a"
    max_abs: float | None = None
    placement: Placement | None = None
    load_seconds: float | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return not self.available or (bool(self.loads) and bool(self.runs) and self.parity in ("pass", "reference"))

    def to_dict(self) -> dict[str, Any]:
        p = self.placement
        return {"provider": self.provider, "batch": self.batch, "available": self.available, "loads": self.loads,
                "runs": self.runs, "parity": self.parity, "max_abs": self.max_abs,
                "nodes": None if p is None else p.nodes, "fallback_nodes": None if p is None else p.fallback,
                "fallback_ops": None if p is None else dict(p.fallback_ops),
                "load_seconds": self.load_seconds, "error": self.error}


@dataclass(frozen=True)
class MatrixReport:
    model: str
    target: str
    environment: Mapping[str, Any]
    cells: tuple[MatrixCell, ...]
    runtimes: tuple[Any, ...] = ()  # RuntimeRecord (runners/runtimes.py), with --runtime: one column per runtime

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cells) and not any(r.failed for r in self.runtimes)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": MATRIX_SCHEMA, "schema_version": 1, "model": self.model, "target": self.target,
                "passed": self.passed, "environment": dict(self.environment),
                "cells": [c.to_dict() for c in self.cells], "runtimes": [r.to_dict() for r in self.runtimes]}


def parse_placement(profile: Sequence[Mapping[str, Any]], provider: str) -> Placement:
    """Count executed nodes and those placed on another provider than ``provider``."""
    placed: dict[str, tuple[str, str]] = {}
    for event in profile:
        args = event.get("args") or {}
        if event.get("cat") == "Node" and "provider" in args:
            placed[str(event.get("name", "")).removesuffix("_kernel_time")] = (args["provider"], args.get("op_name", ""))
    off = Counter(op for prov, op in placed.values() if prov != provider and not op.startswith("Memcpy"))
    return Placement(len(placed), sum(off.values()), dict(off))


def _profile(runner: OnnxRuntimeRunner) -> Placement | None:
    path = runner.end_profiling()
    if not path:
        return None
    with open(path, encoding="utf-8") as handle:
        return parse_placement(json.load(handle), runner.provider)


Outputs = dict[int, list[np.ndarray]]


def _provider_cells(model: str, provider: str, feeds: Mapping[int, dict[str, np.ndarray]],
                    reference: Outputs | None, names: list[str], dtypes: list[str],
                    tmp: str) -> tuple[list[MatrixCell], Outputs]:
    """One provider's cells, and its outputs by batch (the CPU provider's are the reference
    for the others: it runs once)."""
    runner = OnnxRuntimeRunner(model, provider, profile_dir=tmp)
    try:
        runner.load()
    except RunnerFailed as exc:
        return [MatrixCell(provider, b, True, loads=False, error=str(exc)) for b in feeds], {}
    outputs: Outputs = {}
    runs: dict[int, tuple[PairComparison | None, str | None]] = {}
    for batch, feed in feeds.items():
        try:
            outputs[batch] = runner.infer(feed)
        except Exception as exc:  # noqa: BLE001 - any provider failure is a matrix entry
            runs[batch] = (None, one_line(exc, limit=400))
            continue
        expected = outputs[batch] if reference is None else reference.get(batch)
        runs[batch] = (None, "no CPU reference for this batch") if expected is None else (compare_outputs(
            (runner.name, outputs[batch]), ("ort-cpu", expected), names, dtypes, batch, ToleranceTable()), None)
    placement = _profile(runner)
    runner.unload()
    cells = [_cell(provider, b, pair, err, placement, runner.load_seconds) for b, (pair, err) in runs.items()]
    return cells, outputs


def _cell(provider: str, batch: int, pair: PairComparison | None, error: str | None, placement: Placement | None,
          load_s: float | None) -> MatrixCell:
    if pair is None:
        return MatrixCell(provider, batch, True, True, False, "n/a", None, placement, load_s, error)
    parity = "reference" if provider == CPU else ("pass" if pair.passed else "fail")
    max_abs = max((o.stats.max_abs for o in pair.outputs), default=None)
    return MatrixCell(provider, batch, True, True, True, parity, max_abs, placement, load_s, pair.error)


def run_matrix(model_path: str | Path, *, providers: str | Sequence[str] | None = None,
               batches: Sequence[int] | None = None, dims: Mapping[str, int] | None = None,
               int_ranges: tuple[tuple[int, int] | None, Mapping[str, tuple[int, int]]] = (None, {}), seed: int = 0,
               target: str | None = None, progress: Callable[[str], None] | None = None,
               runtimes: Sequence[str] = (), cap_seconds: float | None = None) -> MatrixReport:
    """Run the matrix on this machine. Asked-for providers that are not available are listed.
    ``int_ranges``: the range of random integer inputs (None: 0:10) and ranges by input name.
    ``runtimes`` (openvino, tract, reference): also run those on the same feeds against ONNX Runtime's CPU
    provider (runners/runtimes.py), one column each; a runtime not installed is a ``not installed`` cell."""
    from portable.runners.api import DEFAULT_INT_RANGE, _batches

    say = progress or (lambda _msg: None)
    model = str(model_path)
    if not Path(model).is_file():
        raise InputError("no such model file", path=model)
    specs, outs = graph_io(model)
    names, dtypes = [o.name for o in outs], [o.dtype for o in outs]
    asked = providers if providers is None or isinstance(providers, str) else ",".join(providers)
    wanted = resolve_providers(asked, require_available=False)
    sizes = _batches(specs, batches)
    default, per_input = int_ranges
    feeds = {b: make_feeds(specs, b, seed=seed, dims=dims or {}, int_range=default or DEFAULT_INT_RANGE,
                           int_ranges=per_input) for b in sizes}
    available = set(available_providers())
    cells: list[MatrixCell] = []
    reference: Outputs | None = None
    with tempfile.TemporaryDirectory(prefix="portable-matrix-") as tmp:
        for provider in [CPU, *(p for p in wanted if p != CPU)]:  # the CPU reference first
            say(f"matrix: {short_name(provider)}")
            if provider not in available:
                cells += [MatrixCell(provider, b, False, error="not available in this onnxruntime build")
                          for b in sizes]
                continue
            new, outputs = _provider_cells(model, provider, feeds, reference, names, dtypes, tmp)
            cells += new
            reference = outputs if provider == CPU else reference
    env = describe_environment()
    return MatrixReport(model, target or env["target"], env, tuple(cells),
                        _runtime_cells(model, runtimes, sizes, seed, dims, int_ranges, cap_seconds, say))


def _runtime_cells(model: str, runtimes: Sequence[str], sizes: Sequence[int], seed: int,
                   dims: Mapping[str, int] | None, int_ranges: tuple[tuple[int, int] | None, Mapping[str, Any]],
                   cap_seconds: float | None, say: Callable[[str], None]) -> tuple[Any, ...]:
    """The runtimes' records against ONNX Runtime's CPU provider (its own column is left out: the cells above)."""
    if not runtimes:
        return ()
    from portable.runners.api import DEFAULT_INT_RANGE
    from portable.runners.runtimes import compare_runtimes, parse_runtimes

    names = ["ort", *(n for n in parse_runtimes(runtimes) if n != "ort")]
    default, per_input = int_ranges
    report = compare_runtimes(model, names, batches=sizes, seed=seed, dims=dims, int_range=default or DEFAULT_INT_RANGE,
                              int_ranges=per_input, cap_seconds=cap_seconds, progress=say)
    return tuple(r for r in report.records if r.runtime != "ort")


def _yes(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "NO")


MATRIX_HEADER = ("target", "provider", "batch", "available", "loads", "first run", "parity vs CPU", "max abs",
                 "fallback nodes", "error")


def matrix_rows(data: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Rows from a matrix report's ``to_dict()`` (also what ``report merge`` reads)."""
    rows: list[tuple[str, ...]] = []
    for c in data["cells"]:
        fallback = "-" if c["nodes"] is None else f"{c['fallback_nodes']}/{c['nodes']}"
        if c.get("fallback_ops"):
            fallback += " (" + ", ".join(f"{op}×{n}" for op, n in c["fallback_ops"].items()) + ")"
        rows.append((data["target"], short_name(c["provider"]), str(c["batch"]), _yes(c["available"]),
                     _yes(c["loads"]), _yes(c["runs"]), c["parity"],
                     "-" if c["max_abs"] is None else f"{c['max_abs']:.3g}", fallback, c["error"] or ""))
    return rows


def runtime_columns(records: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The runtimes as columns, one row per batch: ``pass (1.2e-07)``, ``not installed``, ``does not load``..."""
    names = list(dict.fromkeys(r["runtime"] for r in records))
    batches = list(dict.fromkeys(r["batch"] for r in records))
    cell = {(r["runtime"], r["batch"]): r["status"] + ("" if r["max_abs"] is None else f" ({r['max_abs']:.2g})")
            for r in records}
    return ("batch", *names), [(str(b), *(cell.get((n, b), "-") for n in names)) for b in batches]


def render_matrix_markdown(report: MatrixReport) -> str:
    text = (f"# Compatibility matrix: `{report.model}`\n\n"
            + markdown_table(MATRIX_HEADER, matrix_rows(report.to_dict())) + "\n")
    if report.runtimes:
        header, rows = runtime_columns([r.to_dict() for r in report.runtimes])
        text += "\n## Runtimes, against ONNX Runtime's CPU provider\n\n" + markdown_table(header, rows) + "\n"
        errors = [f"- {r.runtime} (batch {r.batch}): {r.error}" for r in report.runtimes if r.error]
        text += ("\n" + "\n".join(errors) + "\n") if errors else ""
    return text
