"""The quantize run, phase by phase: load (the input must honour the contract), samples, quantize,
validate, accuracy, nodes, latency, write. Everything that can be refused is refused before the
quantizer runs; nothing is written unless the result is portable and within its budgets.

The upper folders (exporters, validators, runners) are imported inside the functions that use
them: this package is on the ground floor (``portable/``), as the API and the CLI are.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from portable.errors import InputError, UsageError
from portable.quantization import artefact
from portable.quantization.accuracy import check_budgets, compare_outputs
from portable.quantization.api import Plan
from portable.quantization.data import (
    CALIBRATION_SEED_SALT,
    HELD_OUT_SEED_SALT,
    Samples,
    held_out_split,
    index_ranges,
    load_samples,
    seeded_samples,
)
from portable.quantization.quantizer import exclusions, quantize_file
from portable.quantization.result import QuantizeFailed, QuantizeResult, SampleSet

__all__ = ["PER_NODE_SAMPLES", "RANDOM_CALIBRATION_NOTE", "run"]

PER_NODE_SAMPLES = 8  # held-out samples the per-node analysis runs on: it holds every activation of both models
RANDOM_CALIBRATION_NOTE = ("calibrated on seeded random data, which is not your data's distribution: the ranges, "
                           "and so the accuracy figures, are those of random inputs; pass --calibration FILE.npz "
                           "with real samples")


def run(plan: Plan, *, quiet: bool, force: bool) -> QuantizeResult:
    from portable.exporters.progress import Phases
    from portable.exporters.quiet import quiet_torch
    from portable.exporters.writer import check_target

    check_target(plan.output, force)
    start = time.perf_counter()  # what can be refused is, before any progress line: an error is one line
    proto, specs = _portable_source(plan)
    calibration, held_out = _samples(plan, proto, specs)
    phases = Phases(quiet)
    phases.timings["load"] = round(time.perf_counter() - start, 4)
    with phases.phase("quantize"), quiet_torch():
        quantized = quantize_file(plan.source, plan.settings, calibration)
    with phases.phase("validate"):
        staged = artefact.stage(quantized, plan.output, plan.policy, _batch_stamp(proto))
    result = _result(plan, calibration, held_out, staged)
    with tempfile.TemporaryDirectory(prefix="portable-int8-") as tmp, quiet_torch():
        int8 = Path(tmp) / plan.output.name
        int8.write_bytes(staged.data)
        result = _measure(plan, result, int8, held_out, phases)
    return _finish(plan, result, staged, phases, force)


def _portable_source(plan: Plan) -> tuple[onnx.ModelProto, list[Any]]:
    """The input's graph (weights left in the file), once it is shown to honour the contract."""
    from portable.runners.inputs import io_of_proto
    from portable.validators import validate
    from portable.validators.lean import release
    from portable.validators.loading import load_model_file

    report = validate(plan.source, plan.policy)
    if report.error is not None:
        raise InputError(report.error, path=str(plan.source))
    failing = report.failing()
    if failing:
        first = failing[0]
        raise UsageError(f"not portable ({len(failing)} finding(s); first: {first.rule_id} {first.message}); "
                         "quantize takes a portable float model", path=str(plan.source),
                         hint=f"portable fix {plan.source} -o FIXED.onnx, then quantize FIXED.onnx")
    proto = load_model_file(plan.source).proto
    release(proto)
    if any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in proto.graph.node):
        raise UsageError("already quantized (it has QuantizeLinear/DequantizeLinear nodes)", path=str(plan.source))
    exclusions(proto, plan.settings.exclude)
    return proto, io_of_proto(proto)[0]


def _feed_batch(plan: Plan, specs: list[Any]) -> tuple[int, bool]:
    """Samples per run: the model's static batch, else the plan's."""
    static = {s.static_batch for s in specs}
    fixed = next(iter(static)) if len(static) == 1 and None not in static else None
    return (fixed, True) if fixed is not None else (plan.batch, False)


def _samples(plan: Plan, proto: onnx.ModelProto, specs: list[Any]) -> tuple[Samples, Samples]:
    batch, static = _feed_batch(plan, specs)
    if plan.calibration is not None:
        given = load_samples(plan.calibration, specs, batch, static)
        if plan.eval_data is not None:
            return given, load_samples(plan.eval_data, specs, batch, static)
        return held_out_split(given)
    ranges = {**index_ranges(proto), **plan.int_ranges}
    count = -(-plan.samples // batch) * batch if static else plan.samples
    held = -(-plan.eval_samples // batch) * batch if static else plan.eval_samples
    calibration = seeded_samples(specs, count, seed=plan.seed, salt=CALIBRATION_SEED_SALT, batch=batch,
                                 static=static, int_ranges=ranges)
    if plan.eval_data is not None:
        return calibration, load_samples(plan.eval_data, specs, batch, static)
    return calibration, seeded_samples(specs, held, seed=plan.seed, salt=HELD_OUT_SEED_SALT, batch=batch,
                                       static=static, int_ranges=ranges)


def _batch_stamp(proto: onnx.ModelProto) -> str | int:
    """The source's ``portable.batch`` stamp, else what its first input's dim 0 says."""
    stamped = next((p.value for p in proto.metadata_props if p.key == "portable.batch"), None)
    if stamped is not None:
        return int(stamped) if stamped.isdigit() else stamped
    dims = proto.graph.input[0].type.tensor_type.shape.dim if proto.graph.input else []
    return dims[0].dim_value if dims and dims[0].HasField("dim_value") else "dynamic"


def _result(plan: Plan, calibration: Samples, held_out: Samples, staged: artefact.Staged) -> QuantizeResult:
    seeded = plan.calibration is None
    ops = Counter(n.op_type for n in staged.proto.graph.node)
    return QuantizeResult(plan.source, plan.output, plan.settings,
                          SampleSet(calibration.source, calibration.count, seeded),
                          SampleSet(held_out.source, held_out.count, plan.eval_data is None and seeded),
                          plan.budgets, report=staged.report, fingerprint=staged.fingerprint,
                          ops={"QuantizeLinear": ops["QuantizeLinear"], "DequantizeLinear": ops["DequantizeLinear"],
                               "nodes": len(staged.proto.graph.node)},
                          notes=(RANDOM_CALIBRATION_NOTE,) if seeded else ())


def _measure(plan: Plan, result: QuantizeResult, int8: Path, held_out: Samples, phases: Any) -> QuantizeResult:
    """Accuracy (and budgets), the worst nodes, the latency: each on the held-out samples."""
    with phases.phase("accuracy"):
        accuracy = _accuracy(plan.source, int8, held_out)
        result = replace(result, accuracy=accuracy, checks=check_budgets(plan.budgets, accuracy))
    if plan.per_node:
        from portable.quantization.nodes import worst_nodes

        with phases.phase("nodes"):
            result = replace(result, worst_nodes=worst_nodes(plan.source, int8, _first(held_out, PER_NODE_SAMPLES)))
    if plan.latency:
        from portable.quantization.speed import compare_latency

        with phases.phase("latency"):
            result = replace(result, latency=compare_latency(plan.source, int8, _latency_feeds(held_out),
                                                             plan.timing))
    return result


def _first(samples: Samples, count: int) -> Samples:
    """The first ``count`` samples (whole batches of a static-batch model)."""
    stop = max(samples.batch, count - count % samples.batch) if samples.static else count
    return samples.take(0, min(stop, samples.count))


def _latency_feeds(held_out: Samples) -> dict[str, np.ndarray]:
    """One batch of held-out samples at the feed batch (repeated when fewer were held out)."""
    reps = -(-held_out.batch // held_out.count)
    return {k: np.concatenate([v] * reps)[:held_out.batch] for k, v in held_out.arrays.items()}


def _accuracy(source: Path, int8: Path, held_out: Samples) -> tuple[Any, ...]:
    from portable.quantization.speed import cpu_session

    float_session, int8_session = cpu_session(source), cpu_session(int8)
    names = [o.name for o in float_session.get_outputs()]
    expected: list[list[np.ndarray]] = [[] for _ in names]
    actual: list[list[np.ndarray]] = [[] for _ in names]
    for feeds in held_out.batches():
        for store, session in ((expected, float_session), (actual, int8_session)):
            for i, value in enumerate(session.run(None, feeds)):
                store[i].append(np.asarray(value))
    return compare_outputs(names, [np.concatenate(e) for e in expected], [np.concatenate(a) for a in actual])


def _finish(plan: Plan, result: QuantizeResult, staged: artefact.Staged, phases: Any, force: bool) -> QuantizeResult:
    """Refuse a result that fails the contract or a budget (nothing written), else write it."""
    result = replace(result, timings=dict(phases.timings))
    if result.findings:
        first = result.findings[0]
        raise QuantizeFailed(f"the quantized model fails the contract ({len(result.findings)} finding(s); first: "
                             f"{first.rule_id} {first.message}); nothing written", result)
    if not result.budgets_ok:
        failed = [c for c in result.checks if not c.passed]
        raise QuantizeFailed(f"{len(failed)} accuracy budget(s) exceeded (first: {failed[0].budget} on "
                             f"{failed[0].output}: {failed[0].measured:.4g} vs {failed[0].limit:g}); nothing written",
                             result)
    with phases.phase("write"):
        manifest = _manifest(plan, result, staged)
        artefact.write(staged, plan.output, manifest, force)
    return replace(result, written=True, timings=dict(phases.timings))


def _manifest(plan: Plan, result: QuantizeResult, staged: artefact.Staged) -> dict[str, Any]:
    from portable.exporters.manifest import build_manifest

    manifest = build_manifest(staged.proto, file=plan.output.name, fingerprint=staged.fingerprint,
                              size=len(staged.data), precision=artefact.PRECISION,
                              batch=_batch_stamp(staged.proto), policy=plan.policy, report=staged.report.to_dict(),
                              parity=None, timings=dict(result.timings), spec=None)
    manifest["quantization"] = {"source": str(plan.source), "source_fingerprint": _fingerprint_of(plan.source),
                                **result.measurements()}
    return manifest


def _fingerprint_of(path: Path) -> str | None:
    from portable.validators.lean import release
    from portable.validators.loading import load_model_file

    proto = load_model_file(path).proto
    try:
        return next((p.value for p in proto.metadata_props if p.key == "portable.fingerprint"), None)
    finally:
        release(proto)
