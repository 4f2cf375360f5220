"""The runtimes beside each other: ONNX Runtime CPU, OpenVINO CPU, tract, ONNX's reference evaluator and
Qualcomm's HTP (onnxruntime-qnn's simulator), on the same seeded inputs (batch 1 and 3 by default), each compared with the PyTorch
reference when one is given, else with the first runtime that runs (ONNX Runtime by default).

A runtime whose package is not installed is a ``not installed`` record, never an error: the core
install has neither openvino nor tract (``make targets-venv`` adds both). The reference evaluator
runs under a time cap and a model it cannot finish is ``timed out``, not a failure.

Per-runtime tolerances are data (:data:`RUNTIME_TOLERANCES`), each with the reason it is what it is;
a dtype a runtime does not list takes the comparison's dtype default (runners/tolerances.py). Each record
also carries, per output, the SQNR against the side it is compared with, its max abs and, for a logits
output, the top-1 agreement (:class:`OutputFigures`): for the HTP, whose arithmetic is not ONNX Runtime's
CPU emulation of it, those are the figures that say how far it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import ExitCode, InputError, UsageError
from portable.packages import installed_version
from portable.runners.base import Runner, RunnerFailed
from portable.runners.comparator import compare_outputs
from portable.runners.inputs import InputSpec, graph_io, make_feeds
from portable.runners.tolerances import Tolerance, ToleranceTable

__all__ = ["DEFAULT_BATCHES", "INSTALL", "RUNTIMES", "RUNTIME_TOLERANCES", "OutputFigures", "RuntimeRecord", "RuntimeReport",
           "RuntimeTolerances", "compare_runtimes", "installed", "make_runner", "output_figures", "parse_runtimes",
           "render_runtimes"]

SCHEMA = "portable.runtimes"
DEFAULT_BATCHES = (1, 3)
Progress = Callable[[str], None]

# runtime -> the Python package it needs (None: always here, a core dependency)
RUNTIMES: dict[str, str] = {"ort": "onnxruntime", "openvino": "openvino", "tract": "tract", "reference": "onnx",
                            "qnn": "onnxruntime_qnn"}
# how to install a runtime's package where it is not `make targets-venv`
INSTALL: dict[str, str] = {"qnn": "pip install 'portable-onnx[qnn]'"}

# runtime -> dtype -> (atol, rtol, why). The float32 rows keep the cross-backend default (1e-4/1e-3: ResNet-50 ORT CPU
# vs eager measured 2.4e-4 max abs, docs/runners.md) unless a runtime was measured to need another.
RUNTIME_TOLERANCES: dict[str, dict[str, tuple[float, float, str]]] = {
    "ort": {"float32": (1e-4, 1e-3, "the float32 default: cross-backend error measured on ResNet-50 and BERT "
                                    "(docs/runners.md)")},
    "openvino": {"float32": (1e-4, 1e-3, "CPU plugin with INFERENCE_PRECISION_HINT f32 (no bf16): issue 21 measured "
                                         "<= 6e-6 against ONNX Runtime on six exports, the float32 default kept")},
    "tract": {"float32": (1e-4, 1e-3, "tract computes float32 throughout (no fast-math by default): the float32 "
                                      "default kept")},
    "reference": {"float32": (1e-4, 1e-3, "NumPy, op by op as the spec writes it; its float32 matmuls and "
                                          "convolutions round differently from MLAS/oneDNN, within the default")},
    "qnn": {"float32": (1e-4, 1e-3, "the x86-64 HTP simulator computes a float file in float32 (the tiny CNN: 1.2e-7 "
                                    "max abs against PyTorch, batch 1 and 3): the float32 default kept; a device runs "
                                    "it in fp16 by default, which the simulator does not show"),
            "qdq": (1.0, 0.5, "a QDQ file runs in the HTP's integer arithmetic, which is not ONNX Runtime's CPU "
                              "emulation of it: trained EfficientNet-Lite0 logits, all int8, differ by up to 0.54 on 48 "
                              "photographs (24.3 dB; 3 convolutions kept float: 3.4, 15.4 dB; the issue's MobileNetV2: "
                              "1.9, 13 dB); judge a QDQ file by the per-output SQNR and top-1 beside it")},
}


@dataclass(frozen=True)
class RuntimeTolerances(ToleranceTable):
    """The comparison's table, with one runtime's own rows (:data:`RUNTIME_TOLERANCES`) before the dtype defaults;
    the user's ``--atol``/``--rtol`` still win. On a QDQ file a runtime's ``qdq`` row, where it has one, stands for
    its float32 row (its outputs are float32, its arithmetic integer)."""

    runtime: str = ""
    quantized: bool = False

    def _default(self, dtype: str) -> Tolerance:
        rows = RUNTIME_TOLERANCES.get(self.runtime, {})
        row = rows.get("qdq") if self.quantized and dtype == "float32" and "qdq" in rows else rows.get(dtype)
        if row is None or (dtype == "float32" and self.tf32):
            return super()._default(dtype)
        return Tolerance(row[0], row[1], f"default float32 of {self.runtime}: {row[2]}" if dtype == "float32"
                         else f"{self.runtime}: {row[2]}")


def installed(runtime: str) -> str | None:
    """The installed version of ``runtime``'s package, None when it is not installed."""
    return installed_version(RUNTIMES[runtime])


def parse_runtimes(text: str | Sequence[str]) -> list[str]:
    names = [n.strip().lower() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    bad = [n for n in names if n not in RUNTIMES]
    if bad or not names:
        raise UsageError(f"--runtime {','.join(bad) or text!r}: unknown runtime (known: {', '.join(RUNTIMES)})")
    return list(dict.fromkeys(names))


def make_runner(runtime: str, model: str | Path, *, cap_seconds: float | None = None) -> Runner:
    """The runner for ``runtime`` (its module imports its package in ``load``, not here)."""
    if runtime == "ort":
        from portable.runners.ort_runner import OnnxRuntimeRunner

        return OnnxRuntimeRunner(model, spinning=False)
    if runtime == "openvino":
        from portable.runners.openvino_runner import OpenVinoRunner

        return OpenVinoRunner(model)
    if runtime == "tract":
        from portable.runners.tract_runner import TractRunner

        return TractRunner(model)
    if runtime == "qnn":
        from portable.runners.qnn_runner import QnnRunner

        return QnnRunner(model)
    from portable.runners.reference_runner import DEFAULT_CAP_SECONDS, ReferenceRunner

    return ReferenceRunner(model, cap_seconds=cap_seconds or DEFAULT_CAP_SECONDS)


@dataclass(frozen=True)
class OutputFigures:
    """One output of one runtime against the side it is compared with: SQNR (dB), max abs and, for a rank-2 float
    output (a classifier's logits), the share of rows whose argmax agrees."""

    output: str
    sqnr_db: float
    max_abs: float
    top1: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "sqnr_db": round(self.sqnr_db, 2), "max_abs": self.max_abs, "top1": self.top1}

    def text(self) -> str:
        top1 = f", top-1 {self.top1:.0%}" if self.top1 is not None else ""
        return f"{self.output}: {self.sqnr_db:.1f} dB, max abs {self.max_abs:.3g}{top1}"


def output_figures(names: Sequence[str], actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> tuple[OutputFigures, ...]:
    """:class:`OutputFigures` per float output (the SQNR and top-1 of portable/quantization/accuracy.py)."""
    from portable.quantization.accuracy import sqnr_db, top1_agreement

    out = []
    for name, a, e in zip(names, actual, expected, strict=False):
        a, e = np.asarray(a), np.asarray(e)
        if a.dtype.kind != "f" or a.shape != e.shape:
            continue
        top1 = top1_agreement(e, a) if e.ndim == 2 and e.shape[1] >= 2 else None
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
        out.append(OutputFigures(name, sqnr_db(e, a), float(diff.max()) if diff.size else 0.0, top1))
    return tuple(out)


@dataclass(frozen=True)
class RuntimeRecord:
    """One runtime at one batch size: ``status`` is ``reference``, ``pass``, ``fail`` (parity), ``not installed``,
    ``timed out``, ``does not load`` or ``fails to run``."""

    runtime: str
    batch: int
    status: str
    versus: str | None = None
    version: str | None = None
    max_abs: float | None = None
    tolerance: str | None = None
    error: str | None = None
    load_seconds: float | None = None
    figures: tuple[OutputFigures, ...] = ()

    @property
    def failed(self) -> bool:
        """A parity failure, or a runtime that is here and cannot load or run the model."""
        return self.status in ("fail", "does not load", "fails to run")

    def to_dict(self) -> dict[str, Any]:
        return {"runtime": self.runtime, "batch": self.batch, "status": self.status, "versus": self.versus,
                "version": self.version, "max_abs": self.max_abs, "tolerance": self.tolerance, "error": self.error,
                "load_seconds": self.load_seconds, "outputs": [f.to_dict() for f in self.figures]}


@dataclass(frozen=True)
class RuntimeReport:
    model: str
    reference: str  # "eager" (the PyTorch SPEC) or the runtime the others are compared with
    batches: tuple[int, ...]
    seed: int
    records: tuple[RuntimeRecord, ...]
    golden: str | None = None
    error: str | None = None  # the reference itself could not run
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exit_code(self) -> ExitCode:
        if self.error is not None:
            return ExitCode.ERROR
        return ExitCode.FINDINGS if any(r.failed for r in self.records) else ExitCode.OK

    @property
    def passed(self) -> bool:
        return self.exit_code == ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": 1, "model": self.model, "reference": self.reference,
                "passed": self.passed, "exit_code": int(self.exit_code), "batches": list(self.batches),
                "seed": self.seed, "golden": self.golden, "error": self.error, "notes": list(self.notes),
                "tolerances": {r: {d: {"atol": a, "rtol": t, "why": w} for d, (a, t, w) in rows.items()}
                               for r, rows in RUNTIME_TOLERANCES.items()},
                "records": [r.to_dict() for r in self.records]}


def _batches(specs: Sequence[InputSpec], batches: Sequence[int] | None) -> list[int]:
    """``batches``, else 1 and 3 (a static batch: its own size only)."""
    from portable.runners.api import _batches as checked

    fixed = {s.static_batch for s in specs if s.shape}
    if batches is None and len(fixed) == 1 and None not in fixed:
        return checked(specs, None)
    return checked(specs, list(batches or DEFAULT_BATCHES))


Outputs = dict[int, list[np.ndarray]]


def _run(runner: Runner, feeds: Mapping[int, dict[str, np.ndarray]]) -> tuple[Outputs, dict[int, str], str | None]:
    """``runner``'s outputs per batch, the batches it failed on (status: message), or why it did not load."""
    from portable.runners.reference_runner import TimedOut

    try:
        runner.load()
    except RunnerFailed as exc:
        return {}, {}, str(exc)
    outputs: Outputs = {}
    failures: dict[int, str] = {}
    try:
        for batch, feed in feeds.items():
            try:
                outputs[batch] = runner.infer(feed)
            except TimedOut as exc:
                failures[batch] = f"timed out|{exc}"
            except RunnerFailed as exc:
                failures[batch] = f"fails to run|{exc}"
    finally:
        runner.unload()
    return outputs, failures, None


@dataclass
class _Plan:
    model: Path
    names: list[str]
    dtypes: list[str]
    feeds: dict[int, dict[str, np.ndarray]]
    table: ToleranceTable
    exact: dict[int, list[np.ndarray]] = field(default_factory=dict)  # eager PyTorch in float64, per batch
    notes: list[str] = field(default_factory=list)
    quantized: bool = False  # a QDQ file (QuantizeLinear / DequantizeLinear nodes)


def _plan(model: str | Path, examples: Sequence[Any] | None, batches: Sequence[int] | None, seed: int,
          dims: Mapping[str, int] | None, int_range: tuple[int, int] | None,
          int_ranges: Mapping[str, tuple[int, int]] | None, table: ToleranceTable | None) -> _Plan:
    from portable.runners.api import IntRanges
    from portable.runners.constraints import constraints_of
    from portable.runners.inputs import dims_from_examples

    path = Path(model)
    if not path.is_file():
        raise InputError("no such model file", path=str(path))
    specs, outs = graph_io(path)
    ints = IntRanges.of(specs, examples, int_range, int_ranges)
    all_dims = {**dims_from_examples(specs, examples), **(dims or {})}
    limits = constraints_of(path)  # what the graph does with each input: the same draw as compare's
    feeds = {b: make_feeds(specs, b, seed=seed, dims=all_dims, int_range=ints.default, int_ranges=ints.per_input,
                           constraints=limits, observed=ints.observed) for b in _batches(specs, batches)}
    return _Plan(path, [o.name for o in outs], [o.dtype for o in outs], feeds, table or ToleranceTable(),
                 quantized=_qdq(path))


def _qdq(path: Path) -> bool:
    """Does the file hold QuantizeLinear or DequantizeLinear nodes (a QDQ file)?"""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in graph.node)


def _records(runtime: str, plan: _Plan, outputs: Outputs, failures: Mapping[int, str], load_error: str | None,
             expected: tuple[str, Outputs], found: str | None, load_seconds: float | None) -> list[RuntimeRecord]:
    from dataclasses import asdict, replace

    def base(batch: int, status: str, **more: Any) -> RuntimeRecord:
        return replace(RuntimeRecord(runtime, batch, status, version=found, load_seconds=load_seconds), **more)

    if load_error is not None:
        return [base(b, "does not load", error=load_error) for b in plan.feeds]
    table = RuntimeTolerances(**asdict(plan.table), runtime=runtime, quantized=plan.quantized)
    records = []
    for batch in plan.feeds:
        if batch in failures:
            status, _, message = failures[batch].partition("|")
            records.append(base(batch, status, error=message))
        elif runtime == expected[0]:
            records.append(base(batch, "reference"))
        elif batch not in expected[1]:  # the reference failed: nothing to compare this runtime with
            records.append(base(batch, "not compared", error=f"{expected[0]} has no outputs at batch {batch}"))
        else:
            pair = compare_outputs((runtime, outputs[batch]), expected[:1] + (expected[1][batch],), plan.names,
                                   plan.dtypes, batch, table, exact=plan.exact.get(batch))
            worst = max((o.stats.max_abs for o in pair.outputs), default=None)
            tolerance = "; ".join(sorted({o.tolerance.describe() for o in pair.outputs}))
            floors = [o.noise for o in pair.outputs if o.judged_by == "noise floor" and o.noise is not None]
            if floors:  # past atol/rtol, within fp32 arithmetic's own error against float64
                worst_floor = max(floors, key=lambda f: f.ratio)
                tolerance += f"; noise floor {worst_floor.ratio:.1f}x fp32's own error (<= {worst_floor.factor:g}x)"
            error = None if pair.passed else "; ".join(pair.problems())[:400]
            records.append(base(batch, "pass" if pair.passed else "fail", versus=expected[0], max_abs=worst,
                                tolerance=tolerance, error=error,
                                figures=output_figures(plan.names, outputs[batch], expected[1][batch])))
    return records


def compare_runtimes(model: str | Path, runtimes: str | Sequence[str] = tuple(RUNTIMES), *,
                     module: Any = None, example_inputs: Sequence[Any] | None = None,
                     batches: Sequence[int] | None = None, seed: int = 0, dims: Mapping[str, int] | None = None,
                     int_range: tuple[int, int] | None = None, int_ranges: Mapping[str, tuple[int, int]] | None = None,
                     tolerances: ToleranceTable | None = None, golden: str | Path | None = None,
                     cap_seconds: float | None = None, progress: Progress | None = None,
                     runner_factory: Callable[..., Runner] = make_runner) -> RuntimeReport:
    """Run ``model`` on each runtime, compare each with ``module`` (PyTorch, eager on the CPU) when given, else with
    the first runtime that runs; with ``golden``, write the inputs and the reference's outputs there as ONNX
    test-data sets (:mod:`portable.runners.golden`)."""
    say = progress or (lambda _msg: None)
    names = parse_runtimes(runtimes)
    plan = _plan(model, example_inputs, batches, seed, dims, int_range, int_ranges, tolerances)
    ran: dict[str, tuple[Outputs, dict[int, str], str | None, str | None, float | None]] = {}
    for runtime in names:
        found = installed(runtime)
        if found is None:
            continue
        say(f"running {runtime}")
        runner = runner_factory(runtime, plan.model, cap_seconds=cap_seconds)
        ran[runtime] = (*_run(runner, plan.feeds), found, runner.load_seconds)
    expected, error = _expected(module, plan, ran, say, example_inputs)
    records: list[RuntimeRecord] = []
    for runtime in names:
        if runtime not in ran:
            how = INSTALL.get(runtime, "make targets-venv")
            records += [RuntimeRecord(runtime, b, "not installed", error=f"package {RUNTIMES[runtime]!r} is not "
                                      f"installed ({how})") for b in plan.feeds]
            continue
        outputs, failures, load_error, found, load_s = ran[runtime]
        records += _records(runtime, plan, outputs, failures, load_error, expected, found, load_s)
    written = None
    if golden is not None and error is None:
        from portable.runners.golden import write_golden

        written = str(write_golden(golden, plan.feeds, expected[1], plan.names))
    # a runtime that does not load or run the model is a finding (exit 1); nothing compared for want of a
    # second runtime (not installed, one asked for) leaves no verdict (exit 3)
    if error is None and not any(r.status == "pass" or r.failed for r in records):
        error = ("nothing was compared: " + "; ".join(sorted({f"{r.runtime} {r.status}" for r in records
                                                               if r.status != "reference"})) or "one runtime alone")
    return RuntimeReport(str(plan.model), expected[0], tuple(plan.feeds), seed, tuple(records), written, error,
                         tuple(plan.notes))


def _expected(module: Any, plan: _Plan, ran: Mapping[str, tuple[Any, ...]], say: Progress,
              examples: Sequence[Any] | None = None) -> tuple[tuple[str, Outputs], str | None]:
    """The side every runtime is compared with: eager PyTorch, else the first runtime that ran every batch."""
    if module is None:
        for runtime, (outputs, failures, load_error, *_rest) in ran.items():
            if load_error is None and not failures:
                return (runtime, outputs), None
        return ("none", {}), "no runtime ran every batch: nothing to compare with"
    from portable.runners.torch_runners import EagerRunner, structured

    say("running eager PyTorch (the reference)")
    eager = EagerRunner(module, "cpu", examples=examples if structured(examples) else None)
    try:
        eager.load()
        outputs = {b: eager.infer(f) for b, f in plan.feeds.items()}
    except Exception as exc:  # noqa: BLE001 - the reference's failure is the report's error (exit 3)
        return ("eager", {}), f"eager PyTorch failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    finally:
        eager.unload()
    _calibrate(module, plan, examples if structured(examples) else None, say)
    return ("eager", outputs), None


def _calibrate(module: Any, plan: _Plan, examples: Sequence[Any] | None, say: Progress) -> None:
    """Eager PyTorch once more in float64 (``plan.exact``): every runtime's float32 outputs are then judged
    against fp32 arithmetic's own error too, as export's verify and ``compare`` judge ONNX Runtime."""
    from portable.runners.torch_runners import float64_outputs

    exact, note = float64_outputs(module, plan.dtypes, plan.table.given, plan.feeds, examples=examples,
                                  judged="each runtime", say=say)
    plan.exact.update(exact)
    plan.notes.append(note)


HEADER = ("runtime", "version", "batch", "status", "versus", "max abs", "per output (SQNR, max abs, top-1)", "tolerance",
          "error")


def _figures_text(record: Mapping[str, Any]) -> str:
    return "; ".join(f"{o['output']}: {o['sqnr_db']:.1f} dB, {o['max_abs']:.3g}"
                     + (f", {o['top1']:.0%}" if o.get("top1") is not None else "") for o in record.get("outputs") or ()) or "-"


def runtime_rows(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    return [(r["runtime"], r["version"] or "-", str(r["batch"]), r["status"], r["versus"] or "-",
             "-" if r["max_abs"] is None else f"{r['max_abs']:.3g}", _figures_text(r), r["tolerance"] or "-",
             r["error"] or "") for r in records]


def render_runtimes(report: RuntimeReport) -> str:
    from portable.runners.render import markdown_table

    lines = [f"# Runtimes: `{report.model}` (reference: {report.reference}, seed {report.seed})", "",
             markdown_table(HEADER, runtime_rows([r.to_dict() for r in report.records]))]
    if report.notes:
        lines += ["", *(f"note: {n}" for n in report.notes)]
    if report.golden:
        lines += ["", f"golden bundle: {report.golden}"]
    if report.error:
        lines += ["", f"error: {report.error}"]
    return "\n".join(lines) + "\n"
