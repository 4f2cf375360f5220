"""``portable fleet report``: the results store summed up, as data the renderers share.

The headline is one row per target: of the fleet's models, how many load there whole, partly (in
partitions, or with nodes falling back) or not at all, by the target's own tables (offline) and, where
the ``live`` step ran, by its runtime. Then one row per model: its export or fix, the contract's verdict,
int8 accuracy and latency, parity, and every step that did not pass with its reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable.errors import InputError
from portable.fleet.records import StepRecord
from portable.fleet.store import Store

__all__ = ["CLASSES", "FleetReport", "ModelRow", "TargetRow", "load_report", "offline_class", "target_cell"]

CLASSES = ("whole", "partly", "no")
SCHEMA = "portable.fleet.report"


@dataclass(frozen=True)
class TargetRow:
    """One target over the fleet: models per offline class, per live class (where ``live`` ran)."""

    target: str
    models: int
    offline: tuple[tuple[str, int], ...]  # whole, partly, no, no file
    live: tuple[tuple[str, int], ...]  # whole, partly, no, not run

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "models": self.models, "offline": dict(self.offline), "live": dict(self.live)}


@dataclass(frozen=True)
class ModelRow:
    """One model: a cell per column, and the steps that did not pass."""

    name: str
    model: str
    export: str
    contract: str
    int8: str
    parity: str
    targets: tuple[tuple[str, str], ...]  # target -> its offline cell
    failures: tuple[tuple[str, str, str], ...]  # (step, status, reason)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "export": self.export, "contract": self.contract, "int8": self.int8,
                "parity": self.parity, "targets": dict(self.targets), "passed": self.passed,
                "failures": [{"step": s, "status": st, "reason": r} for s, st, r in self.failures]}


@dataclass(frozen=True)
class FleetReport:
    source: str
    meta: Mapping[str, Any]
    targets: tuple[TargetRow, ...]
    models: tuple[ModelRow, ...]
    records: tuple[StepRecord, ...]

    @property
    def exit_code(self) -> int:
        return 0 if all(r.passed for r in self.records) else 1

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": 1, "source": self.source, "exit_code": self.exit_code,
                "run": {k: v for k, v in self.meta.items() if k != "models"},
                "targets": [t.to_dict() for t in self.targets], "models": [m.to_dict() for m in self.models],
                "records": [_portable_record(r) for r in self.records]}


def _portable_record(record: StepRecord) -> dict[str, Any]:
    """A record as the report keeps it: the same on every machine and engine (no timings, no engine)."""
    data = record.to_dict()
    for key in ("seconds", "engine", "finished", "attempts"):
        data.pop(key)
    data["data"] = {k: v for k, v in data["data"].items() if k not in ("timings", "log", "latency_ratio_p50")}
    return data


def offline_class(summary: Mapping[str, Any] | None) -> str:
    """``whole`` (it loads, or one partition with nothing falling back: the batch fixed where the target
    needs it), ``partly`` (partitions or fallbacks), ``no`` (an unsupported node stops the load)."""
    if not summary:
        return "no"
    if not summary.get("falls_back"):
        return "whole" if summary.get("loads") else "no"
    estimate = summary.get("fixed_batch") or summary
    if estimate.get("partitions") == 1 and not estimate.get("fallback"):
        return "whole"
    return "partly" if estimate.get("supported", 0) else "no"


def target_cell(summary: Mapping[str, Any] | None) -> str:
    """``loads`` / ``no: Op xN``, or ``supported/nodes, Np: Op xN`` (the zoo's cells)."""
    if not summary:
        return "–"
    estimate = summary.get("fixed_batch") or summary
    fallback = sorted((estimate.get("fallback") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    ops = ", ".join(f"{op} x{n}" for op, n in fallback[:3]) + (f" +{len(fallback) - 3}" if len(fallback) > 3 else "")
    if not summary.get("falls_back"):
        return "loads" if summary.get("loads") else f"no: {ops}"
    head = f"{estimate.get('supported')}/{summary.get('nodes')}, {estimate.get('partitions')}p"
    return head + (f": {ops}" if ops else "")


def load_report(folder: str | Path) -> FleetReport:
    """The report of the results store at ``folder`` (its last run's models, in the fleet file's order)."""
    store = Store(folder)
    meta = store.run_meta()
    if not meta.get("models"):
        raise InputError("not a fleet results folder (no fleet.json: run `portable fleet run FLEET.toml -o FOLDER`)",
                         path=str(folder))
    entries = [m for m in meta["models"] if isinstance(m, Mapping)]
    by_model: dict[str, dict[str, StepRecord]] = {}
    for record in store.records():
        by_model.setdefault(record.model, {})[record.step] = record
    records = tuple(by_model.get(e["name"], {})[s] for e in entries for s in e["settings"]["steps"]
                    if s in by_model.get(e["name"], {}))
    targets = _targets(entries)
    rows = tuple(_model_row(e, by_model.get(e["name"], {}), targets) for e in entries)
    return FleetReport(str(folder), meta, tuple(_target_row(t, entries, by_model) for t in targets), rows, records)


def _targets(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(t for e in entries for t in e["settings"].get("targets", [])))


def _target_row(target: str, entries: Sequence[Mapping[str, Any]], by_model: Mapping[str, Mapping[str, StepRecord]]) -> TargetRow:
    offline: Counter[str] = Counter()
    live: Counter[str] = Counter()
    asked = [e for e in entries if target in e["settings"].get("targets", [])]
    for entry in asked:
        steps = by_model.get(entry["name"], {})
        offline[_offline_of(steps, target)] += 1
        live[_live_of(steps, target)] += 1
    return TargetRow(target, len(asked), tuple((k, offline[k]) for k in (*CLASSES, "no file")),
                     tuple((k, live[k]) for k in (*CLASSES, "not run")))


def _offline_of(steps: Mapping[str, StepRecord], target: str) -> str:
    validate = steps.get("validate")
    summaries = (validate.data.get("targets") or {}) if validate is not None else {}
    if target not in summaries:
        return "no file"
    return offline_class(summaries[target])


def _live_of(steps: Mapping[str, StepRecord], target: str) -> str:
    live = steps.get("live")
    classes = (live.data.get("classes") or {}) if live is not None else {}
    return classes.get(target, "not run")


def _model_row(entry: Mapping[str, Any], steps: Mapping[str, StepRecord], targets: Sequence[str]) -> ModelRow:
    validate = steps.get("validate")
    summaries = (validate.data.get("targets") or {}) if validate is not None else {}
    failures = tuple((s, steps[s].status, steps[s].reason) for s in entry["settings"]["steps"] if s in steps and not steps[s].passed)
    return ModelRow(entry["name"], entry["model"], _export_cell(steps.get("export")), _contract_cell(validate),
                    _int8_cell(steps.get("quantize")), _parity_cell(steps.get("compare")),
                    tuple((t, target_cell(summaries.get(t))) for t in targets), failures)


def _export_cell(record: StepRecord | None) -> str:
    if record is None:
        return "–"
    how = record.data.get("how", "export")
    if record.passed:
        remedies = record.data.get("remedies") or []
        return f"fixed ({', '.join(remedies)})" if how == "fix" and remedies else "exported" if how == "export" else how
    rules = record.data.get("rules") or []
    return f"{'refused' if record.status == 'failed' else record.status}" + (f": {', '.join(rules)}" if rules else "")


def _contract_cell(record: StepRecord | None) -> str:
    if record is None:
        return "–"
    if record.passed:
        return "portable"
    rules = record.data.get("rules") or []
    return f"{record.status}: {', '.join(rules)}" if rules else record.status


def _int8_cell(record: StepRecord | None) -> str:
    if record is None:
        return "–"
    data = record.data
    parts = []
    if data.get("min_sqnr_db") is not None:
        parts.append(f"{data['min_sqnr_db']:.1f} dB")
    if data.get("top1_agreement") is not None:
        parts.append(f"top-1 {100 * data['top1_agreement']:.1f} %")
    if data.get("latency_ratio_p50") is not None:
        parts.append(f"{data['latency_ratio_p50']:.2f}x latency")
    text = ", ".join(parts) or "–"
    return text if record.passed else f"{record.status}" + (f" ({text})" if parts else "")


def _parity_cell(record: StepRecord | None) -> str:
    if record is None:
        return "–"
    worst = record.data.get("max_abs")
    figure = f" (max abs {worst:.1e})" if isinstance(worst, (int, float)) else ""
    return ("pass" if record.passed else record.status) + figure
