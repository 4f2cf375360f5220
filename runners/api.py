"""``portable.runners.compare``: parity first, then latency, of ONNX Runtime against eager
and compiled PyTorch on identical seeded inputs.

Phases: (1) parity: each runner is loaded in turn and run once per batch size (the first
call per batch is timed apart: for ``torch.compile`` that is compile time to first result);
outputs are compared per pair and output; (2) latency (optional): per batch size, each runner
warmed up alone until steady (its peak memory read there), then all timed in round-robin
blocks (runners/timing.py); (3) localization (optional) when parity failed.

One numerics mode per run: strict fp32 (TF32 off in PyTorch and in every ONNX Runtime
provider) or ``tf32`` (allowed on both sides, with the wider tf32 tolerance).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from portable.errors import InputError, UsageError
from portable.runners.base import Feeds, Runner, RunnerFailed
from portable.runners.budgets import check_budgets
from portable.runners.comparator import PairComparison, compare_outputs
from portable.runners.environment import default_device, describe_environment
from portable.runners.inputs import (
    InputSpec,
    OutputSpec,
    dims_from_examples,
    draws,
    graph_io,
    int_ranges_from_examples,
    load_npz,
    make_feeds,
)
from portable.runners.memory import CudaPeakMemory, DeviceMemoryGrowth, RssGrowth, rss_bytes
from portable.runners.options import CompareOptions
from portable.runners.ort_runner import EpChoice, OnnxRuntimeRunner, resolve_eps
from portable.runners.report import CompareReport, LatencyResult, RunnerInfo
from portable.runners.stats import LatencyStats
from portable.runners.timing import (
    CudaEventTimer,
    HostTimer,
    Measurement,
    Timed,
    Timer,
    TimingConfig,
    Warmup,
    interleave,
    warm_up,
)
from portable.runners.tolerances import ToleranceTable
from portable.runners.torch_runners import CompiledRunner, EagerRunner, float64_outputs, structured, tf32_mode

if TYPE_CHECKING:
    import torch

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
    device_memory: dict[str, dict[int, tuple[int, str]]] = field(default_factory=dict)  # ORT on a GPU
    skipped: list[str] = field(default_factory=list)  # default providers that could not load
    exact: dict[int, list[np.ndarray]] = field(default_factory=dict)  # the float64 reference's outputs per batch


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
           dims: Mapping[str, int], ints: IntRanges,
           path: Path | None = None) -> tuple[dict[int, dict[str, np.ndarray]], str, dict[str, str]]:
    """The feeds per batch, where they came from, and how each seeded input was drawn (``setup.drawn``)."""
    if inputs is None:
        from portable.runners.constraints import constraints_of  # what the graph does with each input (issue 26)

        how: dict[str, Any] = {"int_range": ints.default, "int_ranges": ints.per_input, "observed": ints.observed,
                               "constraints": constraints_of(path) if path is not None else {}}
        said = {s.name: d.describe(s.dtype) for s, d in zip(specs, draws(specs, **how).values())}
        return {b: make_feeds(specs, b, seed=seed, dims=dims, **how) for b in batches}, "seeded", said
    feeds = load_npz(inputs, specs) if isinstance(inputs, (str, Path)) else {s.name: np.asarray(inputs[s.name])
                                                                             for s in specs}
    first = next(iter(feeds.values()))
    batch = int(first.shape[0]) if first.ndim else 1
    return {batch: feeds}, str(inputs) if isinstance(inputs, (str, Path)) else "given", {}


@dataclass(frozen=True)
class IntRanges:
    """Where random integer inputs are drawn from: given per input (by name); else what the graph does with
    them (runners/constraints.py); else ``observed``, each example input's own range; else ``default``."""

    default: tuple[int, int]
    per_input: Mapping[str, tuple[int, int]]
    observed: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, specs: Sequence[InputSpec], examples: Sequence[Any] | None, int_range: tuple[int, int] | None,
           int_ranges: Mapping[str, tuple[int, int]] | None) -> IntRanges:
        """Given ranges first (by name, then one for all); the example inputs' own ranges unless one for all
        is given."""
        found = {} if int_range is not None else int_ranges_from_examples(specs, examples)
        return cls(int_range or DEFAULT_INT_RANGE, dict(int_ranges or {}), found)

    def to_dict(self) -> dict[str, Any]:
        return {"default": list(self.default), **{name: list(r) for name, r in sorted(self.observed.items())},
                **{name: list(r) for name, r in sorted(self.per_input.items())}}


def _plan(model_path: str | Path, examples: Sequence[Any] | None, options: CompareOptions) -> _Plan:
    path = Path(model_path)
    if not path.is_file():
        raise InputError("no such model file", path=str(path))
    specs, outputs = graph_io(path)
    device, dims, seed, int_range = options.device or default_device(), options.dims, options.seed, options.int_range
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: PyTorch sees no CUDA device here")
    all_dims = {**dims_from_examples(specs, examples), **(dims or {})}
    ints = IntRanges.of(specs, examples, int_range, options.int_ranges)
    feeds, source, drawn = _feeds(specs, _batches(specs, options.batches), options.inputs, seed, all_dims, ints, path)
    setup = {"device": device, "seed": seed, "batches": sorted(feeds), "inputs": source,
             "int_range": ints.to_dict(), "drawn": drawn, "dims": all_dims}
    return _Plan(path, specs, outputs, feeds, device, setup)


def compiled_name(mode: str) -> str:
    """``default`` -> ``compiled``; ``reduce-overhead`` -> ``compiled-reduce-overhead``."""
    return "compiled" if mode == "default" else f"compiled-{mode}"


def _make_runners(plan: _Plan, module: Any, eps: Sequence[EpChoice], compile_modes: Sequence[str],
                  tf32: bool, examples: Sequence[Any] | None = None) -> list[Runner]:
    # a module that takes a list or a dict (as export handles it): the flat feeds go back into that structure
    shape = examples if structured(examples) else None
    runners: list[Runner] = [EagerRunner(module, plan.device, examples=shape)]
    runners.extend(CompiledRunner(module, plan.device, m, name=compiled_name(m), examples=shape) for m in compile_modes)
    # ONNX Runtime's intra-op threads spin-wait after each run by default: in a process that times PyTorch next,
    # they take its cores (a tiny BERT's eager p50 read 75-219 ms after ORT's block, 11-13 ms alone)
    runners.extend(OnnxRuntimeRunner(plan.model, e.provider, tf32=tf32, cuda_graph=e.cuda_graph, nhwc=e.nhwc,
                                     spinning=False) for e in eps)
    return runners


def _threads(runners: Sequence[Runner]) -> dict[str, Any]:
    """The threads each side computes with (the report's ``setup.threads``): what a latency figure depends on."""
    import os

    import torch

    found: dict[str, Any] = {"cpu_count": os.cpu_count(), "torch_intra_op": torch.get_num_threads(),
                             "torch_inter_op": torch.get_num_interop_threads()}
    for runner in runners:
        if isinstance(runner, OnnxRuntimeRunner):
            found[runner.name] = {"intra_op": runner.threads or "default (one per physical core)",
                                  "spinning": runner.spinning}
    return found


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


def _device_probe(runner: Runner) -> DeviceMemoryGrowth | None:
    """The started device-memory probe of an ONNX Runtime GPU runner; None elsewhere, or where
    neither NVML nor a CUDA device can be read (the report then has no figure, not an error)."""
    if runner.kind != "onnxruntime" or not runner.uses_cuda:
        return None
    try:
        probe = DeviceMemoryGrowth()
        probe.start()
    except Exception:  # noqa: BLE001 - no NVML, no CUDA: no memory figure
        return None
    return probe


def _run_parity(runner: Runner, plan: _Plan, outputs: Outputs, say: Progress) -> RunnerInfo:
    before = rss_bytes()
    probe = _device_probe(runner)
    say(f"loading {runner.name}")
    runner.load()
    firsts: dict[int, float] = {}
    for batch, feeds in plan.feeds.items():
        say(f"{runner.name}: first run, batch {batch}" + (" (compiling)" if runner.kind == "torch-compile" else ""))
        start = time.perf_counter()
        outputs.setdefault(runner.name, {})[batch] = runner.infer(feeds)
        firsts[batch] = time.perf_counter() - start
        if probe is not None:  # the arena only grows: growth so far is its peak up to this batch
            plan.device_memory.setdefault(runner.name, {})[batch] = (probe.peak(), probe.kind)
    detail = cast(str, getattr(runner, "provider", None) or getattr(runner, "mode", ""))
    return RunnerInfo(runner.name, runner.kind, runner.device, detail, runner.load_seconds, firsts,
                      max(0, rss_bytes() - before))


def _pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Each ONNX Runtime runner against each PyTorch runner; each compiled runner against eager."""
    compiled = [n for n in names if n.startswith("compiled")]
    torch_side = compiled + (["eager"] if "eager" in names else [])
    pairs = [(ort, ref) for ort in names if ort.startswith("ort-") for ref in torch_side]
    return pairs + ([(c, "eager") for c in compiled] if "eager" in names else [])


def _compare_all(plan: _Plan, outputs: Outputs, tolerances: ToleranceTable) -> tuple[PairComparison, ...]:
    names = [o.name for o in plan.outputs]
    dtypes = [o.dtype for o in plan.outputs]
    return tuple(compare_outputs((a, outputs[a][b]), (e, outputs[e][b]), names, dtypes, b, tolerances,
                                 exact=plan.exact.get(b)) for a, e in _pairs(list(outputs)) for b in plan.feeds)


def _calibrate(plan: _Plan, module: Any, table: ToleranceTable, examples: Sequence[Any] | None, say: Progress) -> None:
    """The reference once in float64 at each batch, before the other runners load: the noise floor that
    judges fp32 arithmetic as export's verify judges it (``plan.exact``; ``setup.float64`` says how it went)."""
    exact, note = float64_outputs(module, [o.dtype for o in plan.outputs], table.given, plan.feeds,
                                  device=plan.device, examples=examples if structured(examples) else None, say=say)
    plan.exact.update(exact)
    plan.setup["float64"] = note


def _timers(runner: Runner) -> tuple[Timer, Any]:
    """The synchronous-call timer and the memory probe of the warm-up (None: from the parity phase)."""
    if runner.kind != "onnxruntime" and runner.uses_cuda:
        return CudaEventTimer(), CudaPeakMemory()
    return HostTimer(runner.synchronize), None


@dataclass(frozen=True)
class _Warmed:
    runner: Runner
    entry: Timed
    warmup: Warmup
    memory: tuple[int | None, str]


def _memory(plan: _Plan, runner: Runner, info: RunnerInfo, batch: int) -> tuple[int | None, str]:
    if runner.name in plan.device_memory:
        return plan.device_memory[runner.name][batch]
    return info.load_rss_growth_bytes, RssGrowth.kind


def _warm(runner: Runner, info: RunnerInfo, plan: _Plan, batch: int, config: TimingConfig, say: Progress) -> _Warmed:
    say(f"warming up {runner.name}, batch {batch}")
    timer, probe = _timers(runner)
    step = runner.prepare(plan.feeds[batch])
    if probe is not None:
        probe.start()
    warmup = warm_up(step, timer, config)
    memory = (probe.peak(), probe.kind) if probe is not None else _memory(plan, runner, info, batch)
    entry = Timed(runner.name, _guarded(runner.name, step), timer, HostTimer(runner.synchronize))
    return _Warmed(runner, entry, warmup, memory)


def _result(warmed: _Warmed, measured: Measurement, batch: int) -> LatencyResult:
    return LatencyResult(warmed.runner.name, batch, LatencyStats.from_samples(measured.samples, batch),
                         warmed.entry.timer.name, warmed.memory[0], warmed.memory[1],
                         statistics.median(measured.pipelined), warmed.warmup, measured.rounds)


def _latency_batch(live: list[tuple[Runner, RunnerInfo]], plan: _Plan, batch: int, config: TimingConfig,
                   errors: dict[str, str], say: Progress) -> list[LatencyResult]:
    """Warm each runner alone, then time them all in round-robin blocks; a runner that fails
    (out of memory at a larger batch, say) is recorded and the others are timed again without it."""
    warmed: list[_Warmed] = []
    for runner, info in live:
        try:
            warmed.append(_warm(runner, info, plan, batch, config, say))
        except Exception as exc:  # noqa: BLE001 - one runner's failure
            errors[runner.name] = f"latency phase: {_failure(exc)}"
    while warmed:
        say(f"timing {', '.join(w.runner.name for w in warmed)} round-robin, batch {batch}")
        try:
            measured = interleave([w.entry for w in warmed], {w.runner.name: w.warmup for w in warmed}, config)
        except _StepFailed as failed:
            errors[failed.name] = f"latency phase: {_failure(failed.error)}"
            warmed = [w for w in warmed if w.runner.name != failed.name]
            continue
        return [_result(w, m, batch) for w, m in zip(warmed, measured)]
    return []


class _StepFailed(Exception):
    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(name)
        self.name, self.error = name, error


def _guarded(name: str, step: Any) -> Any:
    def run() -> object:
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - named, so that the others are timed without it
            raise _StepFailed(name, exc) from exc
    return run


def _notes(plan: _Plan, tf32: bool, timed: bool) -> tuple[str, ...]:
    notes = list(plan.skipped)
    if plan.device == "cuda" or any(p != "CPUExecutionProvider" for p in plan.setup.get("providers", [])):
        notes.append("numerics tf32: TF32 allowed in PyTorch (cuBLAS matmuls, cuDNN convolutions) and in ONNX "
                     "Runtime's CUDA provider (use_tf32=1); float32 tolerances widened to the tf32 row" if tf32 else
                     "numerics strict fp32: TF32 off in PyTorch and in ONNX Runtime's CUDA provider (use_tf32=0); "
                     "--tf32 allows it on both sides with wider tolerances")
        if "TensorrtExecutionProvider" in plan.setup.get("providers", []):
            notes.append("TensorRT: FP16/INT8 off; ONNX Runtime's TensorRT options have no TF32 switch, and "
                         "TensorRT allows TF32 by default, so strict fp32 is not guaranteed there")
    low = sorted({o.dtype for o in plan.outputs} & {"float16", "bfloat16"})
    if low:
        notes.append(f"{'/'.join(low)} outputs: the default tolerance adds a multiple of the reference output's RMS, "
                     "since low-precision rounding grows with the output's scale; an error of about 1 % in one "
                     "weight can stay inside it, so check parity in float32 before converting")
    return tuple(notes + (list(_TIMING_NOTES) if timed else []))


_TIMING_NOTES = (
    "ONNX Runtime GPU providers are timed with I/O binding; host copies are not counted",
    "timing: each runner warmed up alone until steady (or capped: see 'steady'), then all runners timed in "
    "round-robin blocks, each round opened by the next runner, so none gains by order; ONNX Runtime's intra-op "
    "spin-waiting off, so its threads do not take the cores from the runner timed next (setup.threads)",
    "peak memory: torch.cuda.max_memory_allocated for PyTorch on CUDA (its allocator's tensors); for ONNX Runtime "
    "on CUDA the growth of the process's device memory (NVML) across session load and first runs: the arena's "
    "high-water mark plus cuDNN/cuBLAS workspaces, not comparable byte for byte; resident-set growth on load and "
    "first runs for CPU runs",
)


def _eps(providers: str | Sequence[str] | None, device: str) -> list[EpChoice]:
    """The asked-for providers; by default the CPU provider for ``device`` cpu, every available one
    for cuda (a default one that cannot load is skipped with a note, see :func:`_drop_unloadable`)."""
    if providers is None:
        available = resolve_eps(None)
        cpu = [e for e in available if e.provider == "CPUExecutionProvider"]
        return cpu if device == "cpu" and cpu else available
    return resolve_eps(providers if isinstance(providers, str) else ",".join(providers))


def _drop_unloadable(runners: list[Runner], infos: list[RunnerInfo], implicit: bool,
                     plan: _Plan) -> tuple[list[Runner], list[RunnerInfo]]:
    """Without ``--ep``, a provider that onnxruntime lists but cannot load (TensorRT without its
    libraries) is left out and noted, not an error; asked for by name, it stays an error (exit 3)."""
    if not implicit:
        return runners, infos
    def unloadable(runner: Runner) -> bool:
        return isinstance(runner, OnnxRuntimeRunner) and runner.load_failed and runner.device != "cpu"

    for r, i in zip(runners, infos):
        if unloadable(r):
            plan.skipped.append(f"{r.name} left out: onnxruntime lists {getattr(r, 'provider', '')} but {i.error} "
                                "(ask for it with --ep to make this an error)")
    kept = [(r, i) for r, i in zip(runners, infos) if not unloadable(r)]
    plan.setup["providers"] = list(dict.fromkeys(r.provider for r, _ in kept if isinstance(r, OnnxRuntimeRunner)))
    return [r for r, _ in kept], [i for _, i in kept]


def compare(model_path: str | Path, reference_module: torch.nn.Module, options: CompareOptions | None = None, *,
            example_inputs: Sequence[Any] | None = None, progress: Progress | None = None,
            **fields: Any) -> CompareReport:
    """Compare ONNX Runtime (one runner per provider) with eager and compiled PyTorch.

    ``options``: what to compare and how (:class:`~portable.runners.options.CompareOptions`); its fields may
    also be given as keyword arguments (``batches=[1, 8]``, ``compile_mode=None``), which replace the
    record's. Parity failures and exceeded budgets are in the report (``report.passed``,
    ``report.exit_code``); errors raise :class:`portable.errors.PortableError`.
    """
    options = (options or CompareOptions()).with_(**fields) if fields else (options or CompareOptions())
    say = progress or (lambda _msg: None)
    plan = _plan(model_path, example_inputs, options)
    table = options.table(model_path)
    runners = _make_runners(plan, reference_module, _eps(options.providers, plan.device), options.compile_modes(),
                            options.tf32, example_inputs)
    plan.setup.update(_setup(options, runners))
    try:
        with tf32_mode(options.tf32):
            _calibrate(plan, reference_module, table, example_inputs, say)
            report = _execute(plan, runners, table, options.timing, options.localize, reference_module,
                              options.reference_name, say, implicit=options.providers is None)
    finally:
        for runner in runners:
            runner.unload()
    return _judged(report, options)


def _setup(options: CompareOptions, runners: Sequence[Runner]) -> dict[str, Any]:
    modes = options.compile_modes()
    timing = options.timing
    return {"compile_mode": ",".join(modes) or None, "compile_modes": modes, "tf32": options.tf32,
            "numerics": "tf32" if options.tf32 else "strict-fp32",
            "providers": list(dict.fromkeys(r.provider for r in runners if isinstance(r, OnnxRuntimeRunner))),
            "timing": None if timing is None else {**timing.to_dict(), "interleaved": True},
            "reference_runner": "eager", "threads": _threads(runners)}


def _judged(report: CompareReport, options: CompareOptions) -> CompareReport:
    """The budgets judged on a run that completed; a failed one is reported as it is (exit 1 or 3)."""
    if not (options.latency_budgets or options.error_budgets) or not report.parity_passed:
        return report
    return replace(report, budgets=check_budgets(report, options.latency_budgets, options.error_budgets))


def _execute(plan: _Plan, runners: list[Runner], table: ToleranceTable, timing: TimingConfig | None,
             localize: bool, module: Any, reference_name: str, say: Progress, implicit: bool = False) -> CompareReport:
    outputs: Outputs = {}
    infos = [_run_parity_safely(r, plan, outputs, say) for r in runners]
    runners, infos = _drop_unloadable(runners, infos, implicit, plan)
    plan.setup["provider_options"] = {r.name: r.effective_options or r.options for r in runners
                                      if isinstance(r, OnnxRuntimeRunner)}
    parity = _compare_all(plan, outputs, table)
    latency: list[LatencyResult] = []
    if timing is not None:
        errors: dict[str, str] = {}
        for batch in plan.feeds:
            live = [(r, i) for r, i in zip(runners, infos) if i.error is None and r.name not in errors]
            latency.extend(_latency_batch(live, plan, batch, timing, errors, say))
        infos = [replace(i, error=errors[i.name]) if i.name in errors else i for i in infos]
    located = None
    if localize and not all(p.passed for p in parity):
        from portable.runners.localize import localize_divergence

        say("localizing the first divergent node")
        batch = min(plan.feeds)
        located = localize_divergence(plan.model, module, plan.feeds[batch], table, device=plan.device)
    return CompareReport(str(plan.model), reference_name, plan.setup, describe_environment(), tuple(infos), parity,
                         tuple(latency), located, _notes(plan, table.tf32, timed=timing is not None))
