"""Diagnostics for issue 12's two unmet honesty rows, on ResNet-50 (torchvision, random weights), CUDA.

1. ``trajectory``: from a fresh process, per-call time of 50 ms blocks of synchronous calls for
   ``--seconds`` s: eager b1, then compiled b1 (after its compile), TF32 off. How long until steady?
2. ``methods``: compiled, TF32 on, b32: the same step timed back-to-back by a plain loop, by portable's
   HostTimer blocks, by ``blocked_autorange`` (as the honesty bench calls it, and with gc enabled), and
   by CUDA events, alternating, three times. Prints JSON.

    python3 docs/gpu/timing/probe.py [--seconds 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

sys.path.insert(0, "/tmp/shim")


def _module():
    import torch
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet50().eval().cuda()


def _steps(module, batch: int, compiled: bool):
    import torch

    x = torch.randn(batch, 3, 224, 224, device="cuda")
    fn = torch.compile(module) if compiled else module

    def step():
        with torch.no_grad():
            return fn(x)
    return step


def trajectory(step, seconds: float) -> list[list[float]]:
    import torch

    out, begin = [], time.perf_counter()
    while time.perf_counter() - begin < seconds:
        block_start, times = time.perf_counter(), []
        while time.perf_counter() - block_start < 0.05:
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        out.append([round(time.perf_counter() - begin, 3), round(statistics.median(times) * 1e3, 4), len(times)])
    return out


def methods(step, calls: int = 40) -> dict[str, list[float]]:
    import gc

    import torch
    from torch.utils.benchmark import Timer

    from portable.runners.timing import HostTimer

    host = HostTimer(torch.cuda.synchronize)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def loop() -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / calls

    def events() -> float:
        start.record()
        for _ in range(calls):
            step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls

    def autorange(setup: str = "pass") -> float:
        timer = Timer(stmt="step()", setup=setup, globals={"step": step}, num_threads=torch.get_num_threads())
        m = timer.blocked_autorange(min_run_time=1.0)
        return float(m.median)

    found: dict[str, list[float]] = {k: [] for k in ("loop", "portable_host_blocks", "events", "blocked_autorange",
                                                      "blocked_autorange_gc_on", "blocked_autorange_raw_times")}
    for _ in range(3):
        found["loop"].append(statistics.median(loop() for _ in range(5)))
        found["portable_host_blocks"].append(statistics.median(host.time(step, calls) / calls for _ in range(5)))
        found["events"].append(statistics.median(events() for _ in range(5)))
        found["blocked_autorange"].append(autorange())
        found["blocked_autorange_gc_on"].append(autorange("import gc\ngc.enable()"))
        timer = Timer(stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads())
        m = timer.blocked_autorange(min_run_time=1.0)
        found["blocked_autorange_raw_times"].append([round(t * 1e3, 4) for t in m.times][:40] + [m.number_per_run])
        gc.collect()
    return {k: [round(v * 1e3, 4) if isinstance(v, float) else v for v in vs] for k, vs in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=12.0)
    args = parser.parse_args()
    import torch

    module = _module()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    result: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    result["eager_b1_strict_trajectory"] = trajectory(_steps(module, 1, False), args.seconds)
    compiled = _steps(module, 1, True)
    t = time.perf_counter()
    compiled()
    torch.cuda.synchronize()
    result["compile_b1_s"] = round(time.perf_counter() - t, 1)
    result["compiled_b1_strict_trajectory"] = trajectory(compiled, args.seconds)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    step32 = _steps(module, 32, True)
    step32()
    torch.cuda.synchronize()
    trajectory(step32, 2.0)
    result["compiled_b32_tf32_methods_ms"] = methods(step32)
    eager32 = _steps(module, 32, False)
    trajectory(eager32, 1.0)
    result["eager_b32_tf32_methods_ms"] = methods(eager32)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
