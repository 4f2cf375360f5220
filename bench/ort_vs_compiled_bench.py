"""ONNX Runtime CUDA against compiled PyTorch on one GPU (issue 33): where the time goes, and the table.

Two parts, run on the GPU machine by ``docs/gpu/run_ort_vs_compiled.sh`` (every command it ran is in
``docs/gpu/ortvc/commands.txt``):

    python3 bench/ort_vs_compiled_bench.py profile --onnx M.onnx --reference docs/gpu/models.py:SPEC \\
        --batch 32 [--nhwc] [--fp16] --out DIR/NAME-profile.json
    python3 bench/ort_vs_compiled_bench.py summarize --compares DIR --live DIR/live --decode DIR/textgen-gpu.json \\
        --out docs/gpu/ort-vs-compiled.json

``profile``: one model at one batch, ONNX Runtime's profiler (``enable_profiling``; node events, time summed
per op type and per node) against PyTorch's profiler over ``torch.compile`` (default mode; CUDA kernel
time summed per kernel name), each after a warm-up, 20 calls profiled. The tables are in docs/gpu/ortvc.md.

``summarize``: the rows of ``docs/gpu/ort-vs-compiled.json`` from ``portable compare``'s JSON reports (one
per model and precision, every runner timed round-robin in one process): per model and batch the p50 of
eager, of compiled (default and reduce-overhead), and of every ONNX Runtime runner (the levers: CUDA
graphs, NHWC), the best of each side and their ratio, and whether parity passed; the decode step from
``docs/gpu/textgen_gpu.py``'s JSON; and the live ort-cuda answers (``validate --target ort-cuda --live``
JSON reports) with their disagreements.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

TOP = 12  # rows per side in a profile table


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    profile = sub.add_parser("profile")
    profile.add_argument("--onnx", required=True)
    profile.add_argument("--reference", required=True, help="FILE.py:FUNCTION returning (module, example inputs)")
    profile.add_argument("--batch", type=int, default=32)
    profile.add_argument("--nhwc", action="store_true", help="the CUDA provider with prefer_nhwc=1")
    profile.add_argument("--calls", type=int, default=20)
    profile.add_argument("--out", required=True)
    levers = sub.add_parser("levers")
    levers.add_argument("--onnx", required=True)
    levers.add_argument("--reference", required=True)
    levers.add_argument("--kind", choices=sorted(LEVERS), required=True)
    levers.add_argument("--batch", type=int, default=32)
    levers.add_argument("--seconds", type=float, default=1.0)
    levers.add_argument("--also", action="append", default=[], metavar="NAME=FILE",
                        help="another file of the same model, run as ort-cuda-graph under NAME (e.g. torch.onnx's own)")
    levers.add_argument("--out", required=True)
    summary = sub.add_parser("summarize")
    summary.add_argument("--compares", required=True, help="folder of compare JSON reports (MODEL-PRECISION.json)")
    summary.add_argument("--live", default=None, help="folder of validate --live JSON reports")
    summary.add_argument("--decode", default=None, help="textgen_gpu.py's JSON")
    summary.add_argument("--levers", action="append", default=[], help="folder of levers JSON (repeatable)")
    summary.add_argument("--profiles", default=None, help="folder of profile JSON")
    summary.add_argument("--versions", default=None,
                         help="take date and versions from this earlier summary (one made on the GPU machine)")
    summary.add_argument("--out", required=True)
    return parser.parse_args()


# --- profile -------------------------------------------------------------------------------------------------


def _reference(spec: str) -> Any:
    """The SPEC's module (``portable.spec``, as compare's ``--reference`` reads it), in eval mode."""
    from portable.spec import load_spec

    return load_spec(spec).module.eval()


def _ort_profile(onnx: str, feeds: dict[str, Any], nhwc: bool, calls: int, folder: Path) -> dict[str, Any]:
    """ONNX Runtime's own profiler (node events of the last ``calls`` runs, after a warm-up that includes
    cuDNN's algorithm search) and, over the same runs, the CUDA kernels CUPTI saw (PyTorch's profiler records
    every kernel of the process, ONNX Runtime's too): the CUDA provider's node times are the host's time in
    each kernel's ``Compute`` (the launch: its kernels run asynchronously), so only CUPTI's are device time."""
    from portable.runners.ort_runner import CUDA, bind_io, provider_options
    from portable.runners.sessions import SessionSpec, session_from_onnx

    spec = SessionSpec(CUDA, provider_options(CUDA, tf32=False, nhwc=nhwc), profile_prefix=str(folder / "ort"))
    session = session_from_onnx(onnx, spec)
    binding = bind_io(session, feeds, "cuda")
    for _ in range(10):  # warm-up: cuDNN's algorithm search, the arena
        session.run_with_iobinding(binding)
    binding.synchronize_outputs()
    start = time.perf_counter()
    kernels = _cupti(lambda: [session.run_with_iobinding(binding) for _ in range(calls)], calls)
    wall = (time.perf_counter() - start) / calls
    events = json.loads(Path(session.end_profiling()).read_text())
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])[-calls:]
    since = runs[0]["ts"] if runs else 0
    nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")
             and e["ts"] >= since]
    return {"wall_ms_per_call": wall * 1e3, "providers": session.get_providers(), "nodes": nodes,
            "cupti": kernels}


def _cupti(work: Callable[[], object], calls: int) -> dict[str, Any]:
    """CUDA kernel time per kernel name over ``work`` (PyTorch's profiler, CUPTI underneath)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        work()
        torch.cuda.synchronize()
    per_kernel: Counter[str] = Counter()
    for event in prof.key_averages():
        cuda_us = getattr(event, "device_time_total", 0) or getattr(event, "cuda_time_total", 0)
        if cuda_us and event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[event.key[:120]] += cuda_us
    total = sum(per_kernel.values())
    return {"kernel_ms_per_call": round(total / 1e3 / calls, 3), "top_kernels": _rows(per_kernel, total, calls)}


def _ort_table(profiled: dict[str, Any], calls: int) -> dict[str, Any]:
    """Host time per op type (ms per call) and the costliest nodes, from the profile's node events; CUPTI's
    device time per kernel beside them."""
    head, kernels = profiled, profiled["nodes"]
    per_op: Counter[str] = Counter()
    per_node: Counter[str] = Counter()
    for event in kernels:
        per_op[event.get("args", {}).get("op_name", "?")] += event["dur"]
        per_node[event["name"].removesuffix("_kernel_time")] += event["dur"]
    total = sum(per_op.values())
    return {"wall_ms_per_call": round(head["wall_ms_per_call"], 3), "providers": head["providers"],
            "node_host_ms_per_call": round(total / 1e3 / calls, 3), "by_op_host": _rows(per_op, total, calls),
            "top_nodes_host": _rows(per_node, total, calls), "cupti": head["cupti"]}


def _rows(counter: Counter[str], total: float, calls: int) -> list[dict[str, Any]]:
    return [{"name": name, "ms_per_call": round(us / 1e3 / calls, 4), "share": round(us / total, 4) if total else 0.0}
            for name, us in counter.most_common(TOP)]


def _torch_profile(module: Any, example: tuple[Any, ...], calls: int) -> dict[str, Any]:
    """CUPTI's CUDA kernel time per kernel name over the compiled module (``torch.compile``, default mode)."""
    import torch

    compiled = torch.compile(module)
    with torch.no_grad():
        for _ in range(10):
            compiled(*example)
        torch.cuda.synchronize()
        start = time.perf_counter()
        kernels = _cupti(lambda: [compiled(*example) for _ in range(calls)], calls)
        wall = (time.perf_counter() - start) / calls
    return {"wall_ms_per_call_profiled": round(wall * 1e3, 3), **kernels}


def profile_command(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    import torch

    from portable.runners.inputs import graph_io, make_feeds

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    module = _reference(args.reference)
    specs, _ = graph_io(args.onnx)
    feeds = make_feeds(specs, args.batch, int_range=(0, 30000))
    with tempfile.TemporaryDirectory() as folder:
        ort_events = _ort_profile(args.onnx, feeds, args.nhwc, args.calls, Path(folder))
    dtype = next((p.dtype for p in module.parameters()), torch.float32)
    inputs = tuple(torch.from_numpy(feeds[s.name]).to("cuda", dtype if feeds[s.name].dtype.kind == "f" else None)
                   for s in specs)
    torch_side = _torch_profile(module.to("cuda"), inputs, args.calls)
    return {"model": args.onnx, "batch": args.batch, "nhwc": args.nhwc, "calls": args.calls,
            "onnxruntime": _ort_table(ort_events, args.calls), "torch_compiled": torch_side}


# --- levers ----------------------------------------------------------------------------------------------------

# The CUDA provider's options tried one at a time, beside compiled PyTorch (reduce-overhead) in one process, all
# timed round-robin: (runner name, provider options over portable's defaults, CUDA graphs, file rewrite).
# "ort-transformers" is ONNX Runtime's own offline fusion tool (onnxruntime.transformers.optimizer): its output
# uses com.microsoft ops (Attention, SkipLayerNormalization, BiasGelu), so it is not a portable file; it is
# timed to state what the contract costs.
LEVERS: dict[str, tuple[tuple[str, dict[str, str], bool, str], ...]] = {
    "conv": (("ort-cuda-graph", {}, True, ""), ("ort-cuda-graph-nhwc", {"prefer_nhwc": "1"}, True, ""),
             ("ort-cuda-graph-fuse-bias", {"fuse_conv_bias": "1"}, True, ""),
             ("ort-cuda-graph-nhwc-fuse-bias", {"prefer_nhwc": "1", "fuse_conv_bias": "1"}, True, ""),
             ("ort-cuda-graph-heuristic", {"cudnn_conv_algo_search": "HEURISTIC"}, True, ""),
             ("ort-cuda-graph-small-workspace", {"cudnn_conv_use_max_workspace": "0"}, True, "")),
    "bert": (("ort-cuda-graph", {}, True, ""), ("ort-cuda", {}, False, ""),
             ("ort-cuda-graph-transformers", {}, True, "transformers")),
}


def _rewritten(onnx: str, rewrite: str, folder: Path) -> str:
    """The file a lever runs: the file itself, or ONNX Runtime's transformer fusions of it (BERT-base's
    12 heads, hidden 768), saved beside."""
    if not rewrite:
        return onnx
    from onnxruntime.transformers import optimizer

    fused = optimizer.optimize_model(onnx, model_type="bert", num_heads=12, hidden_size=768, opt_level=0)
    path = folder / "fused.onnx"
    fused.save_model_to_file(str(path))
    return str(path)


def _ort_step(onnx: str, options: dict[str, str], graph: bool, feeds: dict[str, Any]) -> Callable[[], object]:
    from portable.runners.ort_runner import CUDA, StaticBinding, bind_io, provider_options
    from portable.runners.sessions import SessionSpec, session_from_onnx

    spec = SessionSpec(CUDA, provider_options(CUDA, tf32=False, cuda_graph=graph) | options)
    session = session_from_onnx(onnx, spec)
    if graph:
        bound = StaticBinding(session, feeds, "cuda", 1)
        return lambda: bound.run(session)
    binding = bind_io(session, feeds, "cuda")
    return lambda: session.run_with_iobinding(binding)


def levers_command(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    import torch

    from portable.runners.inputs import graph_io, make_feeds
    from portable.runners.stats import LatencyStats
    from portable.runners.timing import HostTimer, Timed, TimingConfig, interleave, warm_up

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    module = _reference(args.reference).to("cuda")
    specs, _ = graph_io(args.onnx)
    feeds = make_feeds(specs, args.batch, int_range=(0, 30000))
    dtype = next((p.dtype for p in module.parameters()), torch.float32)
    inputs = tuple(torch.from_numpy(feeds[s.name]).to("cuda", dtype if feeds[s.name].dtype.kind == "f" else None)
                   for s in specs)
    compiled = torch.compile(module, mode="reduce-overhead")
    steps: dict[str, Callable[[], object]] = {"compiled-reduce-overhead": lambda: compiled(*inputs)}
    errors: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, options, graph, rewrite in LEVERS[args.kind]:
            try:
                steps[name] = _ort_step(_rewritten(args.onnx, rewrite, Path(folder)), options, graph, feeds)
                steps[name]()
            except Exception as exc:  # noqa: BLE001 - a lever ONNX Runtime refuses is a finding
                steps.pop(name, None)
                errors[name] = " ".join(str(exc).split())[:400]
        for name, path in (a.split("=", 1) for a in args.also):
            steps[name] = _ort_step(path, {}, True, feeds)
        timer = HostTimer(torch.cuda.synchronize)
        config = TimingConfig(min_seconds=args.seconds, warmup_max_seconds=8.0)
        entries = [Timed(name, step, timer, timer) for name, step in steps.items()]
        with torch.no_grad():
            warm = {e.name: warm_up(e.step, timer, config) for e in entries}
            measured = interleave(entries, warm, config)
    p50 = {m.name: round(LatencyStats.from_samples(m.samples, args.batch).to_dict()["p50_s"] * 1e3, 4) for m in measured}
    return {"model": args.onnx, "batch": args.batch, "kind": args.kind, "p50_ms": p50, "errors": errors,
            "levers": {n: {"options": o, "cuda_graph": g, "rewrite": r or None} for n, o, g, r in LEVERS[args.kind]},
            "also": dict(a.split("=", 1) for a in args.also)}


# --- summarize -----------------------------------------------------------------------------------------------

ORT_PREFIX = "ort-cuda"
COMPILED = ("compiled", "compiled-reduce-overhead")


def _p50(report: dict[str, Any], runner: str, batch: int) -> float | None:
    for row in report.get("latency") or ():
        if row["runner"] == runner and row["batch"] == batch:
            return round(row["p50_s"] * 1e3, 4)
    return None


def _parity(report: dict[str, Any], batch: int) -> bool:
    """Every ONNX Runtime runner against the PyTorch reference at this batch passed."""
    rows = [p for p in report.get("parity") or () if p["batch"] == batch and p["actual"].startswith("ort-")]
    return bool(rows) and all(p["passed"] for p in rows)


def _best(figures: dict[str, float | None], names: Iterable[str]) -> tuple[str | None, float | None]:
    found = [(v, n) for n, v in figures.items() if n in set(names) and v is not None]
    return (min(found)[1], min(found)[0]) if found else (None, None)


def _row(model: str, precision: str, report: dict[str, Any], batch: int) -> dict[str, Any]:
    runners = sorted({r["runner"] for r in report.get("latency") or ()})
    figures = {r: _p50(report, r, batch) for r in runners}
    ort_name, ort = _best(figures, [r for r in runners if r.startswith(ORT_PREFIX)])
    compiled_name, compiled = _best(figures, COMPILED)
    return {"model": model, "batch": batch, "precision": precision, "ort_p50_ms": ort, "ort_runner": ort_name,
            "compiled_p50_ms": compiled, "compiled_runner": compiled_name, "eager_p50_ms": figures.get("eager"),
            "ratio_ort_to_compiled": round(ort / compiled, 3) if ort and compiled else None,
            "parity_passed": _parity(report, batch), "p50_ms": figures,
            "compare_passed": report.get("passed"), "exit_code": report.get("exit_code")}


def _rows_of(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(folder.glob("*.json")):
        model, _, precision = path.stem.rpartition("-")
        report = json.loads(path.read_text())
        if report.get("schema", "").endswith("compare") or "latency" in report:
            rows.extend(_row(model, precision, report, b) for b in report["setup"]["batches"])
    return rows


def _live(folder: Path | None) -> dict[str, Any]:
    """The live ort-cuda answers of ``validate --target ort-cuda --live --format json`` reports."""
    if folder is None or not folder.is_dir():
        return {"models": [], "disagreements": None}
    models, disagreeing = [], 0
    for path in sorted(folder.glob("*.json")):
        reports = json.loads(path.read_text()).get("reports") or ()
        for target in (t for r in reports for t in r.get("targets") or ()):
            live = target.get("live") or {}
            if target.get("name") == "ort-cuda" and live:
                differ = live.get("disagreements", "not compared")
                disagreeing += 0 if differ == "0" else 1
                models.append({"model": path.stem, "verdict": live.get("verdict"), "disagreements": differ,
                               "offline_unsupported": target.get("unsupported")})
    return {"models": models, "checked": len(models), "disagreements": disagreeing}


def _decode(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    steps = json.loads(path.read_text()).get("steps", {})
    ms: Callable[[str], float | None] = lambda k: round(steps[k]["p50_s"] * 1e3, 4) if k in steps else None  # noqa: E731
    ort = [v for v in (ms("ort-cuda decode"), ms("ort-cuda-graph decode")) if v is not None]
    return {"ort_p50_ms": min(ort) if ort else None, "compiled_p50_ms": ms("torch-compiled (reduce-overhead) decode"),
            "p50_ms": {k: ms(k) for k in steps}, "source": str(path)}


def _versions(earlier: str | None) -> dict[str, Any]:
    if earlier:
        made = json.loads(Path(earlier).read_text())
        return {"date": made["date"], "versions": made["versions"]}
    import onnxruntime
    import torch

    return {"date": time.strftime("%Y-%m-%d"), "versions": {
        "python": platform.python_version(), "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}}


def _folder(path: str | None, pattern: str = "*.json") -> dict[str, Any]:
    """Every JSON of a folder, by file stem."""
    if not path or not Path(path).is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(Path(path).glob(pattern))}


def summarize_command(args: argparse.Namespace) -> dict[str, Any]:
    levers: dict[str, Any] = {}
    for folder in args.levers:
        levers.update(_folder(folder))
    return {**_versions(args.versions), "rows": _rows_of(Path(args.compares)),
            "decode": _decode(Path(args.decode) if args.decode else None),
            "ort_cuda_live": _live(Path(args.live) if args.live else None),
            "levers": {name: {"p50_ms": v["p50_ms"], "errors": v["errors"], "batch": v["batch"],
                              "also": v.get("also", {})} for name, v in levers.items()},
            "profiles": _folder(args.profiles)}


def main() -> int:
    args = _args()
    commands = {"profile": profile_command, "levers": levers_command, "summarize": summarize_command}
    result = commands[args.command](args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1)[:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
