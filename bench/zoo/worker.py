"""One zoo model, in its own process: ``python -m bench.zoo.worker NAME OUT.json``.

Builds the entry, exports it bare (torch.onnx, the baseline) and with ``portable.export`` at
``--batch dynamic`` and ``--batch 1`` (each validated and verified by the export itself), then,
on portable's file: ``portable.validate``, op counts, onnxsim on it (what is left to remove),
parity with each output's RMS (:func:`bench.zoo.measure.parity`), ``portable.compare`` and, on the dynamic file,
OpenVINO, tract and the reference evaluator against PyTorch (:func:`bench.zoo.measure.runtimes`); for the
entries marked ``quantize``, ``portable.quantize`` of the dynamic file (:mod:`bench.zoo.quantized`).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench.zoo import measure
from bench.zoo.registry import Built, Entry, entries
from bench.zoo.weights import live_weights

__all__ = ["main", "run_entry", "run_live", "run_targets"]


def _finding(f: Any) -> dict[str, Any]:
    d = f.to_dict()
    loc, source = d["location"], d["location"].get("source")
    return {"rule": d["rule"], "severity": d["severity"], "message": d["message"], "hint": d["hint"],
            "node": loc.get("node"), "op_type": loc.get("op_type"), "value": loc.get("value"),
            "source": f"{source['file']}:{source['line']}" if source else None}


def portable_export(built: Built, path: Path, batch: str | int, verify: bool = True) -> dict[str, Any]:
    """``portable.export`` (with verify unless told): ok, timings, parity, or the refusal's findings."""
    import portable

    start = time.perf_counter()
    try:
        result = portable.export(built.module, built.args, path, batch=batch, input_names=built.names, force=True,
                                 verify=verify)
    except portable.ExportFailed as exc:
        errors = [_finding(f) for f in exc.report.failing()] or [_finding(f) for f in exc.report.findings]
        return {"ok": False, "seconds": _since(start), "kind": "refused", "message": str(exc), "findings": errors,
                "parity": exc.parity.to_dict() if exc.parity else None}
    except Exception as exc:  # noqa: BLE001 - what the CLI would call an internal error (exit 3)
        return {"ok": False, "seconds": _since(start), "kind": "internal", "message": measure._line(exc),
                "traceback": traceback.format_exc()[-3000:]}
    parity = result.parity.to_dict() if result.parity else None
    return {"ok": True, "seconds": _since(start), "timings": result.timings, "parity": parity,
            "info": [_finding(f) for f in result.report.findings]}


def inspect_file(built: Built, path: Path, batches: tuple[int, ...]) -> dict[str, Any]:
    """What the zoo checks on portable's own file."""
    import onnx

    import portable

    report = portable.validate(path)
    model = onnx.load(str(path))
    out: dict[str, Any] = {"validate_ok": report.ok, "validate_findings": [_finding(f) for f in report.findings],
                           **measure.count_ops(model), "size_mb": round(path.stat().st_size / 2**20, 2)}
    out["targets"] = _guard(lambda: measure.targets(path))
    out["onnxsim"] = measure.simplified(path)
    out["parity"] = _guard(lambda: measure.parity(built.module, built.args, path, batches))
    out["compare"] = _guard(lambda: _compare(built, path, batches))
    if len(batches) > 1:  # the dynamic file only: the runtimes at batch 1 and 3 (issue 21)
        out["runtimes"] = _guard(lambda: measure.runtimes(built.module, built.args, path, batches))
    return out


def _compare(built: Built, path: Path, batches: tuple[int, ...]) -> dict[str, Any]:
    import portable

    report = portable.compare(path, built.module, example_inputs=list(built.args), device="cpu", compile_mode=None,
                              timing=None, batches=list(batches))
    worst = max((o.stats.max_abs for p in report.parity for o in p.outputs), default=0.0)
    return {"passed": report.passed, "max_abs": float(worst), "failures": list(report.failures)}


def _guard(fn: Any) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one failed measurement is a figure, not the end of the model
        return {"error": measure._line(exc)}


def run_entry(entry: Entry, folder: Path) -> dict[str, Any]:
    """Every measurement of one entry (each one's failure recorded, not raised)."""
    record: dict[str, Any] = {"name": entry.name, "family": entry.family, "task": entry.task,
                              "expected": entry.expected, "note": entry.note}
    start = time.perf_counter()
    built = _built(entry)
    record["build_s"] = _since(start)
    record["inputs"] = {n: [list(a.shape), str(a.dtype)] if hasattr(a, "shape") else type(a).__name__
                        for n, a in zip(built.names, built.args)}
    bare = folder / "bare.onnx"
    record["bare"] = measure.bare_export(built.module, built.args, bare)
    record["bare_onnxsim"] = measure.simplified(bare) if record["bare"]["ok"] else None
    for key, batch in (("dynamic", "dynamic"), ("static", 1)):
        path = folder / f"{key}.onnx"
        record[key] = portable_export(built, path, batch)
        if record[key]["ok"]:
            record[key]["file"] = inspect_file(built, path, (1, 3) if batch == "dynamic" else (1,))
    if entry.quantize and record["dynamic"]["ok"]:
        from bench.zoo.quantized import quantized

        record["quantized"] = _guard(lambda: quantized(folder / "dynamic.onnx", folder))
    record["total_s"] = _since(start)
    return record


def _built(entry: Entry) -> Built:
    built = entry.build()
    return Built(live_weights(built.module, built.args, calibrate=entry.task != "detection"), built.args, built.names)


def run_live(entry: Entry, folder: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Only the live runtimes of the dynamic file, into a cached ``record`` (``run --live-only``):
    the same seeded build and export as :func:`run_entry`, none of its other measurements."""
    built = _built(entry)
    path = folder / "dynamic.onnx"
    if not record.get("dynamic", {}).get("ok"):
        return record  # no portable file: no live cell, as in run_entry
    export = portable_export(built, path, "dynamic")
    file = record["dynamic"].setdefault("file", {})
    file["runtimes"] = (_guard(lambda: measure.runtimes(built.module, built.args, path, (1, 3))) if export["ok"]
                        else measure.no_runtimes(f"the re-export failed: {export.get('message', '')[:200]}"))
    return record


def run_targets(entry: Entry, folder: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Only the offline targets of the dynamic file, into a cached ``record`` (``run --targets-only``): the
    same seeded build and export as :func:`run_entry`, unverified (the record's verify stands), nothing else."""
    import onnx

    if not record.get("dynamic", {}).get("ok"):
        return record  # no portable file: no targets row, as in run_entry
    built = _built(entry)
    path = folder / "dynamic.onnx"
    export = portable_export(built, path, "dynamic", verify=False)
    file = record["dynamic"].setdefault("file", {})
    if not export["ok"]:
        file["targets"] = {"error": f"the re-export failed: {export.get('message', '')[:200]}"}
        return record
    nodes = measure.count_ops(onnx.load(str(path)))["nodes"]
    print(f"re-exported: {nodes} nodes (the record's file: {file.get('nodes')})", flush=True)
    file["targets"] = _guard(lambda: measure.targets(path))
    return record


def _since(start: float) -> float:
    return round(time.perf_counter() - start, 3)


def main(argv: list[str] | None = None) -> int:
    """``NAME OUT.json [--live-only | --targets-only]``: with either, OUT.json is the cached record to add to."""
    args = argv or sys.argv[1:]
    name, out = args[:2]
    (entry,) = entries(name)
    with tempfile.TemporaryDirectory(prefix=f"zoo-{name}-") as tmp:
        if "--live-only" in args:
            record = run_live(entry, Path(tmp), json.loads(Path(out).read_text()))
        elif "--targets-only" in args:
            record = run_targets(entry, Path(tmp), json.loads(Path(out).read_text()))
        else:
            record = run_entry(entry, Path(tmp))
    Path(out).write_text(json.dumps(record, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
