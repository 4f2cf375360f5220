"""The fleet's own steps, each one ``portable`` command on the model (``--format json``), its report summed up.

- ``export``: ``portable export MODEL`` (a SPEC or a model folder, with the entry's ``inputs``, ``task``,
  ``shape`` and ``batch``); for an ``.onnx`` file, ``portable validate`` then, unless it is portable already,
  ``portable fix``.
- ``validate``: ``portable validate FILE --target ...``: the contract and each target's offline verdict.
- ``live``: the same with ``--live``: the runtimes installed here asked, per target.
- ``quantize``: ``portable quantize FILE``: int8 accuracy and the int8/float latency ratio.
- ``compare``: ``portable compare FILE --reference MODEL`` (parity, no latency); an ``.onnx`` model has no
  PyTorch reference: its file on ONNX Runtime against the reference evaluator.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from portable.fleet.commands import Command, run_command
from portable.fleet.records import StepContext, StepOutcome

__all__ = ["compare", "export", "live", "live_class", "quantize", "validate"]

ARTEFACT = "model.onnx"


def _status(code: int) -> str:
    return "pass" if code == 0 else "failed" if code == 1 else "error"


def _failing_rules(validation: Mapping[str, Any] | None) -> list[str]:
    """The rule ids of the error findings of a validation report (in order, once each)."""
    findings = (validation or {}).get("findings") or []
    rules = [f.get("rule") for f in findings if f.get("severity") == "error"]
    return list(dict.fromkeys(str(r) for r in rules if r))


def _reason(cmd: Command, rules: Sequence[str] = ()) -> str:
    """Why a command did not pass: the rule ids it refused on, its own message, its error line."""
    if cmd.exit_code == 0:
        return ""
    report = cmd.report or {}
    error = report.get("error")
    message = report.get("message") or (error.get("message") if isinstance(error, Mapping) else error) or _file_error(report)
    text = str(message or cmd.said or f"exit {cmd.exit_code}").removeprefix("portable: error: ")
    head = f"refused: {', '.join(rules)}" if rules else f"exit {cmd.exit_code}"
    return f"{head}: {text}"[:600]


def _file_error(report: Mapping[str, Any]) -> str:
    """validate's error on the file it could not read (in its report of that file): the path and why."""
    model = _first_model(report)
    return f"{model.get('path')}: {model['error']}" if model.get("error") else ""


def export(ctx: StepContext) -> StepOutcome:
    """The portable file of the model: exported, fixed, or the ONNX file itself when it is portable already."""
    if ctx.model.lower().endswith(".onnx"):
        return _fix(ctx)
    out = str(Path(ctx.scratch) / ARTEFACT)
    args = ["export", ctx.model, "-o", out, "--format", "json", "--batch", str(ctx.settings.get("batch", "dynamic"))]
    args += [a for i in ctx.inputs for a in ("-i", i)]
    args += ["--task", ctx.task] if ctx.task else []
    args += [a for s in ctx.shape for a in ("--shape", s)]
    cmd = run_command([*args, *ctx.args])
    report = cmd.report or {}
    rules = _failing_rules(report.get("validation"))
    parity = report.get("parity") or {}
    data = {"how": "export", "exit_code": cmd.exit_code, "fingerprint": report.get("fingerprint"),
            "timings": report.get("timings") or {}, "rules": rules, "findings": _findings(report.get("validation")),
            "parity_ok": parity.get("ok") if parity else None, "message": report.get("message")}
    written = cmd.exit_code == 0 and Path(out).exists()
    return StepOutcome(_status(cmd.exit_code), _reason(cmd, rules), data, out if written else None)


def _fix(ctx: StepContext) -> StepOutcome:
    """An ONNX file from elsewhere: nothing to do when it is portable, else ``portable fix``."""
    checked = run_command(["validate", ctx.model, "--format", "json"])
    if checked.exit_code == 0:
        copy = Path(ctx.scratch) / ARTEFACT
        shutil.copyfile(ctx.model, copy)
        return StepOutcome("pass", "", {"how": "already portable", "exit_code": 0, "rules": []}, str(copy))
    if checked.exit_code != 1:
        return StepOutcome("error", _reason(checked), {"how": "fix", "exit_code": checked.exit_code})
    out = str(Path(ctx.scratch) / ARTEFACT)
    cmd = run_command(["fix", ctx.model, "-o", out, "--format", "json", "--batch", str(ctx.settings.get("batch", "dynamic")),
                       *ctx.args])
    report = cmd.report or {}
    remaining = [str(r) for r in (report.get("remaining") or [])] if isinstance(report.get("remaining"), list) else []
    rules = _failing_rules(report.get("validation")) or _failing_rules(checked.report)
    data = {"how": "fix", "exit_code": cmd.exit_code, "fingerprint": report.get("fingerprint"),
            "remedies": _remedies(report), "rules": rules if cmd.exit_code else [], "remaining": remaining}
    written = cmd.exit_code == 0 and Path(out).exists()
    return StepOutcome(_status(cmd.exit_code), _reason(cmd, rules), data, out if written else None)


def _remedies(report: Mapping[str, Any]) -> list[str]:
    """The names of the remedies fix applied (its report lists every remedy with its status)."""
    return [str(r.get("name")) for r in report.get("remedies") or [] if isinstance(r, Mapping) and r.get("status") == "applied"]


def _findings(validation: Mapping[str, Any] | None, limit: int = 5) -> list[dict[str, Any]]:
    """The first error findings, where they are: rule, message, node, op, the model's source line, the hint."""
    out = []
    for finding in [f for f in (validation or {}).get("findings") or [] if f.get("severity") == "error"][:limit]:
        location = finding.get("location") or {}
        source = location.get("source") or {}
        out.append({"rule": finding.get("rule"), "message": str(finding.get("message", ""))[:300],
                    "node": location.get("node"), "op_type": location.get("op_type"), "hint": finding.get("hint"),
                    "source": f"{source.get('file')}:{source.get('line')}" if source else None})
    return out


def _targets(ctx: StepContext) -> list[str]:
    targets = list(ctx.settings.get("targets") or [])
    return ["--target", ",".join(targets)] if targets else []


def validate(ctx: StepContext) -> StepOutcome:
    """The contract, and each target's offline verdict, on the portable file."""
    cmd = run_command(["validate", str(ctx.artefact), "--format", "json", *_targets(ctx), *ctx.args])
    report = _first_model(cmd.report)
    rules = _failing_rules(report)
    found = _findings(report, limit=3)
    data = {"exit_code": cmd.exit_code, "ok": report.get("ok"), "rules": rules, "findings": found,
            "counts": report.get("counts"), "targets": _offline(report)}
    if cmd.exit_code == 1 and found:
        return StepOutcome("failed", "findings: " + "; ".join(f"{f['rule']} {f['message']}" for f in found)[:600], data)
    return StepOutcome(_status(cmd.exit_code), _reason(cmd, rules), data)


def _first_model(report: Mapping[str, Any] | None) -> dict[str, Any]:
    """validate's JSON holds a list of reports, one per model: the one model's."""
    models = (report or {}).get("reports") or [report or {}]
    return dict(models[0]) if models else {}


def _offline(report: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("nodes", "supported", "partitions", "falls_back", "loads", "fallback", "fixed_batch", "line")
    return {t["name"]: {k: t.get(k) for k in keep} for t in report.get("targets") or []}


def live_class(verdict: str) -> str:
    """``whole``, ``partly``, ``no`` or ``not run``: a runtime's live answer (validators/targets/live.py) in a word."""
    text = verdict.lower()
    if text.startswith("not installed") or not text:
        return "not run"
    if text.startswith(("does not load", "read_model fails", "error")) or "a run fails" in text:
        return "no"
    if "takes" in text:  # openvino: query_model(CPU) takes N/M operations
        taken = text.rsplit("takes", 1)[1].split()[0]
        done, _, total = taken.partition("/")
        return "whole" if done == total else "partly"
    if "no cuda kernel:" in text and "no cuda kernel: none" not in text:
        return "partly"
    return "whole" if text.startswith("loads") else "not run"


def live(ctx: StepContext) -> StepOutcome:
    """The installed runtimes asked whether they load the file, per target (those without a runtime: not run)."""
    cmd = run_command(["validate", str(ctx.artefact), "--format", "json", "--live", *_targets(ctx), *ctx.args])
    report = _first_model(cmd.report)
    answers = {t["name"]: dict(t.get("live") or {}) for t in report.get("targets") or []}
    classes = {name: live_class(a.get("verdict", "")) for name, a in answers.items()}
    refused = [name for name, c in classes.items() if c == "no"]
    if cmd.exit_code >= 2 or not cmd.report:
        return StepOutcome("error", _reason(cmd), {"exit_code": cmd.exit_code})
    data = {"exit_code": cmd.exit_code, "answers": answers, "classes": classes}
    reason = "does not load on " + ", ".join(f"{n} ({answers[n].get('verdict', '')[:120]})" for n in refused) if refused else ""
    return StepOutcome("failed" if refused else "pass", reason, data)


def quantize(ctx: StepContext) -> StepOutcome:
    """int8 QDQ: accuracy on held-out samples and the int8/float latency ratio (ONNX Runtime CPU)."""
    out = str(Path(ctx.scratch) / "int8.onnx")
    cmd = run_command(["quantize", str(ctx.artefact), "-o", out, "--format", "json", "--force", *ctx.args])
    report = cmd.report or {}
    accuracy = report.get("accuracy") or []
    sqnr = [a["sqnr_db"] for a in accuracy if a.get("sqnr_db") is not None]
    top1 = [a["top1_agreement"] for a in accuracy if a.get("top1_agreement") is not None]
    latency = report.get("latency") or {}
    rules = _failing_rules(report.get("validation"))
    data = {"exit_code": cmd.exit_code, "min_sqnr_db": min(sqnr) if sqnr else None, "top1_agreement": min(top1) if top1 else None,
            "latency_ratio_p50": latency.get("ratio_p50"), "batch": latency.get("batch"), "rules": rules,
            "budgets_ok": report.get("budgets_ok")}
    return StepOutcome(_status(cmd.exit_code), _reason(cmd, rules), data)


def compare(ctx: StepContext) -> StepOutcome:
    """Parity of the portable file: against the model's PyTorch (eager), or, for an ONNX file, ONNX Runtime
    against the reference evaluator."""
    if ctx.model.lower().endswith(".onnx"):
        args = ["compare", str(ctx.artefact), "--runtime", "ort,reference", "--format", "json"]
    else:
        device = str(ctx.settings.get("device", "cpu"))
        args = ["compare", str(ctx.artefact), "--reference", ctx.model, "--format", "json", "--no-latency", "--no-compile",
                "--device", device]
    cmd = run_command([*args, *ctx.args])
    report = cmd.report or {}
    data = {"exit_code": cmd.exit_code, "passed": report.get("passed"), "max_abs": _worst(report),
            "failures": [str(f)[:200] for f in (report.get("failures") or [])][:5]}
    return StepOutcome(_status(cmd.exit_code), _reason(cmd), data)


def _worst(report: Mapping[str, Any]) -> float | None:
    """The largest max abs difference over every output of every parity row (either report's shape)."""
    found: list[float] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key == "max_abs" and isinstance(item, (int, float)):
                    found.append(float(item))
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(report.get("parity") or report.get("records") or [])
    return max(found) if found else None
