"""``docs/zoo.md`` and ``docs/zoo.json`` from the zoo fleet's results (``make zoo``).

    python -m bench.zoo.report out/zoo/fleet

Each model's record is put together from its fleet records: the ``export`` step (portable's ``--batch dynamic``
file), the ``validate`` step (every target's offline verdict) and the ``zoo`` step (:mod:`bench.zoo.step`).
The per-target table is ``portable fleet report``'s own (:func:`portable.fleet.render.target_table`).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.zoo.measure import DEGENERATE_RMS, degenerate
from bench.zoo.registry import PORTABLE, TARGETS, Entry, entries
from portable.fleet.records import StepRecord
from portable.fleet.store import Store
from portable.validators.targets import TARGETS as TARGET_NAMES  # the one registry, in its order
from portable.validators.targets import load_profile

__all__ = ["outcome", "passes", "summary", "write"]

PHASES = ("torch.export", "translate", "optimize", "validate", "verify", "write")
PACKAGES = ("torch", "torchvision", "transformers", "timm", "onnx", "onnxruntime", "onnxscript", "onnx-ir", "onnxsim")


def outcome(rec: dict[str, Any], key: str = "dynamic") -> str:
    """``portable``, ``portable, degenerate output``, ``refused: PORTnnn``, ``internal error``, ``crashed``..."""
    if "crashed" in rec:
        return f"crashed: {rec['crashed']}"
    run = rec[key]
    if not run["ok"]:
        if run["kind"] == "crashed":
            return f"crashed: {run['message']}"
        if run["kind"] != "refused":
            return "internal error"
        if run.get("parity") and not run["parity"]["ok"]:  # the findings are only infos then
            return "refused: parity"
        return f"refused: {', '.join(sorted({f['rule'] for f in run.get('findings', [])}))}"
    file = run["file"]
    if not file["validate_ok"]:
        return "validate: findings"
    if "error" in file["parity"] or "error" in file["compare"]:
        return "parity could not run"
    if _degenerate(file["parity"]):
        return "portable, degenerate output"
    return PORTABLE if file["compare"]["passed"] else "compare failed"


def _degenerate(parity: dict[str, Any]) -> list[dict[str, Any]]:
    """The outputs too small for the parity check to mean anything (recomputed: the records keep the RMS)."""
    return [o for o in parity.get("outputs", []) if degenerate(o["rms"])]


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
    degenerate = [r["name"] for r in static if outcome(r) == "portable, degenerate output"]
    refusals = [r for r in records if r["expected"] != PORTABLE]
    right = [r for r in refusals if as_expected(r)]
    return (f"{len(ok)} of {len(static)} static-apart-from-batch architectures export with --batch dynamic, validate "
            f"and pass verify and compare ({share:.0%}; target >= 90 %: {'met' if share >= 0.9 else 'NOT met'}); "
            f"{len(degenerate)} more export and match but an output is degenerate, which proves nothing"
            f"{' (' + ', '.join(degenerate) + ')' if degenerate else ''}; "
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
    flag = " **degenerate**" if _degenerate(p) else ""
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
            lines.extend(_unproven(run["file"], label))
            continue
        lines.append(f"- `{label}`: {run['message'][:400]}")
        for f in run.get("findings", [])[:3]:
            lines.append(f"  - **{f['rule']}** node `{f['node']}` ({f['op_type']}), source `{f['source']}`; hint: {f['hint']}")
    bare = rec.get("bare") or {}
    lines.append(f"- bare torch.onnx.export (dynamic batch): {'ok' if bare.get('ok') else bare.get('error')}")
    if rec.get("note"):
        lines.append(f"- note: {rec['note']}")
    return [*lines, ""]


def _unproven(file: dict[str, Any], label: str) -> list[str]:
    """What made an exported file short of a pass: findings, degenerate outputs, a failed compare."""
    lines = [f"- `{label}`: validate: {f['rule']} {f['message'][:200]}" for f in file["validate_findings"]
             if f["severity"] == "error"]
    parity, cmp = file["parity"], file["compare"]
    lines += [f"- `{label}`: output {o['output']} at batch {o['batch']} has RMS {o['rms']:.1e} < {DEGENERATE_RMS:g} "
              "(degenerate: random init)" for o in _degenerate(parity)]
    if "error" in parity or "error" in cmp:
        lines.append(f"- `{label}`: parity could not run: {parity.get('error') or cmp.get('error')}")
    elif not cmp["passed"]:
        lines.append(f"- `{label}`: compare failed: {'; '.join(cmp['failures'])[:300]}")
    return lines


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


ABOUT = """\
Real architectures from the libraries' own model code (torchvision, timm, transformers), random
weights (seed 0; every parameter a library initialises to exact zeros is redrawn and BatchNorm's
statistics are set from the example, `bench/zoo/weights.py`, so that outputs are not degenerate and
graphs carry no `x + 0` a trained model would not have), small configs where the default is large,
each a SPEC (`bench/zoo/specs.py`, its inputs named as the registry names them). The zoo is a fleet
(`bench/zoo/zoo.toml`, docs/fleet.md): per model, each step in a process of its own (time limit 900 s),
its record kept in `out/zoo/fleet`: `export` (`portable export SPEC --batch dynamic`, validated and
verified), `validate` (every target's offline verdict, below) and `zoo`, the zoo's own measuring
(`bench/zoo/step.py`): a bare `torch.onnx.export(dynamo=True, opset_version=18)` with a dynamic batch
(the baseline) and onnxsim 0.8.1 on it; `portable.export` with `--batch 1`; on portable's files
`portable.validate`, onnxsim (the count it still removes: should be 0; negative where onnxsim gives more
nodes than it was given), `Identity` count, ORT-vs-eager parity on inputs drawn
per input from the example's own range (ids in the vocabulary, an all-ones mask stays all ones),
and `portable.compare --device cpu` (eager only, no latency) at batch 1 and 3 with its default
inputs. An output whose RMS is below 1e-4 (fp32's absolute tolerance) is **degenerate**: any
runtime's result would pass parity on it, so it does not count as a pass. Outcome columns:
`portable` (exported, validate clean, verify and compare pass, no degenerate output), `refused:
RULE` (the export refused, nothing written), `internal error` (any other failure of the export: exit 2
or 3), `crashed` (the export's or the zoo step's process died, timed out or went over its memory cap).

    make zoo-venv                    # torchvision --no-deps, then the zoo extra; torch stays 2.13.0+cpu
    make zoo                         # every model not done yet (a rerun does only what changed); JOBS=2: two at once
    make zoo ONLY=hf_bert,hf_gpt2    # those models; this page is rebuilt from every record in out/zoo/fleet
"""


TARGETS_ABOUT = """\
Offline, from each target's own support table (`portable validate --target all` on portable's
`--batch dynamic` file; `docs/targets.md`). A cell is the nodes the target's partitions would take
over all nodes, then the partitions (`p`) and the ops that fall back; `loads` / `no: OP xN` for the
runtimes without a fallback ({stops}: an unsupported node stops the load). NNAPI and CoreML need fixed
sizes (ORT's usability checker): their cell is the estimate with the batch fixed, the file as it is
(dynamic batch) runs nothing there.
"""


def _targets_about() -> str:
    """The table's legend; the runtimes without a fallback are those whose profile states none."""
    stops = ", ".join(f"`{name}`" for name in TARGET_NAMES if load_profile(name).fallback is None)
    return TARGETS_ABOUT.format(stops=stops)


def _targets_of(rec: dict[str, Any]) -> dict[str, Any] | None:
    file = rec.get("dynamic", {}).get("file") if isinstance(rec.get("dynamic"), dict) else None
    found = file.get("targets") if file else None
    return found if found and "error" not in found else None


LIVE_NAMES = ("openvino", "tract", "reference")
LIVE_ABOUT = """\
Live, on the runtimes installed here (`portable compare FILE --runtime openvino,tract,reference --reference
SPEC`, runners/runtimes.py): portable's `--batch dynamic` file against eager PyTorch on the same seeded
inputs at batch 1 and 3. `ok` means it loads and every output of both batches is within the runtime's
tolerance (max abs shown); `timed out`: the reference evaluator did not finish a batch within its cap
(60 s); `not installed`: `make targets-venv` was not run. A live failure is `predicted` when the
offline profile of that runtime (the table above) said the file does not load; the reference
evaluator has no profile, so its failures are listed with its message.
"""


def _runtimes_of(rec: dict[str, Any]) -> dict[str, Any] | None:
    file = rec.get("dynamic", {}).get("file") if isinstance(rec.get("dynamic"), dict) else None
    found = file.get("runtimes") if file else None
    return found if found and "reference" in found else None


def live_failure(rec: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The live failure of ``name`` on this model (load, run or parity) with ``predicted``, else None."""
    live = (_runtimes_of(rec) or {}).get(name)
    if not live or live["status"] not in ("does not load", "fails to run", "fail"):
        return None
    offline = (_targets_of(rec) or {}).get(name)
    predicted = bool(offline) and live["status"] != "fail" and not offline.get("loads", True)
    return {"model": rec["name"], "runtime": name, "status": live["status"], "predicted": predicted,
            "error": live.get("error") or ""}


def _live_cell(live: dict[str, Any] | None, failure: dict[str, Any] | None) -> str:
    if not live:
        return "–"
    if failure:
        return f"**{live['status']}**" + (" (predicted)" if failure["predicted"] else " (**not predicted**)")
    if live["status"] == "pass":
        return "ok" + ("" if live["max_abs"] is None else f" ({live['max_abs']:.1e})")
    return live["status"]


def live_table(records: Sequence[dict[str, Any]]) -> list[str]:
    """Per model and runtime: the live verdict; per runtime how many loaded and matched; the failures."""
    rows = [(r, _runtimes_of(r)) for r in records]
    rows = [(r, live) for r, live in rows if live]
    if not rows:
        return ["No live runtime data in the records (run `make targets-venv`, then `make zoo`)."]
    head = "| model | " + " | ".join(LIVE_NAMES) + " | s |\n|" + "---|" * (len(LIVE_NAMES) + 2)
    body = [f"| {r['name']} | " + " | ".join(_live_cell(live.get(n), live_failure(r, n)) for n in LIVE_NAMES)
            + f" | {live.get('seconds', 0):.0f} |" for r, live in rows]
    counts = []
    for n in LIVE_NAMES:
        skipped = (None, "not installed", "timed out", "not measured")
        ran = [live[n] for _, live in rows if live.get(n, {}).get("status") not in skipped]
        counts.append(f"{sum(x['status'] == 'pass' for x in ran)}/{len(ran)}")
    total = "| **loads and matches** (of those that finished) | " + " | ".join(counts) + " | |"
    failures = [f for r, _ in rows for n in LIVE_NAMES if (f := live_failure(r, n))]
    listed = [f"- {f['model']} on {f['runtime']}: {f['status']}, {'predicted by' if f['predicted'] else 'NOT predicted by'}"
              f" the offline profile: {f['error'][:240]}" for f in failures]
    unpredicted = sum(not f["predicted"] for f in failures)
    unmeasured = [f"- {r['name']}: not measured: {live['error'][:240]}" for r, live in rows if live.get("error")]
    return [LIVE_ABOUT, head, *body, total, "", f"Live failures: {len(failures)}, not predicted offline: {unpredicted}.",
            "", *listed, *unmeasured]


QUANTIZED_ABOUT = """\
`portable quantize` on the dynamic-batch file of the CNNs and encoders (issue 24), with the
defaults (target cpu: uint8 activations, int8 weights per-tensor, minmax), seeded calibration
(32 samples: random data, as the weights are random, not a real distribution) and 128 held-out
samples; the latency is ONNX Runtime CPU at batch 8, float and int8 side by side in one run
(round-robin, spinning off, 2 cores, shared machine: read the ratio). OpenVINO: its CPU plugin
compiles and runs the int8 file (when openvino is installed): its outputs against ONNX Runtime's on
the same int8 file (least SQNR over the outputs, max abs; two int8 runtimes round apart).
"""
QUANTIZED_HEADER = ("| model | validates | min SQNR | top-1 agreement | int8/float p50 (batch 8) | Q / DQ nodes | "
                    "worst node (own Q/DQ SQNR) | OpenVINO CPU | quantize s |\n|" + "---|" * 9)


def _openvino(ov: dict[str, Any]) -> str:
    if not ov.get("installed"):
        return "not installed"
    if not ov.get("loads"):
        return f"**fails**: {ov.get('error', '')[:80]}"
    vs = f"{ov['sqnr_vs_onnxruntime_db']:.0f} dB, " if "sqnr_vs_onnxruntime_db" in ov else ""
    return f"loads, runs ({ov['version'].split('-')[0]}; vs ORT int8: {vs}max abs {ov['max_abs_vs_onnxruntime']:.1e})"


def _quantized_row(rec: dict[str, Any]) -> str:
    q = rec["quantized"]
    if "error" in q or not q.get("ok"):
        return f"| {rec['name']} | **failed**: {(q.get('error') or q.get('message', ''))[:160]} |" + " |" * 7
    top1 = "–" if q["top1_agreement"] is None else f"{100 * q['top1_agreement']:.1f} %"
    worst = q.get("worst_node") or {}
    node = f"{worst.get('node') or worst.get('tensor', '–')} ({worst.get('qdq_sqnr_db', 0):.1f} dB)" if worst else "–"
    return (f"| {rec['name']} | {'yes' if q['validate_ok'] else '**no**'} | {q['min_sqnr_db']:.1f} dB | {top1} "
            f"| {q['latency_ratio_p50']:.2f} ({q['float_p50_ms']:.1f} -> {q['int8_p50_ms']:.1f} ms) "
            f"| {q['ops']['QuantizeLinear']} / {q['ops']['DequantizeLinear']} | {node} | {_openvino(q['openvino'])} "
            f"| {q['seconds']:.0f} |")


def _quantized(records: Sequence[dict[str, Any]]) -> list[str]:
    rows = [_quantized_row(r) for r in records if "quantized" in r]
    return ["## Quantized to int8 (`portable quantize`)", "", QUANTIZED_ABOUT, QUANTIZED_HEADER, *rows, ""] if rows else []


def markdown(records: Sequence[dict[str, Any]], meta: dict[str, Any], targets: Sequence[str]) -> str:
    env = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    lines = ["# The model zoo", "", "Generated by `make zoo` (`bench/zoo/`); do not edit by hand. " + env + ".", "",
             ABOUT, f"**{summary(records)}**", "",
             f"Run: {meta['generated']}, the zoo steps' times add up to {meta['total_s']:.0f} s.", "",
             HEADER, *(_row(r) for r in records), "",
             "## Targets (offline)", "", _targets_about(), *targets, "",
             "## Runtimes (live)", "", *live_table(records), "", *_quantized(records),
             "## Not portable, and why", ""]
    for rec in _failing(records):
        lines.extend(_refusal(rec))
    return "\n".join(lines).rstrip() + "\n"


def write(records: Sequence[dict[str, Any]], folder: Path, targets: Sequence[str] = ()) -> str:
    """Write ``zoo.md`` and ``zoo.json`` into ``folder``; the summary line."""
    meta = {"generated": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "versions": _versions(),
            "summary": summary(records), "total_s": round(sum(r.get("total_s", 0) for r in records), 1)}
    (folder / "zoo.json").write_text(json.dumps(meta | {"models": list(records)}, indent=1, default=str) + "\n")
    (folder / "zoo.md").write_text(markdown(records, meta, targets))
    return meta["summary"]


def _dynamic(export: StepRecord | None, measured: dict[str, Any]) -> dict[str, Any]:
    """The ``--batch dynamic`` export as the tables read it: the fleet's export record, the zoo's file figures."""
    if export is None:
        return {"ok": False, "kind": "internal", "message": "no export record", "findings": []}
    data = export.data
    if export.status != "pass":
        parity = {"ok": data["parity_ok"]} if data.get("parity_ok") is not None else None
        kind = {"failed": "refused", "timeout": "crashed", "memory": "crashed", "killed": "crashed"}.get(export.status, "internal")
        return {"ok": False, "kind": kind, "message": export.reason, "findings": data.get("findings") or [], "parity": parity}
    return {"ok": True, "seconds": export.seconds, "timings": data.get("timings") or {}, "file": measured.get("dynamic_file") or {}}


def record_of(entry: Entry, steps: dict[str, StepRecord]) -> dict[str, Any] | None:
    """One model's zoo record from its fleet records (None when the zoo step never ran on it)."""
    zoo = steps.get("zoo")
    if zoo is None:
        return None
    base = {"name": entry.name, "family": entry.family, "task": entry.task, "expected": entry.expected, "note": entry.note}
    if zoo.status != "pass":
        return base | {"crashed": f"{zoo.status}: {zoo.reason}", "log_tail": zoo.data.get("log", ""), "total_s": zoo.seconds}
    measured = dict(zoo.data["record"])
    record = base | measured | {"dynamic": _dynamic(steps.get("export"), measured)}
    validate = steps.get("validate")
    if record["dynamic"]["ok"] and validate is not None:
        record["dynamic"]["file"]["targets"] = validate.data.get("targets") or {}
    return record


def records_from(results: Path) -> list[dict[str, Any]]:
    """The zoo records of the fleet results at ``results``, in registry order."""
    by_model: dict[str, dict[str, StepRecord]] = {}
    for record in Store(results).records():
        by_model.setdefault(record.model, {})[record.step] = record
    built = [record_of(e, by_model.get(e.name, {})) for e in entries()]
    return [r for r in built if r is not None]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.zoo.report RESULTS``: docs/zoo.md and docs/zoo.json from the zoo fleet's results."""
    import sys

    from portable.fleet.render import target_table
    from portable.fleet.report import load_report

    results = Path((argv or sys.argv[1:] or ["out/zoo/fleet"])[0])
    root = Path(__file__).resolve().parents[2]
    records = records_from(results)
    if not records:  # an interrupted first run: the published tables stay as they are
        print(f"no zoo records in {results}: docs/zoo.md left as it is", file=sys.stderr)
        return 1
    print(write(records, root / "docs", target_table(load_report(results))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
