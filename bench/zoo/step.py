"""The zoo's own measuring, a fleet step plug-in (``[defaults] plugins = ["bench.zoo.step"]``): ``zoo``.

The fleet's ``export`` step writes portable's ``--batch dynamic`` file and its ``validate`` step judges it on
every target. This step adds what only the zoo measures, in the same process-per-step harness: a bare
``torch.onnx.export`` (the baseline) and onnxsim on it; ``portable.export`` at ``--batch 1``; on each of
portable's files ``portable.validate``, op counts, onnxsim (what is left to remove), parity with each
output's RMS (:func:`bench.zoo.measure.parity`), ``portable.compare`` and, on the dynamic file, OpenVINO,
tract and the reference evaluator against PyTorch (:func:`bench.zoo.measure.runtimes`); for the entries
marked ``quantize``, ``portable.quantize`` of the dynamic file (:mod:`bench.zoo.quantized`).
Its record's ``data["record"]`` is what :mod:`bench.zoo.report` reads.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from bench.zoo import measure
from bench.zoo.registry import Built, Entry, entries
from bench.zoo.specs import built as _built
from portable.fleet import Step, StepContext, StepOutcome, register

__all__ = ["inspect_file", "portable_export", "zoo"]


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
    """What the zoo checks on portable's own file (the targets are the fleet's validate step's)."""
    import onnx

    import portable

    report = portable.validate(path)
    model = onnx.load(str(path))
    out: dict[str, Any] = {"validate_ok": report.ok, "validate_findings": [_finding(f) for f in report.findings],
                           **measure.count_ops(model), "size_mb": round(path.stat().st_size / 2**20, 2)}
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


def measure_entry(entry: Entry, dynamic: Path | None, folder: Path) -> dict[str, Any]:
    """Every zoo measurement of one entry beside the fleet's export (each one's failure recorded, not raised)."""
    record: dict[str, Any] = {"name": entry.name, "family": entry.family, "task": entry.task}
    start = time.perf_counter()
    built = _built(entry.name)
    record["build_s"] = _since(start)
    record["inputs"] = {n: [list(a.shape), str(a.dtype)] if hasattr(a, "shape") else type(a).__name__
                        for n, a in zip(built.names, built.args)}
    bare = folder / "bare.onnx"
    record["bare"] = measure.bare_export(built.module, built.args, bare)
    record["bare_onnxsim"] = measure.simplified(bare) if record["bare"]["ok"] else None
    record["dynamic_file"] = inspect_file(built, dynamic, (1, 3)) if dynamic is not None else None
    static = folder / "static.onnx"
    record["static"] = portable_export(built, static, 1)
    if record["static"]["ok"]:
        record["static"]["file"] = inspect_file(built, static, (1,))
    if entry.quantize and dynamic is not None:
        from bench.zoo.quantized import quantized

        record["quantized"] = _guard(lambda: quantized(dynamic, folder))
    record["total_s"] = _since(start)
    return record


def _since(start: float) -> float:
    return round(time.perf_counter() - start, 3)


def zoo(ctx: StepContext) -> StepOutcome:
    """The zoo's measuring of the fleet model ``ctx.name`` (a registry entry), on the export's file if any."""
    (entry,) = entries(ctx.name)
    dynamic = Path(ctx.artefact) if ctx.artefact else None
    return StepOutcome("pass", "", {"record": measure_entry(entry, dynamic, Path(ctx.scratch))})


register(Step("zoo", zoo, "the zoo's own measuring (bench/zoo/step.py)", needs_file=False))
