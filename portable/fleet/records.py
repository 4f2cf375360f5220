"""What a fleet records: one frozen record per (model, step), and what a step's function returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DONE", "FAILING", "STATUSES", "StepContext", "StepOutcome", "StepRecord"]

# pass: the step's command exited 0; failed: it found something (exit 1: a refusal, findings, a parity or budget
# failure); error: it could not run (exit 2 or 3, or an exception); timeout, memory: over the step's limits;
# killed: its process died (a signal, or Ray's worker gone after its retries); skipped: a step before it failed.
STATUSES = ("pass", "failed", "error", "timeout", "memory", "killed", "skipped")
FAILING = frozenset(STATUSES) - {"pass"}
# A record with one of these, made with the same key, is not run again; a killed step is (the machine's fault).
DONE = frozenset({"pass", "failed", "error", "timeout", "memory", "skipped"})


@dataclass(frozen=True)
class StepContext:
    """What a step's function gets, in its own process: the model, the file to work on, a scratch folder."""

    name: str  # the model's name in the fleet
    model: str  # as written in the fleet file (paths made absolute)
    inputs: tuple[str, ...]
    task: str | None
    shape: tuple[str, ...]
    settings: Mapping[str, Any]  # Settings.to_dict()
    artefact: str | None  # the portable file (export's output), where there is one
    scratch: str  # a folder of this step's own; its files are gone after the step, but the artefact it names
    args: tuple[str, ...] = ()  # extra command-line arguments for this step, from the fleet file


@dataclass(frozen=True)
class StepOutcome:
    """A step function's result: its verdict, why, what it measured, and (export) the file it wrote."""

    status: str
    reason: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    artefact: str | None = None  # a file in the scratch folder: the driver moves it into the store


@dataclass(frozen=True)
class StepRecord:
    """One (model, step) in the results store."""

    model: str
    step: str
    status: str
    reason: str
    key: str  # what the result depends on, hashed: the same key on the next run means nothing to do
    seconds: float
    data: Mapping[str, Any] = field(default_factory=dict)
    artefact: str | None = None  # sha256 of the file a step wrote into the store (export)
    attempts: int = 1
    engine: str = "local"
    finished: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "step": self.step, "status": self.status, "reason": self.reason, "key": self.key,
                "seconds": self.seconds, "artefact": self.artefact, "attempts": self.attempts, "engine": self.engine,
                "finished": self.finished, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepRecord:
        return cls(model=str(data["model"]), step=str(data["step"]), status=str(data["status"]),
                   reason=str(data.get("reason", "")), key=str(data.get("key", "")), seconds=float(data.get("seconds", 0)),
                   data=dict(data.get("data") or {}), artefact=data.get("artefact"), attempts=int(data.get("attempts", 1)),
                   engine=str(data.get("engine", "local")), finished=str(data.get("finished", "")))
