"""``portable fleet run``: the driver. It decides what to run, hands tasks to the engine, writes every record.

Per model: its export first (unless the store holds a record made with the same key), then its other
steps on the file the export stored, all at once. A step that cannot run because the export made no
file is recorded ``skipped``, naming why. The driver alone writes the store, one atomic record at a time,
so a fleet stopped half-way keeps every record it finished.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from portable._version import __version__
from portable.errors import ExitCode
from portable.fleet.engine import Engine, Finished
from portable.fleet.plan import Fleet, ModelEntry, Settings
from portable.fleet.records import DONE, StepContext, StepRecord
from portable.fleet.steps import EXPORT, STEPS, resources
from portable.fleet.store import Store, key_of, source_digest
from portable.fleet.work import Task

__all__ = ["RunSummary", "run_fleet"]

POLL_S = 0.5


@dataclass(frozen=True)
class RunSummary:
    """A run: every record of the fleet (run now or kept), how many ran, the exit code."""

    records: tuple[StepRecord, ...]
    ran: int
    kept: int
    seconds: float

    @property
    def failing(self) -> tuple[StepRecord, ...]:
        return tuple(r for r in self.records if not r.passed)

    @property
    def exit_code(self) -> int:
        return int(ExitCode.FINDINGS if self.failing else ExitCode.OK)


class _Driver:
    """One run's state: the store, the engine, the records as they come."""

    def __init__(self, fleet: Fleet, store: Store, engine: Engine, force: bool, on_record: Callable[[StepRecord, bool], None]):
        self.fleet, self.store, self.engine, self.force, self.on_record = fleet, store, engine, force, on_record
        self.records: dict[tuple[str, str], StepRecord] = {}
        self.kept_count = 0

    def start(self, entry: ModelEntry) -> None:
        """The model's export, or (kept, or not asked for) its other steps at once."""
        key = _export_key(entry)
        if EXPORT not in entry.settings.steps:
            self.dependents(entry, key, None if not entry.is_onnx else entry.model)
            return
        kept = self.kept(entry.name, EXPORT, key, entry.settings)
        if kept is None:
            self.submit(entry, EXPORT, key, None)
            return
        artefact = self.store.artefact_path(entry.name)
        self.dependents(entry, key, str(artefact) if kept.passed and artefact.exists() else None, kept)

    def kept(self, model: str, step: str, key: str, settings: Settings) -> StepRecord | None:
        """The stored record, where it was made with ``key`` and is final (not forced), and did not stop at a
        limit that ``settings`` now raise (a step that hit its time or memory limit runs again with more)."""
        record = None if self.force else self.store.get(model, step)
        if record is None or record.key != key or record.status not in DONE or _limit_raised(record, settings):
            return None
        self.note(record, kept=True)
        return record

    def dependents(self, entry: ModelEntry, export_key: str, artefact: str | None, export: StepRecord | None = None) -> None:
        digest = export.artefact if export is not None and export.artefact else (artefact and _digest_of(artefact))
        for name in entry.settings.steps:
            if name == EXPORT:
                continue
            key = key_of(name, export_key, digest, _settings_key(entry, name), __version__)
            if self.kept(entry.name, name, key, entry.settings) is not None:
                continue
            if artefact is None and STEPS[name].needs_file:
                self.skip(entry, name, key, export)
                continue
            self.submit(entry, name, key, artefact)

    def skip(self, entry: ModelEntry, step: str, key: str, export: StepRecord | None) -> None:
        why = (f"no portable file: export {export.status}" + (f" ({export.reason[:200]})" if export.reason else "")
               if export is not None else "no portable file: add the export step (or give an .onnx model)")
        self.write(StepRecord(entry.name, step, "skipped", why, key, 0.0, engine=self.engine.name, finished=_now()))

    def submit(self, entry: ModelEntry, step: str, key: str, artefact: str | None) -> None:
        scratch = self.store.scratch(entry.name, step)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        settings = entry.settings
        context = StepContext(entry.name, entry.model, entry.inputs, entry.task, entry.shape, settings.to_dict(), artefact,
                              str(scratch), settings.args_for(step))
        cpus, gpus = resources(STEPS[step], settings.device)
        self.engine.submit(Task(entry.name, step, key, context, self.fleet.plugins, settings.timeout_s, settings.memory_gb,
                                cpus, gpus, settings.retries, first=step != EXPORT))

    def finished(self, done: Finished, entries: dict[str, ModelEntry]) -> None:
        task, outcome = done.task, done.outcome
        digest = self.stored_file(done) if task.step == EXPORT and outcome.status == "pass" else None
        status = "error" if task.step == EXPORT and outcome.status == "pass" and digest is None else outcome.status
        reason = "the export passed but wrote no file" if status != outcome.status else outcome.reason
        data = dict(outcome.data) | ({"limits": {"timeout_s": task.timeout_s, "memory_gb": task.memory_gb}}
                                     if status in LIMITED else {})
        record = StepRecord(task.model, task.step, status, reason, task.key, done.seconds, data, digest,
                            done.attempts, self.engine.name, _now())
        self.write(record)
        shutil.rmtree(task.context.scratch, ignore_errors=True)
        if task.step == EXPORT:
            entry = entries[task.model]
            self.dependents(entry, task.key, str(self.store.artefact_path(entry.name)) if digest else None, record)

    def stored_file(self, done: Finished) -> str | None:
        if done.artefact is not None:
            return self.store.put_artefact(done.task.model, data=done.artefact)
        source = done.outcome.artefact
        return self.store.put_artefact(done.task.model, source=source) if source and Path(source).exists() else None

    def write(self, record: StepRecord) -> None:
        self.store.put(record)
        self.note(record, kept=False)

    def note(self, record: StepRecord, kept: bool) -> None:
        self.records[(record.model, record.step)] = record
        self.kept_count += kept
        self.on_record(record, kept)


# A step stopped by one of its limits (status -> the setting): the limits are not in its key (raising them
# changes no result that was reached), so a stored record says which limit it hit, and a run that raises it
# runs the step again.
LIMITED = {"timeout": "timeout_s", "memory": "memory_gb"}


def _limit_raised(record: StepRecord, settings: Settings) -> bool:
    name = LIMITED.get(record.status)
    if name is None:
        return False
    hit = (record.data.get("limits") or {}).get(name)
    return hit is not None and float(getattr(settings, name)) > float(hit)


def _export_key(entry: ModelEntry) -> str:
    return key_of(EXPORT, entry.model, entry.inputs, entry.task, entry.shape, source_digest(entry.model),
                  _settings_key(entry, EXPORT), __version__)


def _settings_key(entry: ModelEntry, step: str) -> dict[str, Any]:
    """The settings the step's result depends on (the step's ``depends``) and its own arguments."""
    settings = entry.settings.to_dict()
    return {k: settings[k] for k in STEPS[step].depends} | {"args": list(entry.settings.args_for(step))}


def _digest_of(path: str) -> str:
    from portable.fleet.store import file_digest

    return file_digest(path)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_fleet(fleet: Fleet, out: str | Path, engine: Engine, *, force: bool = False,
              on_record: Callable[[StepRecord, bool], None] = lambda record, kept: None,
              on_tick: Callable[[list[str]], None] = lambda running: None) -> RunSummary:
    """Run every step of every model of ``fleet`` not already done, into the store at ``out``."""
    start, store = time.perf_counter(), Store(out)
    driver = _Driver(fleet, store, engine, force, on_record)
    entries = {e.name: e for e in fleet.models}
    store.write_run(_meta(fleet, engine, "running"))
    try:
        for entry in fleet.selected():
            driver.start(entry)
        while engine.busy():
            for done in engine.wait(POLL_S):
                driver.finished(done, entries)
            on_tick(engine.running())
    finally:
        engine.close()
    shutil.rmtree(store.root / ".scratch", ignore_errors=True)
    seconds = round(time.perf_counter() - start, 3)
    ordered = tuple(driver.records[(e.name, s)] for e in fleet.selected() for s in e.settings.steps
                    if (e.name, s) in driver.records)
    summary = RunSummary(ordered, len(ordered) - driver.kept_count, driver.kept_count, seconds)
    store.write_run(_meta(fleet, engine, "finished") | {"seconds": seconds, "ran": summary.ran, "kept": summary.kept,
                                                         "exit_code": summary.exit_code})
    return summary


def _meta(fleet: Fleet, engine: Engine, state: str) -> dict[str, Any]:
    return {"schema": "portable.fleet.run", "schema_version": 1, "portable": __version__, "fleet": fleet.path,
            "engine": engine.name, "state": state, "at": _now(), "plugins": list(fleet.plugins),
            "models": [e.to_dict() for e in fleet.models]}
