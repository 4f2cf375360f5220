"""``portable fleet``: many models, many targets, on this machine or on Ray, resumable, with one report.

* :mod:`~portable.fleet.plan`: the fleet file (``FLEET.toml``), checked before any work;
* :mod:`~portable.fleet.steps`: the step registry (``builtin``: the steps that are portable's commands);
* :mod:`~portable.fleet.run`: the driver; :mod:`~portable.fleet.store`: the results store it alone writes;
* :mod:`~portable.fleet.local`, :mod:`~portable.fleet.ray_engine`: the engines (``engine``: what both do);
* :mod:`~portable.fleet.report`, :mod:`~portable.fleet.render`: ``portable fleet report``.

A ground-floor package: it runs the upper folders' work through the CLI's commands, inside the steps'
own processes, and imports them inside functions only.
"""

from __future__ import annotations

from portable.fleet.api import check_fleet, fleet_report, run_fleet_file
from portable.fleet.records import StepContext, StepOutcome, StepRecord
from portable.fleet.steps import STEPS, Step, register

__all__ = ["STEPS", "Step", "StepContext", "StepOutcome", "StepRecord", "check_fleet", "fleet_report", "register",
           "run_fleet_file"]
