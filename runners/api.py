"""``portable.runners.compare``: parity first, then latency, of ONNX Runtime against eager
and compiled PyTorch on identical seeded inputs.

Phases: (1) parity: each runner is loaded in turn and run once per batch size (the first
call per batch is timed apart: for ``torch.compile`` that is compile time to first result);
outputs are compared per pair and output; (2) latency (optional): each runner timed per
batch size; (3) localization (optional) when parity failed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from portable.errors import InputError, UsageError
from portable.runners.base import Feeds, Runner, RunnerFailed
from portable.runners.comparator import PairComparison, compare_outputs
from portable.runners.environment import default_device, describe_environment
from portable.runners.inputs import (
    InputSpec,
    OutputSpec,
    dims_from_examples,
    graph_io,
    int_range_from_examples,
    load_npz,
    make_feeds,
)
from portable.runners.memory import CudaPeakMemory, RssGrowth, rss_bytes
from portable.runners.ort_runner import OnnxRuntimeRunner, resolve_providers
from portable.runners.report import CompareReport, LatencyResult, RunnerInfo
from portable.runners.stats import LatencyStats
from portable.runners.timing import CudaEventTimer, HostTimer, Timer, TimingConfig, measure, measure_pipelined
from portable.runners.tolerances import ToleranceTable
from portable.runners.torch_runners import COMPILE_MODES, CompiledRunner, EagerRunner, tf32_mode

__all__ = ["compare"]

Progress = Callable[[str], None]
Outputs = dict[str, dict[int, list[np.ndarray]]]  # runner -> batch -> outputs
DEFAULT_INT_RANGE = (0, 10)


@dataclass
class _Plan:
    """Everything resolved before any runner is loaded."""

    model: Path
    inputs: list[InputSpec]
    outputs: list[OutputSpec]
    feeds: dict[int, dict[str, np.ndarray]]
    device: str
    setup: dict[str, Any] = field(default_factory=dict)


def _batches(specs: Sequence[InputSpec], batches: Sequence[int] | None) -> list[int]:
    static = {s.static_batch for s in specs if s.shape}
    fixed = next(iter(static)) if len(static) == 1 and None not in static else None
    if not batches:
        return [fixed or 1]
    if fixed is not None and any(b != fixed for b in batches):
        raise UsageError(f"the model's batch axis is static ({fixed}); --batch {','.join(map(str, batches))} "
                         "cannot run (export with a dynamic batch axis)")
    if any(b < 1 for b in batches):
        raise UsageError("--batch sizes must be >= 1")
    return list(dict.fromkeys(batches))


def _feeds(specs: Sequence[InputSpec], batches: list[int], inputs: str | Path | Feeds | None, seed: int,
           dims: Mapping[str, int], int_range: tuple[int, int]) -> tuple[dict[int, dict[str, np.ndarray]], str]:
    if inputs is None:
        return {b: make_feeds(specs, b, seed=seed, dims=dims, int_range=int_range) for b in batches}, "seeded"
    feeds = load_npz(inputs, specs) if isinstance(inputs, (str, Path)) else {s.name: np.asarray(inputs[s.name])
                                                                             for s in specs}
    first = next(iter(feeds.values()))
    batch = int(first.shape[0]) if first.ndim else 1
    return {batch: feeds}, str(inputs) if isinstance(inputs, (str, Path)) else "given"


def _plan(model_path: str | Path, examples: Sequence[Any] | None, device: str | None, batches: Sequence[int] | None,
          inputs: str | Path | Feeds | None, seed: int, dims: Mapping[str, int] | None,
          int_range: tuple[int, int] | None) -> _Plan:
    path = Path(model_path)
    if not path.is_file():
        raise InputError("no such model file", path=str(path))
    specs, outputs = graph_io(path)
    device = device or default_device()
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: PyTorch sees no CUDA device here")
    all_dims = {**dims_from_examples(specs, examples), **(dims or {})}
    ints = int_range or int_range_from_examples(examples) or DEFAULT_INT_RANGE
    feeds, source = _feeds(specs, _batches(specs, batches), inputs, seed, all_dims, ints)
    setup = {"device": device, "seed": seed, "batches": sorted(feeds), "inputs": source,
             "int_range": list(ints), "dims": all_dims}
    return _Plan(path, specs, outputs, feeds, device, setup)


def _make_runners(plan: _Plan, module: Any, providers: Sequence[str], compile_mode: str | None) -> list[Runner]:
    runners: list[Runner] = [EagerRunner(module, plan.device)]
    if compile_mode is not None:
        runners.append(CompiledRunner(module, plan.device, compile_mode))
    runners.extend(OnnxRuntimeRunner(plan.model, p) for p in providers)
    return runners


def _failure(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:400]
    return text if isinstance(exc, RunnerFailed) else f"{type(exc).__name__}: {text}"


def _run_parity_safely(runner: Runner, plan: _Plan, outputs: Outputs, say: Progress) -> RunnerInfo:
    """One runner's first runs; a failure (ORT session, CUDA out of memory, torch.compile) is
    recorded on that runner and the others go on."""
    try:
        return _run_parity(runner, plan, outputs, say)
    except (RunnerFailed, Exception) as exc:  # noqa: BLE001 - any failure of one runner is that runner's error
        outputs.pop(runner.name, None)
        say(f"{runner.name} failed: {_failure(exc)}")
        detail = cast(str, getattr(runner, "provider", None) or getattr(runner, "mode", ""))
        return RunnerInfo(runner.name, runner.kind, runner.device, detail, runner.load_seconds, error=_failure(exc))


def _run_parity(runner: Runner, plan: _Plan, outputs: Outputs, say: Progress) -> RunnerInfo:
    before = rss_bytes()
    say(f"loading {runner.name}")
    runner.load()
    firsts: dict[int, float] = {}
    for batch, feeds in plan.feeds.items():
        say(f"{runner.name}: first run, batch {batch}" + (" (compiling)" if runner.kind == "torch-compile" else ""))
        start = time.perf_counter()
        outputs.setdefault(runner.name, {})[batch] = runner.infer(feeds)
        firsts[batch] = time.perf_counter() - start
    detail = cast(str, getattr(runner, "provider", None) or getattr(runner, "mode", ""))
    return RunnerInfo(runner.name, runner.kind, runner.device, detail, runner.load_seconds, firsts,
                      max(0, rss_bytes() - before))


def _pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    torch_side = [n for n in ("compiled", "eager") if n in names]
    pairs = [(ort, ref) for ort in names if ort.startswith("ort-") for ref in torch_side]
    return pairs + ([("compiled", "eager")] if len(torch_side) == 2 else [])


def _compare_all(plan: _Plan, outputs: Outputs, tolerances: ToleranceTable) -> tuple[PairComparison, ...]:
    names = [o.name for o in plan.outputs]
    dtypes = [o.dtype for o in plan.outputs]
    return tuple(compare_outputs((a, outputs[a][b]), (e, outputs[e][b]), names, dtypes, b, tolerances)
                 for a, e in _pairs(list(outputs)) for b in plan.feeds)


def _timer_and_memory(runner: Runner) -> tuple[Timer, Any]:
    if runner.kind != "onnxruntime" and runner.uses_cuda:
        return CudaEventTimer(), CudaPeakMemory()
    return HostTimer(runner.synchronize), None


def _run_latency(runner: Runner, info: RunnerInfo, plan: _Plan, config: TimingConfig,
                 say: Progress) -> list[LatencyResult]:
    results = []
    for batch, feeds in plan.feeds.items():
        say(f"timing {runner.name}, batch {batch}")
        timer, probe = _timer_and_memory(runner)
        step = runner.prepare(feeds)
        if probe is not None:
            probe.start()
        samples = measure(step, timer, config)
        # back to back, timed on the host as a serving loop sees it (device synchronised per block)
        pipelined = statistics.median(measure_pipelined(step, HostTimer(runner.synchronize),
                                                        statistics.median(samples)))
        peak = probe.peak() if probe is not None else info.load_rss_growth_bytes
        kind = probe.kind if probe is not None else RssGrowth.kind
        results.append(LatencyResult(runner.name, batch, LatencyStats.from_samples(samples, batch), timer.name,
                                     peak, kind, pipelined))
    return results


def _notes(plan: _Plan, tf32: bool) -> tuple[str, ...]:
    notes = []
    if plan.device == "cuda":
        notes.append("TF32 allowed on the PyTorch side (--tf32): float32 tolerances widened to the tf32 row"
                     if tf32 else "TF32 off on the PyTorch side (parity mode); --tf32 allows it with wider tolerances")
    low = sorted({o.dtype for o in plan.outputs} & {"float16", "bfloat16"})
    if low:
        notes.append(f"{'/'.join(low)} outputs: the default tolerance adds a multiple of the reference output's RMS, "
                     "since low-precision rounding grows with the output's scale; an error of about 1 % in one "
                     "weight can stay inside it, so check parity in float32 before converting")
    notes.append("ONNX Runtime GPU providers are timed with I/O binding; host copies are not counted")
    notes.append("peak memory: torch.cuda.max_memory_allocated for CUDA runs, resident-set growth on load "
                 "and first runs for CPU runs")
    return tuple(notes)


def _providers(providers: str | Sequence[str] | None) -> list[str]:
    if providers is None or isinstance(providers, str):
        return resolve_providers(providers)
    return resolve_providers(",".join(providers))


def compare(model_path: str | Path, reference_module: Any, *, example_inputs: Sequence[Any] | None = None,
            device: str | None = None, compile_mode: str | None = "default",
            providers: str | Sequence[str] | None = None, batches: Sequence[int] | None = None,
            inputs: str | Path | Feeds | None = None, dims: Mapping[str, int] | None = None,
            int_range: tuple[int, int] | None = None, seed: int = 0, tf32: bool = False,
            tolerances: ToleranceTable | None = None, timing: TimingConfig | None = TimingConfig(),  # noqa: B008 - frozen
            localize: bool = False, reference_name: str = "", progress: Progress | None = None) -> CompareReport:
    """Compare ONNX Runtime (one runner per provider) with eager and compiled PyTorch.

    ``compile_mode=None`` skips ``torch.compile``; ``timing=None`` skips the latency phase.
    Parity failures are in the report (``report.passed``, ``report.exit_code``); errors raise
    :class:`portable.errors.PortableError`.
    """
    if compile_mode is not None and compile_mode not in COMPILE_MODES:
        raise UsageError(f"unknown compile mode {compile_mode!r} (choose from {', '.join(COMPILE_MODES)})")
    say = progress or (lambda _msg: None)
    plan = _plan(model_path, example_inputs, device, batches, inputs, seed, dims, int_range)
    table = replace(tolerances or ToleranceTable(), tf32=tf32)
    runners = _make_runners(plan, reference_module, _providers(providers), compile_mode)
    plan.setup.update({"compile_mode": compile_mode, "tf32": tf32, "providers": [
        r.provider for r in runners if isinstance(r, OnnxRuntimeRunner)],
        "timing": None if timing is None else timing.to_dict(), "reference_runner": "eager"})
    try:
        with tf32_mode(tf32):
            return _execute(plan, runners, table, timing, localize, reference_module, reference_name, say)
    finally:
        for runner in runners:
            runner.unload()


def _execute(plan: _Plan, runners: list[Runner], table: ToleranceTable, timing: TimingConfig | None,
             localize: bool, module: Any, reference_name: str, say: Progress) -> CompareReport:
    outputs: Outputs = {}
    infos = [_run_parity_safely(r, plan, outputs, say) for r in runners]
    parity = _compare_all(plan, outputs, table)
    latency: list[LatencyResult] = []
    if timing is not None:
        for i, (runner, info) in enumerate(zip(runners, infos)):
            if info.error is not None:
                continue
            try:
                latency.extend(_run_latency(runner, info, plan, timing, say))
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory at a larger batch
                infos[i] = replace(info, error=f"latency phase: {_failure(exc)}")
    located = None
    if localize and not all(p.passed for p in parity):
        from portable.runners.localize import localize_divergence

        say("localizing the first divergent node")
        batch = min(plan.feeds)
        located = localize_divergence(plan.model, module, plan.feeds[batch], table, device=plan.device)
    return CompareReport(str(plan.model), reference_name, plan.setup, describe_environment(), tuple(infos), parity,
                         tuple(latency), located, _notes(plan, table.tf32))
