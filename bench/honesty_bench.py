"""Runner honesty: each runner's latency as portable measures it (steady warm-up, round-robin
blocks) against ``torch.utils.benchmark.Timer.blocked_autorange`` on the same prepared step, in
the same process, with the runner order as given and reversed.

The two are taken in ``--slices`` alternations (portable's timing of all runners, then
``blocked_autorange`` of each, the order reversed in every other slice), and each order's ratio
is the median of its slices' portable figures over the median of the ``blocked_autorange``
figures taken right after them. Taking them minutes apart is not a fair test on a machine
whose speed drifts (docs/gpu/timing/: the H200 host's launch-bound batch-1 runs switch between
two speeds over seconds). The GPU's SM clock (NVML) is recorded beside each slice.

Runners: eager, compiled (``torch.compile`` default mode) and, given ``--onnx``, ONNX Runtime on
each of ``--providers`` (``cuda``, ``cuda-graph``, ``cpu``), per numerics mode (strict fp32: TF32
off in PyTorch and ``use_tf32=0`` in the CUDA provider; tf32: allowed on both) and batch size.
portable's figure compared is the back-to-back time per call (blocks of calls synchronised once),
which is what ``blocked_autorange`` measures; the synchronous per-request p50 is printed beside.
Goal (issue 12): |portable / torch.utils.benchmark - 1| <= 5 % for every runner, in both orders,
on a GPU. Without CUDA it runs on the CPU and says so.

Usage: ``python bench/honesty_bench.py [--model resnet50|cnn] [--onnx rn50.onnx] [--batch 1,32]
[--tf32 off,on] [--providers cuda,cuda-graph] [--slices 4] [--min-run-time 1.0]``
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.05  # |portable / torch.utils.benchmark - 1|


def _module(name: str) -> tuple[Any, Any]:
    import torch

    if name == "resnet50":
        import torchvision

        torch.manual_seed(0)
        return torchvision.models.resnet50().eval(), (3, 224, 224)
    spec = importlib.util.spec_from_file_location("bench_runner_models", ROOT / "tests" / "runners" / "runner_models.py")
    models = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(models)  # type: ignore[union-attr]
    module, (example,) = getattr(models, name)()
    return module, tuple(example.shape[1:])


def _runners(module: Any, onnx: str | None, providers: list[str], device: str, tf32: bool) -> list[Any]:
    from portable.runners.ort_runner import resolve_eps
    from portable.runners.torch_runners import CompiledRunner, EagerRunner

    runners: list[Any] = [EagerRunner(module, device), CompiledRunner(module, device, "default")]
    if onnx:
        from portable.runners.ort_runner import OnnxRuntimeRunner

        runners += [OnnxRuntimeRunner(onnx, e.provider, tf32=tf32, cuda_graph=e.cuda_graph)
                    for e in resolve_eps(",".join(providers))]
    for runner in runners:
        runner.load()
    return runners


def _theirs(step: Any, min_run_time: float = 1.0) -> float:
    """blocked_autorange's median per call; its clock synchronises CUDA (the whole device, so ONNX
    Runtime's stream too) at each block's ends, as portable's back-to-back blocks do. Its thread
    pool is the process's (Timer's default, 1 thread, would time another configuration)."""
    import torch
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def _entries(runners: list[Any], feeds: dict[str, Any]) -> list[Any]:
    from portable.runners.timing import CudaEventTimer, HostTimer, Timed

    entries = []
    for runner in runners:
        runner.infer(feeds)  # compile / capture / cuDNN search before anything is timed
        step = runner.prepare(feeds)
        timer = CudaEventTimer() if runner.uses_cuda and runner.kind != "onnxruntime" else HostTimer(runner.synchronize)
        entries.append(Timed(runner.name, step, timer, HostTimer(runner.synchronize)))
    return entries


def _timed(entries: list[Any], config: Any) -> dict[str, tuple[float, float, dict[str, Any]]]:
    """Warm each up, then interleave; name -> (back-to-back s, synchronous p50 s, warm-up)."""
    from portable.runners.timing import interleave, warm_up

    warm = {e.name: warm_up(e.step, e.timer, config) for e in entries}
    return {m.name: (statistics.median(m.pipelined), statistics.median(m.samples), warm[m.name].to_dict())
            for m in interleave(entries, warm, config)}


def _slices(entries: list[Any], config: Any, slices: int, min_run_time: float) -> list[dict[str, Any]]:
    """``slices`` alternations of portable's timing and ``blocked_autorange``, the runner order as given
    in even slices and reversed in odd ones: each portable figure is compared with the
    ``blocked_autorange`` figure taken right after it, so a machine whose speed drifts over seconds
    (GPU clocks, host load: docs/gpu/timing/) biases neither side."""
    out = []
    for index in range(slices):
        order = entries if index % 2 == 0 else entries[::-1]
        host = [_host_us()]
        ours = _timed(order, config)
        clock = _sm_clock_mhz()
        host.append(_host_us())
        theirs = {e.name: _theirs(e.step, min_run_time) for e in order}
        host.append(_host_us())
        out.append({"order": "given" if index % 2 == 0 else "reversed", "ours": ours, "theirs": theirs,
                    "sm_clock_mhz": [clock, _sm_clock_mhz()], "host_us": host})
    return out


def _host_us() -> float:
    """The host CPU's speed now: microseconds of a fixed piece of pure-Python work (best of 5). On the
    lent H200 (a VM) it reads 265-270 us or 430-450 us, switching over seconds, and batch 1's
    launch-bound PyTorch calls move with it (docs/gpu/timing/host_probe.py)."""
    import time

    def once() -> float:
        start = time.perf_counter()
        sum(range(20000))
        return time.perf_counter() - start
    return round(min(once() for _ in range(5)) * 1e6, 1)


def _steady(slice_: dict[str, Any]) -> bool:
    """Did the host keep one speed through the slice (its readings within 5 % of each other)?"""
    return max(slice_["host_us"]) <= (1 + GOAL) * min(slice_["host_us"])


def _sm_clock_mhz() -> int | None:
    """The GPU's SM clock now (NVML), or None without it: the state a reading was taken in."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - a diagnostic only
        return None


def _met(*ratios: float | None) -> bool | None:
    """Within the goal in both orders; None when an order had no slice to judge by."""
    if any(r is None for r in ratios):
        return None
    return all(abs(r - 1) <= GOAL for r in ratios if r is not None)


@contextlib.contextmanager
def _pinned(cpu: int | None) -> Iterator[None]:
    """The calling thread (the one that launches work) held on one CPU while timing, or left as it is.
    Pinned after compiling: inductor's compile workers, started from this thread, would inherit it."""
    if cpu is None:
        yield
        return
    saved = os.sched_getaffinity(0)  # pid 0: on Linux, the calling thread
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


def _ratio(name: str, picked: list[dict[str, Any]]) -> float | None:
    if not picked:
        return None
    ours = statistics.median(s["ours"][name][0] for s in picked)
    return round(ours / statistics.median(s["theirs"][name] for s in picked), 4)


def _row(name: str, slices: list[dict[str, Any]], order: str) -> dict[str, Any]:
    picked = [s for s in slices if s["order"] == order]
    ours = statistics.median(s["ours"][name][0] for s in picked)
    theirs = statistics.median(s["theirs"][name] for s in picked)
    steady = [s for s in picked if _steady(s)]
    return {"ours_ms": round(ours * 1e3, 4), "theirs_ms": round(theirs * 1e3, 4), "ratio": round(ours / theirs, 4),
            "steady_host_slices": len(steady), "ratio_steady_host": _ratio(name, steady),
            "host_us": [s["host_us"] for s in picked],
            "slices_ms": [[round(s["ours"][name][0] * 1e3, 4), round(s["theirs"][name] * 1e3, 4)] for s in picked],
            "p50_ms": round(statistics.median(s["ours"][name][1] for s in picked) * 1e3, 4),
            "warmup": [s["ours"][name][2] for s in picked]}


def one(module: Any, shape: tuple[int, ...], batch: int, tf32: bool, args: argparse.Namespace,
        device: str) -> list[dict[str, Any]]:
    import numpy as np

    from portable.runners.timing import TimingConfig
    from portable.runners.torch_runners import tf32_mode

    config = TimingConfig(min_seconds=args.min_seconds)
    feeds = {"x": np.random.default_rng([0, batch]).standard_normal((batch, *shape), dtype=np.float32)}
    with tf32_mode(tf32):
        runners = _runners(module, args.onnx, [p for p in args.providers.split(",") if p], device, tf32)
        if args.onnx:
            import onnxruntime as ort

            name = ort.InferenceSession(args.onnx, providers=["CPUExecutionProvider"]).get_inputs()[0].name
            feeds = {name: feeds["x"]}
        entries = _entries(runners, feeds)
        with _pinned(args.pin_cpu):
            slices = _slices(entries, config, args.slices, args.min_run_time)
        for runner in runners:
            runner.unload()
    rows = []
    for e in entries:
        given, reversed_ = _row(e.name, slices, "given"), _row(e.name, slices, "reversed")
        rows.append({"runner": e.name, "batch": batch, "numerics": "tf32" if tf32 else "strict-fp32",
                     "given_order": given, "reversed_order": reversed_,
                     "ratio": given["ratio"], "ratio_reversed": reversed_["ratio"],
                     "ratio_steady_host": given["ratio_steady_host"],
                     "ratio_reversed_steady_host": reversed_["ratio_steady_host"],
                     "met_steady_host": _met(given["ratio_steady_host"], reversed_["ratio_steady_host"]),
                     "sm_clock_mhz": [s["sm_clock_mhz"] for s in slices], "pin_cpu": args.pin_cpu,
                     "met": abs(given["ratio"] - 1) <= GOAL and abs(reversed_["ratio"] - 1) <= GOAL})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--onnx", default=None, help="the model's ONNX export (adds the ONNX Runtime runners)")
    parser.add_argument("--providers", default="cpu")
    parser.add_argument("--batch", default="8")
    parser.add_argument("--tf32", default="off", help="numerics modes: off (strict fp32), on, or off,on")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="timed seconds per runner and order")
    parser.add_argument("--slices", type=int, default=4, help="alternations of portable and blocked_autorange (half reversed)")
    parser.add_argument("--min-run-time", type=float, default=1.0, help="blocked_autorange's min_run_time per slice")
    parser.add_argument("--pin-cpu", type=int, default=None,
                        help="hold the timing thread on this CPU (after compiling): host scheduling out of the figures")
    parser.add_argument("--jsonl", default=None, help="also append each row to this file as it is measured")
    args = parser.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    module, shape = _module(args.model)
    results = []
    for tf32 in args.tf32.split(","):
        for batch in args.batch.split(","):
            rows = one(module, shape, int(batch), tf32 == "on", args, device)
            results += rows
            if args.jsonl:  # what was measured survives a time limit
                with open(args.jsonl, "a", encoding="utf-8") as handle:
                    handle.writelines(json.dumps(r) + "\n" for r in rows)
    met = all(r["met"] for r in results) if device == "cuda" else None  # the goal is for a GPU
    print(json.dumps({"benchmark": "honesty", "goal": f"|ratio - 1| <= {GOAL} on a GPU, both orders",
                      "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None, "model": args.model,
                      "torch": torch.__version__, "results": results, "met": met}, indent=2))


if __name__ == "__main__":
    main()
