"""``docs/zoo.md`` and ``docs/zoo.json`` from the cached per-model records."""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.zoo.registry import PORTABLE, TARGETS

__all__ = ["outcome", "passes", "summary", "write"]

PHASES = ("torch.export", "translate", "optimize", "validate", "verify", "write")
PACKAGES = ("torch", "torchvision", "transformers", "timm", "onnx", "onnxruntime", "onnxscript", "onnx-ir", "onnxsim")


def outcome(rec: dict[str, Any], key: str = "dynamic") -> str:
    """``portable``, ``portable, degenerate output``, ``refused: PORTnnn``, ``internal error``, ``crashed``..."""
    if "crashed" in rec:
        return f"crashed: {rec['crashed']}"
    run = rec[key]
    if not run["ok"]:
        rules = sorted({f["rule"] for f in run.get("findings", [])})
        return f"refused: {', '.join(rules)}" if run["kind"] == "refused" else "internal error"
    file = run["file"]
    if not file["validate_ok"]:
        return "validate: findings"
    if "error" in file["parity"] or "error" in file["compare"]:
        return "parity could not run"
    if file["parity"]["degenerate"]:
        return "portable, degenerate output"
    return PORTABLE if file["compare"]["passed"] else "compare failed"


def passes(rec: dict[str, Any]) -> bool:
    return outcome(rec) == PORTABLE


def as_expected(rec: dict[str, Any]) -> bool:
    return outcome(rec) == rec["expected"]


def summary(records: Sequence[dict[str, Any]]) -> str:
    static = [r for r in records if r["expected"] == PORTABLE]
    ok = [r for r in static if passes(r)]
    share = len(ok) / len(static) if static else 0.0
    targets = {r["name"]: passes(r) for r in records if r["name"] in TARGETS}
    missing = [t + ("" if t in targets else " (not run)") for t in TARGETS if not targets.get(t)]
    refusals = [r for r in records if r["expected"] != PORTABLE]
    right = [r for r in refusals if as_expected(r)]
    return (f"{len(ok)} of {len(static)} static-apart-from-batch architectures export with --batch dynamic, validate "
            f"and pass verify and compare ({share:.0%}; target >= 90 %: {'met' if share >= 0.9 else 'NOT met'}); "
            f"BERT, GPT-2, ConvNeXt, Swin: {'all pass' if not missing else 'failing: ' + ', '.join(missing)}; "
            f"expected refusals with the expected rule: {len(right)} of {len(refusals)}.")


def _nodes(rec: dict[str, Any]) -> str:
    file = _file(rec)
    bare = rec.get("bare") or {}
    sim = rec.get("bare_onnxsim") or {}
    ours = str(file["nodes"]) if file else "–"
    return f"{ours} / {bare.get('nodes', '–')} / {sim.get('nodes', '–')}"


def _file(rec: dict[str, Any]) -> dict[str, Any] | None:
    """portable's file: the dynamic export's, else the batch-1 export's."""
    for key in ("dynamic", "static"):
        if key in rec and rec[key]["ok"]:
            return rec[key]["file"]
    return None


def _left(rec: dict[str, Any]) -> str:
    file = _file(rec)
    if not file or not file["onnxsim"].get("ok"):
        return "–"
    return str(file["nodes"] - file["onnxsim"]["nodes"])


def _times(rec: dict[str, Any]) -> str:
    run = next((rec[k] for k in ("dynamic", "static") if k in rec and rec[k]["ok"]), None)
    bare = (rec.get("bare") or {}).get("seconds")
    if run is None:
        return "–"
    t = run["timings"]
    phases = "/".join(f"{t.get(p, 0):.1f}" for p in PHASES)
    return f"{sum(t.values()):.1f} ({phases}) vs {bare if bare is not None else '–'}"


def _parity(rec: dict[str, Any]) -> str:
    file = _file(rec)
    if not file or "error" in file["parity"]:
        return "–" if not file else file["parity"]["error"][:60]
    p = file["parity"]
    rms = min((o["rms"] for o in p["outputs"]), default=0.0)
    flag = " **degenerate**" if p["degenerate"] else ""
    cmp = file["compare"]
    verdict = ("pass" if cmp.get("passed") else "FAIL") if "error" not in cmp else "error"
    return f"{p['max_abs']:.1e} (min RMS {rms:.1e}){flag}; compare {verdict} {cmp.get('max_abs', 0):.1e}"


def _row(rec: dict[str, Any]) -> str:
    static = outcome(rec, "static") if "crashed" not in rec else "–"
    mark = "yes" if as_expected(rec) else "**no**"
    ident = _file(rec)["identity"] if _file(rec) else "–"
    return (f"| {rec['name']} | {rec['expected']} | {outcome(rec)} | {mark} | {static} | {_nodes(rec)} | {_left(rec)} "
            f"| {ident} | {_times(rec)} | {_parity(rec)} |")


HEADER = ("| model | expected | `--batch dynamic` | as expected | `--batch 1` | nodes: portable / bare / onnxsim(bare) "
          "| onnxsim removes from portable's | Identity | portable s (" + "/".join(PHASES) + ") vs bare s "
          "| parity: max abs (ORT vs eager, batch 1+3), compare |\n|" + "---|" * 10)


def _refusal(rec: dict[str, Any]) -> list[str]:
    lines = [f"### {rec['name']} ({outcome(rec)})", ""]
    if "crashed" in rec:
        return [*lines, f"- {rec['crashed']}", "", "```", rec.get("log_tail", ""), "```", ""]
    for key, label in (("dynamic", "--batch dynamic"), ("static", "--batch 1")):
        run = rec[key]
        if run["ok"]:
            continue
        lines.append(f"- `{label}`: {run['message'][:400]}")
        for f in run.get("findings", [])[:3]:
            lines.append(f"  - **{f['rule']}** node `{f['node']}` ({f['op_type']}), source `{f['source']}`; hint: {f['hint']}")
    bare = rec.get("bare") or {}
    lines.append(f"- bare torch.onnx.export (dynamic batch): {'ok' if bare.get('ok') else bare.get('error')}")
    return [*lines, ""]


def _failing(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if outcome(r) != PORTABLE or "crashed" in r]


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def markdown(records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    env = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    lines = ["# The model zoo", "", "Generated by `make zoo` (`bench/zoo/`); do not edit by hand. " + env + ".", "",
             f"**{summary(records)}**", "", HEADER, *(_row(r) for r in records), "",
             "## Not portable, and why", ""]
    for rec in _failing(records):
        lines.extend(_refusal(rec))
    return "\n".join(lines).rstrip() + "\n"


def write(records: Sequence[dict[str, Any]], folder: Path) -> str:
    """Write ``zoo.md`` and ``zoo.json`` into ``folder``; the summary line."""
    meta = {"generated": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "versions": _versions(),
            "summary": summary(records), "total_s": round(sum(r.get("total_s", 0) for r in records), 1)}
    (folder / "zoo.json").write_text(json.dumps(meta | {"models": list(records)}, indent=1, default=str) + "\n")
    (folder / "zoo.md").write_text(markdown(records, meta))
    return meta["summary"]
