"""Runner honesty: `compare`'s latency for the compiled model vs torch.utils.benchmark on the same call.

For each model, the same prepared step (``CompiledRunner.prepare``: the compiled module on
fixed device tensors) is timed, interleaved, by portable's latency phase and by
``torch.utils.benchmark.Timer.blocked_autorange(min_run_time=1)``. portable reports two
figures: the synchronous per-request latency (``measure``: CUDA events around each call, 200 ms
warm-up, >= 10 iterations, >= 1 s) and the back-to-back time per call (``measure_pipelined``:
blocks of calls synchronised once), which is what ``blocked_autorange`` measures. Goal (issue
7): within 5 % on a GPU. On a machine without CUDA it still runs, on the CPU, and says so.

Usage: ``python bench/honesty_bench.py [--models cnn,resnet50] [--batch 32] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.05  # |portable / torch.utils.benchmark - 1|


def _module(name: str, batch: int) -> tuple[Any, Any]:
    import torch

    if name == "resnet50":
        import torchvision

        torch.manual_seed(0)
        return torchvision.models.resnet50().eval(), torch.randn(batch, 3, 224, 224)
    spec = importlib.util.spec_from_file_location("bench_runner_models", ROOT / "tests" / "runners" / "runner_models.py")
    models = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(models)  # type: ignore[union-attr]
    module, (example,) = getattr(models, name)()
    return module, example.repeat(batch // example.shape[0] or 1, *([1] * (example.dim() - 1)))[:batch]


def _portable_medians(step: Any, device: str, synchronize: Any) -> tuple[float, float]:
    """(synchronous p50, back-to-back per call), as compare's latency phase takes them."""
    from portable.runners.timing import CudaEventTimer, HostTimer, TimingConfig, measure, measure_pipelined

    timer = CudaEventTimer() if device == "cuda" else HostTimer(synchronize)
    single = statistics.median(measure(step, timer, TimingConfig()))
    return single, statistics.median(measure_pipelined(step, HostTimer(synchronize), single))


def _torch_median(step: Any) -> float:
    from torch.utils.benchmark import Timer

    return Timer(stmt="step()", globals={"step": step}).blocked_autorange(min_run_time=1.0).median


def one(name: str, batch: int, rounds: int, device: str) -> dict[str, Any]:
    from portable.runners.torch_runners import CompiledRunner

    module, example = _module(name, batch)
    runner = CompiledRunner(module, device)
    runner.load()
    feeds = {"x": example.numpy()}
    runner.infer(feeds)  # compile
    step = runner.prepare(feeds)
    single, pipelined, theirs = [], [], []
    for _ in range(rounds):  # interleaved, so drift hits both alike
        one_call, back_to_back = _portable_medians(step, device, runner.synchronize)
        single.append(one_call)
        pipelined.append(back_to_back)
        theirs.append(_torch_median(step))
    runner.unload()
    s, p, t = (statistics.median(v) for v in (single, pipelined, theirs))
    return {"model": name, "batch": batch, "device": device, "portable_p50_ms": round(s * 1e3, 4),
            "portable_back_to_back_ms": round(p * 1e3, 4), "torch_benchmark_median_ms": round(t * 1e3, 4),
            "ratio_p50": round(s / t, 4), "ratio_back_to_back": round(p / t, 4),
            "met": abs(p / t - 1) <= GOAL, "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    results = [one(m, args.batch, args.rounds, device) for m in args.models.split(",")]
    met = all(r["met"] for r in results) if device == "cuda" else None  # the goal is for a GPU
    print(json.dumps({"benchmark": "honesty", "goal": f"|ratio - 1| <= {GOAL} on a GPU", "gpu": device == "cuda",
                      "torch": torch.__version__, "results": results, "met": met}, indent=2))


if __name__ == "__main__":
    main()
