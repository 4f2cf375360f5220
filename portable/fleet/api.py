"""The fleet's Python API: a fleet file checked whole before any work, run, and reported."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from portable.errors import ConfigError
from portable.fleet.plan import Fleet, ModelEntry, load_fleet
from portable.fleet.records import StepRecord
from portable.fleet.report import FleetReport, load_report
from portable.fleet.run import RunSummary
from portable.fleet.steps import load_plugins, ordered

__all__ = ["check_fleet", "fleet_report", "only", "run_fleet_file"]


def check_fleet(path: str | Path) -> Fleet:
    """The fleet at ``path`` with its plug-ins imported, every step and target known, steps in run order;
    any problem is a :class:`~portable.errors.ConfigError` (exit 2)."""
    fleet = load_fleet(path)
    load_plugins(fleet.plugins)
    known = _known_targets()
    models = tuple(_checked(entry, known, fleet.path) for entry in fleet.models)
    return replace(fleet, models=models)


def only(fleet: Fleet, names: str | None) -> Fleet:
    """The fleet's models named in ``names`` (comma-separated; None: all); an unknown name is a usage error."""
    if not names:
        return fleet
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {e.name: e for e in fleet.models}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ConfigError(f"--only: no model {unknown[0]!r} in the fleet", path=fleet.path)
    return replace(fleet, only=tuple(dict.fromkeys(wanted)))


def _known_targets() -> tuple[str, ...]:
    from portable.validators.targets import TARGETS

    return TARGETS


def _checked(entry: ModelEntry, known: tuple[str, ...], where: str) -> ModelEntry:
    settings = entry.settings
    steps = ordered(settings.steps, f"model {entry.name!r}", where)
    unknown = [t for t in settings.targets if t not in (*known, "all")]
    if unknown:
        raise ConfigError(f"unknown target {unknown[0]!r} for model {entry.name!r} (known: {', '.join(known)}, all)", path=where)
    targets = known if "all" in settings.targets else settings.targets
    extra = [s for s, _ in settings.args if s not in steps and s not in _all_steps()]
    if extra:
        raise ConfigError(f"args for unknown step {extra[0]!r} in model {entry.name!r}", path=where)
    return replace(entry, settings=replace(settings, steps=steps, targets=tuple(targets)))


def _all_steps() -> tuple[str, ...]:
    from portable.fleet.steps import STEPS

    return tuple(STEPS)


def run_fleet_file(path: str | Path, output: str | Path, *, engine: str = "local", jobs: int = 1,
                   address: str | None = None, force: bool = False,
                   on_record: Callable[[StepRecord, bool], None] = lambda record, kept: None) -> RunSummary:
    """``portable fleet run PATH -o OUTPUT`` without progress: the summary (records, exit code);
    ``on_record(record, kept)`` hears of each record as it is written or kept."""
    from portable.fleet.engine import make_engine
    from portable.fleet.run import run_fleet

    fleet = check_fleet(path)
    return run_fleet(fleet, output, make_engine(engine, jobs=jobs, address=address), force=force, on_record=on_record)


def fleet_report(results: str | Path) -> FleetReport:
    """The report of a results folder."""
    return load_report(results)
