"""Where do batch 1's two speeds come from? (issue 12; ResNet-50, torchvision, random weights, strict fp32)

For ``--seconds`` s each, 50 ms blocks of synchronous calls of
- ``eager``: eager ResNet-50 at batch 1 (launch-bound: about 160 kernel launches a call);
- ``graph``: the same forward captured once in a CUDA graph and replayed (one launch: GPU time alone);
and per block the CPU the process last ran on (``/proc/thread-self/stat``), that CPU's clock when
cpufreq shows it, and the time of a fixed piece of pure-Python work (``host``: the CPU alone).
If the slow blocks of ``eager`` come with slow ``host`` work while ``graph`` stays steady, the
two speeds are the host's; if they follow CPU changes, pinning the process (``taskset -c N``)
removes them. Prints one JSON object.

    python3 docs/gpu/timing/host_probe.py [--seconds 8]          # run it unpinned and under taskset
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def _cpu() -> int:
    fields = Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[36])  # field 39 of proc(5), counted after "pid (comm)"


def _khz(cpu: int) -> int | None:
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq")
    return int(path.read_text()) if path.exists() else None


def _host_work() -> float:
    t = time.perf_counter()
    sum(range(20000))
    return time.perf_counter() - t


def blocks(step, sync, seconds: float) -> list[dict]:
    out, begin = [], time.perf_counter()
    while time.perf_counter() - begin < seconds:
        start, times = time.perf_counter(), []
        while time.perf_counter() - start < 0.05:
            t = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - t)
        cpu = _cpu()
        out.append({"t": round(time.perf_counter() - begin, 3), "ms": round(statistics.median(times) * 1e3, 4),
                    "cpu": cpu, "khz": _khz(cpu),
                    "host_us": round(min(_host_work() for _ in range(3)) * 1e6, 1)})
    return out


def summary(rows: list[dict]) -> dict:
    ms = sorted(r["ms"] for r in rows)
    fast = ms[0]
    slow = [r for r in rows if r["ms"] > 1.25 * fast]
    quick = [r for r in rows if r["ms"] <= 1.25 * fast]
    host = lambda rs: round(statistics.median(r["host_us"] for r in rs), 1) if rs else None  # noqa: E731
    return {"blocks": len(rows), "fastest_ms": fast, "p10_ms": ms[len(ms) // 10], "median_ms": statistics.median(ms),
            "p90_ms": ms[len(ms) * 9 // 10], "slow_fraction": round(len(slow) / len(rows), 3),
            "cpus_seen": sorted({r["cpu"] for r in rows}), "cpu_changes": sum(
                a["cpu"] != b["cpu"] for a, b in zip(rows, rows[1:])),
            "host_us_median_fast_blocks": host(quick), "host_us_median_slow_blocks": host(slow)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    import torch
    import torchvision

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    module = torchvision.models.resnet50().eval().cuda()
    x = torch.randn(1, 3, 224, 224, device="cuda")
    torch.set_grad_enabled(False)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            module(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        module(x)
    sync = torch.cuda.synchronize
    result: dict = {"affinity": sorted(os.sched_getaffinity(0)), "loadavg_before": Path("/proc/loadavg").read_text().split()[:3]}
    eager = blocks(lambda: module(x), sync, args.seconds)
    replay = blocks(graph.replay, sync, args.seconds / 2)
    result["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    result["eager"], result["graph"] = summary(eager), summary(replay)
    result["eager_blocks"], result["graph_blocks"] = eager, replay
    print(json.dumps(result))


if __name__ == "__main__":
    main()
