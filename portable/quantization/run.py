"""The quantize run, phase by phase: load (the input must honour the contract), samples, quantize,
validate, accuracy, nodes, latency, write. Everything that can be refused is refused before the
quantizer runs. The quantized model goes through the shared artefact step
(:mod:`portable.exporters.artefact`): stamped, validated and fingerprinted as the file it will be,
staged beside its target; every measurement reads that staged file, so the figures are the
written file's; it is renamed onto the target, with its manifest, only when it honours the
contract and its budgets, and otherwise removed.

The upper folders (exporters, validators, runners) are imported inside the functions that use
them: this package is on the ground floor (``portable/``), as the API and the CLI are.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from portable.errors import InputError, UsageError
from portable.io import terminate_as_interrupt
from portable.progress import Phases
from portable.quantization.accuracy import OutputAccuracy, check_budgets, compare_outputs
from portable.quantization.data import (
    CALIBRATION_SEED_SALT,
    HELD_OUT_SEED_SALT,
    Samples,
    held_out_split,
    index_ranges,
    load_samples,
    seeded_samples,
)
from portable.quantization.judging import OutputKind, output_kinds, recorded_task
from portable.quantization.pipeline import quantize_file
from portable.quantization.plan import Plan
from portable.quantization.quantizer import exclusions
from portable.quantization.result import QuantizeFailed, QuantizeResult, SampleSet
from portable.quantization.search import SearchResult
from portable.quantization.settings import DEFAULT_GOAL
from portable.quantization.steps import ShapeInference, shape_inference
from portable.quiet import quiet_libraries

if TYPE_CHECKING:
    from portable.exporters.artefact import Staged, StagedFolder
    from portable.hf.assets import Recorded

__all__ = ["ENTROPY_NOTE", "PER_NODE_SAMPLES", "PRECISION", "RANDOM_CALIBRATION_NOTE", "run"]

PRECISION = "int8-qdq"  # the manifest's and metadata's ``portable.precision`` of a quantized file
PER_NODE_SAMPLES = 8  # held-out samples the per-node analysis runs on: it holds every activation of both models
# Measured on onnxruntime 1.32: quantize_static hands its entropy calibrator no bin counts (its extra_options
# pass only symmetric/moving-average/percentile keys), so it keeps 128 bins for 128 quantized bins, which
# leaves one candidate threshold, the whole range: every scale equals minmax's (61 of 61 on EfficientNet-Lite0).
ENTROPY_NOTE = ("--method entropy: ONNX Runtime's quantize_static runs its entropy calibrator with 128 histogram "
                "bins for 128 quantized bins, one candidate threshold, so its ranges are minmax's; "
                "--method percentile clips outliers")
RANDOM_CALIBRATION_NOTE = ("calibrated on seeded random data, which is not your data's distribution: the ranges, "
                           "and so the accuracy figures, are those of random inputs; pass --calibration FILE.npz "
                           "with real samples")


def run(plan: Plan, *, quiet: bool, force: bool) -> QuantizeResult:
    from portable.exporters.writer import check_target

    check_target(plan.output, force)
    travelling = _travelling(plan, force)
    start = time.perf_counter()  # what can be refused is, before any progress line: an error is one line
    proto, specs = _portable_source(plan)
    calibration, held_out = _samples(plan, proto, specs)
    phases = Phases(quiet)
    phases.timings["load"] = round(time.perf_counter() - start, 4)
    with phases.phase("shapes"), quiet_libraries():  # ONNX Runtime's shape inference, before any long work
        plan, shapes = _shape_inference(plan)
    with phases.phase("float outputs"):  # once: the search's trials and the file are measured against them
        reference = _reference(plan, proto, held_out)
    plan = _with_logits(plan, reference)
    plan, searched = _searched(plan, calibration, held_out, reference, phases)
    if searched is not None and searched.quantized is not None:  # the search's own trial is the file
        quantized = searched.quantized
    else:
        with phases.phase("quantize"), quiet_libraries():
            quantized = quantize_file(plan.source, plan.settings, calibration)
    with terminate_as_interrupt(), contextlib.ExitStack() as stages:
        with phases.phase("validate"):
            staged = _stage(stages, quantized.proto, plan, _batch_stamp(proto), force)
            folders = _stage_preprocessing(stages, travelling, plan, force)
        result = replace(_result(plan, calibration, held_out, staged, quantized.proto), passes=quantized.passes,
                         search=searched)
        result = replace(result, notes=result.notes + ((shapes.note,) if shapes.note else ()))
        with _workdir(plan.source, staged.readable(), quantized.reference) as (float_model, int8_model, reference_model), \
                quiet_libraries():
            result = _measure(plan, result, (float_model, reference_model), int8_model, (held_out, reference), phases)
        _judge(replace(result, timings=dict(phases.timings)))
        return _write(staged, folders, plan, result, phases)


def _with_logits(plan: Plan, reference: Reference) -> Plan:
    """The plan whose settings name the outputs judged as logits: their activation range keeps headroom
    (:data:`portable.quantization.ranges.LOGITS_HEADROOM`, ``--no-logits-headroom`` turns it off)."""
    logits = tuple(name for name in reference.names if reference.kinds[name].kind == "logits")
    return replace(plan, settings=replace(plan.settings, logits=logits))


def _searched(plan: Plan, calibration: Samples, held_out: Samples, reference: Reference,
              phases: Phases) -> tuple[Plan, SearchResult | None]:
    """The plan with the nodes the precision search keeps in float: toward the user's budgets, or, with none
    given and real calibration data, toward the default goal (``DEFAULT_GOAL``; the floor judges the result).
    Seeded calibration gets no search: its figures are random inputs', not the user's."""
    if plan.search_limit < 1 or not (plan.budgets.given or plan.calibration is not None):
        return plan, None
    from portable.quantization.search import search

    goal = plan.budgets if plan.budgets.given else DEFAULT_GOAL
    with phases.phase("search"), quiet_libraries():
        found = search(plan.source, plan.settings, goal, calibration, held_out,
                       (_first(calibration, PER_NODE_SAMPLES), _first(held_out, PER_NODE_SAMPLES)),
                       lambda int8: _accuracy(reference, int8, held_out), plan.search_limit, phases.note)
    return replace(plan, settings=found.settings), found


def _shape_inference(plan: Plan) -> tuple[Plan, ShapeInference]:
    """The plan with the shape inference ``quant_pre_process`` will run (symbolic, or ONNX's where it fails)."""
    found = shape_inference(plan.source)
    return replace(plan, settings=replace(plan.settings, symbolic_shape=found.symbolic)), found


def _stage(stages: contextlib.ExitStack, quantized: onnx.ModelProto, plan: Plan, batch: str | int,
           force: bool) -> Staged:
    """The quantized model through the artefact step (its temporary file removed when ``stages`` closes)."""
    import onnx_ir as ir

    from portable.exporters.artefact import stage
    from portable.exporters.manifest import stamp

    with quiet_libraries():
        return stages.enter_context(stage(ir.from_proto(quantized), plan.output, plan.policy,
                                          lambda proto: stamp(proto, plan.policy, PRECISION, batch), force=force,
                                          what="the quantized model"))


@contextlib.contextmanager
def _workdir(source: Path, staged: Path, reference: onnx.ModelProto | None) -> Iterator[tuple[Path, Path, Path]]:
    """Both models under names in a folder of our own (symbolic links, nothing copied): ONNX Runtime's
    quantization tools write helper files beside the models they read (``NAME-inferred.onnx``), which
    must land neither beside the user's model nor in the output folder. The third is the float model as the
    quantizer read it (``Quantized.reference``; the source itself when no pass changed its tensors)."""
    with tempfile.TemporaryDirectory(prefix="portable-quantize-") as tmp:
        float_model, int8_model = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        float_model.symlink_to(source.resolve())
        int8_model.symlink_to(staged.resolve())
        yield float_model, int8_model, _saved(reference, Path(tmp) / "reference.onnx") or float_model


def _saved(proto: onnx.ModelProto | None, path: Path) -> Path | None:
    if proto is None:
        return None
    onnx.save(proto, str(path))
    return path


def _portable_source(plan: Plan) -> tuple[onnx.ModelProto, list[Any]]:
    """The input's graph (weights left in the file), once it is shown to honour the contract."""
    from portable.runners.inputs import io_of_proto
    from portable.validators import validate
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
    loaded = load_model_file(plan.source)
    loaded.close()  # the graph is read below, not the weights
    proto = loaded.proto
    if any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in proto.graph.node):
        raise UsageError("already quantized (it has QuantizeLinear/DequantizeLinear nodes)", path=str(plan.source))
    exclusions(proto, plan.settings.exclude)
    unknown = sorted(set(plan.judge) - {o.name for o in proto.graph.output})
    if unknown:
        raise UsageError(f"--judge {', '.join(unknown)}: not an output of the model (its outputs: "
                         f"{', '.join(o.name for o in proto.graph.output)})", path=str(plan.source))
    return proto, io_of_proto(proto)[0]


def _feed_batch(plan: Plan, specs: list[Any]) -> tuple[int, bool]:
    """Samples per run: the model's static batch, else the plan's."""
    static = {s.static_batch for s in specs}
    fixed = next(iter(static)) if len(static) == 1 and None not in static else None
    return (fixed, True) if fixed is not None else (plan.batch, False)


def _samples(plan: Plan, proto: onnx.ModelProto, specs: list[Any]) -> tuple[Samples, Samples]:
    batch, static = _feed_batch(plan, specs)
    if plan.calibration is not None:
        given = load_samples(plan.calibration, specs, batch, static, plan.preprocess, model=plan.source)
        if plan.eval_data is not None:
            return given, load_samples(plan.eval_data, specs, batch, static, _folder_only(plan), model=plan.source)
        return held_out_split(given)
    ranges = {**index_ranges(proto), **plan.int_ranges}
    count = -(-plan.samples // batch) * batch if static else plan.samples
    held = -(-plan.eval_samples // batch) * batch if static else plan.eval_samples
    calibration = seeded_samples(specs, count, seed=plan.seed, salt=CALIBRATION_SEED_SALT, batch=batch,
                                 static=static, int_ranges=ranges)
    if plan.eval_data is not None:
        return calibration, load_samples(plan.eval_data, specs, batch, static, _folder_only(plan), model=plan.source)
    return calibration, seeded_samples(specs, held, seed=plan.seed, salt=HELD_OUT_SEED_SALT, batch=batch,
                                       static=static, int_ranges=ranges)


def _folder_only(plan: Plan) -> str | None:
    """--preprocess for --eval: its own folder takes it, an .npz beside a folder of images does not."""
    return plan.preprocess if plan.eval_data is not None and plan.eval_data.is_dir() else None


def _batch_stamp(proto: onnx.ModelProto) -> str | int:
    """The source's ``portable.batch`` stamp, else what its first input's dim 0 says."""
    stamped = next((p.value for p in proto.metadata_props if p.key == "portable.batch"), None)
    if stamped is not None:
        return int(stamped) if stamped.isdigit() else stamped
    dims = proto.graph.input[0].type.tensor_type.shape.dim if proto.graph.input else []
    return dims[0].dim_value if dims and dims[0].HasField("dim_value") else "dynamic"


def _result(plan: Plan, calibration: Samples, held_out: Samples, staged: Staged,
            quantized: onnx.ModelProto) -> QuantizeResult:
    seeded = plan.calibration is None
    ops = Counter(n.op_type for n in quantized.graph.node)
    return QuantizeResult(plan.source, plan.output, plan.settings,
                          SampleSet(calibration.source, calibration.count, seeded, calibration.preprocess),
                          SampleSet(held_out.source, held_out.count, plan.eval_data is None and seeded,
                                    held_out.preprocess),
                          plan.budgets, report=staged.report, fingerprint=staged.fingerprint,
                          ops={"QuantizeLinear": ops["QuantizeLinear"], "DequantizeLinear": ops["DequantizeLinear"],
                               "nodes": len(quantized.graph.node)},
                          notes=((RANDOM_CALIBRATION_NOTE,) if seeded else ())
                          + ((ENTROPY_NOTE,) if plan.settings.method == "entropy" else ()))


def _measure(plan: Plan, result: QuantizeResult, floats: tuple[Path, Path], int8: Path,
             held: tuple[Samples, Reference], phases: Phases) -> QuantizeResult:
    """Accuracy (and budgets), the worst nodes, the latency: each on the held-out samples. ``floats``: the user's
    float model (latency), and the one the quantizer read (the worst nodes compare like with like); ``held``: the
    held-out samples and the float model's outputs on them."""
    (float_model, reference), (held_out, outputs) = floats, held
    with phases.phase("accuracy"):
        accuracy = _accuracy(outputs, int8, held_out)
        result = replace(result, accuracy=accuracy, checks=check_budgets(plan.budgets, accuracy),
                         notes=result.notes + _host_kernels_note(accuracy, _accuracy(outputs, int8, held_out,
                                                                                      as_written=False)))
    if plan.settings.target.name == "qnn":  # issue 47: judged on Qualcomm's HTP where onnxruntime-qnn is installed
        from portable.quantization.on_htp import on_htp

        with phases.phase("htp"):
            htp = on_htp(float_model, int8, held_out, outputs.kinds)
        result = replace(result, notes=result.notes + (htp,)) if isinstance(htp, str) else replace(
            result, htp=htp, accuracy=htp.htp, checks=check_budgets(plan.budgets, htp.htp), notes=result.notes + (htp.note(),))
    if plan.per_node:
        from portable.quantization.nodes import worst_nodes

        with phases.phase("nodes"):
            result = replace(result, worst_nodes=worst_nodes(reference, int8, _first(held_out, PER_NODE_SAMPLES)))
    if plan.latency:
        from portable.quantization.speed import compare_latency

        with phases.phase("latency"):
            result = replace(result, latency=compare_latency(float_model, int8, _latency_feeds(held_out),
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


@dataclass(frozen=True)
class Reference:
    """The float model's outputs on the held-out samples (computed once: every trial of the search and the file
    are measured against them), and what judges each output (:mod:`portable.quantization.judging`)."""

    names: tuple[str, ...]
    outputs: tuple[np.ndarray, ...]
    kinds: dict[str, OutputKind]


def _reference(plan: Plan, proto: onnx.ModelProto, held_out: Samples) -> Reference:
    from portable.quantization.speed import cpu_session

    session = cpu_session(plan.source, "the float model")
    names = tuple(o.name for o in session.get_outputs())
    runs = [session.run(None, feeds) for feeds in held_out.batches()]
    outputs = tuple(np.concatenate([np.asarray(r[i]) for r in runs]) for i in range(len(names)))
    kinds = output_kinds(proto, dict(zip(names, outputs)), held_out.arrays, task=recorded_task(plan.source),
                         overrides=plan.judge)
    return Reference(names, outputs, kinds)


def _accuracy(reference: Reference, int8: Path, held_out: Samples, *,
              as_written: bool = True) -> tuple[OutputAccuracy, ...]:
    """The int8 file against the float outputs on the held-out samples. ``as_written`` (the judged figure): the
    QDQ file's own arithmetic, the same on every CPU; else ONNX Runtime's fused int8 kernels on this CPU."""
    from portable.quantization.speed import cpu_session

    session = cpu_session(int8, "the int8 model", as_written=as_written)
    runs = [session.run(None, feeds) for feeds in held_out.batches()]
    actual = [np.concatenate([np.asarray(r[i]) for r in runs]) for i in range(len(reference.names))]
    return compare_outputs(reference.names, reference.outputs, actual, reference.kinds, held_out.arrays)


HOST_GAP_DB = 1.0  # a host-kernel SQNR this far under the file's own is worth a note


def _host_kernels_note(written: tuple[OutputAccuracy, ...], host: tuple[OutputAccuracy, ...]) -> tuple[str, ...]:
    """A note when ONNX Runtime's fused int8 kernels on this CPU lose fidelity the file itself does not: on x86
    CPUs without VNNI its u8s8 kernels (VPMADDUBSW) can saturate (ORT's quantization docs: try reduce_range
    or U8U8 there). Seen on an AVX2 AMD EPYC: EfficientNet-Lite0 15.1 dB as written, 7.6 dB on its kernels."""
    for w, h in zip(written, host):
        if w.sqnr_db - h.sqnr_db > HOST_GAP_DB:
            return (f"on this machine ONNX Runtime's fused int8 CPU kernels give {h.sqnr_db:.1f} dB SQNR on "
                    f"{w.name!r} against {w.sqnr_db:.1f} dB for the file's own arithmetic (the figure judged): "
                    "x86 CPUs without VNNI can saturate in ORT's u8s8 kernels; deploy where the runtime's int8 "
                    "kernels are exact, or measure on the target",)
    return ()


def _judge(result: QuantizeResult) -> None:
    """Refuse a result that fails the contract or a budget (:class:`QuantizeFailed`: nothing is written)."""
    if result.findings:
        first = result.findings[0]
        raise QuantizeFailed(f"the quantized model fails the contract ({len(result.findings)} finding(s); first: "
                             f"{first.rule_id} {first.message}); nothing written", result)
    if not result.budgets_ok:
        raise QuantizeFailed(_budget_message(result), result)


def _budget_message(result: QuantizeResult) -> str:
    """What missed, by how much, and what to try."""
    failed = [c for c in result.checks if not c.passed]
    first = failed[0]
    what = "below the default floor" if result.budgets.floor else f"{len(failed)} accuracy budget(s) exceeded"
    message = f"{what} (first: {first.budget} on {first.output}: {first.measured:.4g} vs {first.limit:g}); nothing written"
    if result.budgets.floor:
        tries = [t for t, useful in (("--calibration with real samples", result.calibration.seeded),
                                     ("--per-channel", not result.settings.per_channel),
                                     ("--method percentile", result.settings.method == "minmax")) if useful]
        searched = (f"the precision search kept {len(result.search.kept_float)} of {len(result.search.tried)} node(s) "
                    "tried in float and did not reach it (--search-limit N tries more); "
                    if result.search is not None and result.search.tried else "")
        return (f"{message}; {searched}try {', '.join([*tries, ''])}a budget (--min-sqnr/--max-top1-drop/--min-cosine) "
                "of your own; --min-sqnr 0 writes the file as it is")
    if result.search is not None:
        return (f"{message}; up to {len(result.search.tried)} of the most sensitive node(s) kept in float did not "
                "meet it either (--search-limit N tries more)")
    return message


def _travelling(plan: Plan, force: bool) -> Recorded | None:
    """The tokenizer or image processor the source records (its export's ``NAME.hf/``): it travels with the
    quantized file, in a ``NAME.hf/`` of its own, checked writable before any long work. None where the source
    records none, or its folder is gone (the file is then written without one, as before)."""
    from portable.exporters.writer import check_target
    from portable.hf.assets import recorded, sidecar_path

    try:
        found = recorded(plan.source)
    except InputError:
        return None
    if found is not None:
        check_target(sidecar_path(plan.output), force, folder=True)
    return found


def _stage_preprocessing(stages: contextlib.ExitStack, found: Recorded | None, plan: Plan,
                         force: bool) -> list[StagedFolder]:
    from portable.exporters.artefact import stage_folder
    from portable.hf.assets import copy_recorded, sidecar_path

    if found is None:
        return []
    target = sidecar_path(plan.output)
    return [stages.enter_context(stage_folder(target, lambda files: copy_recorded(found, files, target.name),
                                              force=force))]


def _write(staged: Staged, folders: list[StagedFolder], plan: Plan, result: QuantizeResult,
           phases: Phases) -> QuantizeResult:
    from portable.exporters.artefact import commit

    with phases.phase("write"):
        written = commit([staged], folders)
        manifest = _manifest(plan, replace(result, timings=dict(phases.timings)), staged)
        if folders:  # the folder, task and dims its source's export recorded, with the files that travel
            from portable.hf.assets import recorded_source

            manifest["source"] = recorded_source(plan.source) or None
            manifest["preprocessing"] = folders[0].record
        written.write_manifest(manifest)
    return replace(result, written=True, timings=dict(phases.timings))


def _manifest(plan: Plan, result: QuantizeResult, staged: Staged) -> dict[str, Any]:
    from portable.exporters.manifest import build_manifest

    manifest = build_manifest(staged.proto, file=plan.output.name, fingerprint=staged.fingerprint,
                              size=staged.size, precision=PRECISION,
                              batch=_batch_stamp(staged.proto), policy=plan.policy, report=staged.report.to_dict(),
                              parity=None, timings=dict(result.timings), spec=None)
    manifest["quantization"] = {"source": str(plan.source), "source_fingerprint": _fingerprint_of(plan.source),
                                **result.measurements()}
    return manifest


def _fingerprint_of(path: Path) -> str | None:
    from portable.validators.loading import load_model_file

    loaded = load_model_file(path)
    loaded.close()
    return next((p.value for p in loaded.proto.metadata_props if p.key == "portable.fingerprint"), None)
