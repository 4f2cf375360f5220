"""``portable fix``: make an ONNX model from elsewhere portable where that is safe, prove it equivalent,
and say what no remedy fixes.

* :mod:`~portable.repair.records`: the plan, the remedy and result records, :class:`FixFailed`;
* :mod:`~portable.repair.remedies`: the remedies table (the passes live with the exporter's);
* :mod:`~portable.repair.run`: the run, phase by phase, through the artefact step;
* :mod:`~portable.repair.proof`: ONNX Runtime runs the original and the fixed model on the same inputs;
* :mod:`~portable.repair.api`: :func:`fix`, the entry point of ``portable.fix`` and ``portable fix``.

Named ``repair``, not ``fix``: ``portable.fix`` is the function. A ground-floor package: it imports the
upper folders (``exporters``, ``validators``, ``runners``) inside its functions only.
"""

from __future__ import annotations

from portable.repair.api import fix
from portable.repair.proof import Proof
from portable.repair.records import FixFailed, FixResult, Plan, Remedy, RemedyReport
from portable.repair.remedies import REMEDIES

__all__ = ["REMEDIES", "FixFailed", "FixResult", "Plan", "Proof", "Remedy", "RemedyReport", "fix"]
