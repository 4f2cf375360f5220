"""Is ``compare``'s CPU latency the model's? Eager's p50 inside ``portable.compare`` against eager timed alone
with ``torch.utils.benchmark`` (``blocked_autorange``) on the same model, side by side in one process, in
alternating rounds; and the same with ONNX Runtime's intra-op spin-waiting left on (what compare did before),
to show what it costs the runner timed next. JSON on stdout.

    .venv/bin/python bench/cpu_honesty_bench.py [--models bert_tiny,resnet18] [--rounds 3] > bench/results/cpu_honesty.json

Goal (issue 25): eager's p50 inside compare within 1.25x of eager alone, for a tiny BERT and ResNet-18, on the
2-core machine. ResNet-18 needs torchvision (``make zoo-venv``); without it that model is skipped and said so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOAL = 1.25


def _bert_tiny() -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    import torch

    from bench.zoo.tvops import register_torchvision_ops

    register_torchvision_ops()  # transformers imports torchvision when installed (make zoo-venv)
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=512, max_position_embeddings=64)
    model = BertModel(config).eval()

    class Hidden(torch.nn.Module):  # one tensor out: the last hidden state
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.randint(0, 1000, (1, 32))
    return Hidden().eval(), (ids, torch.ones_like(ids)), ("input_ids", "attention_mask")


def _resnet18() -> tuple[Any, tuple[Any, ...], tuple[str, ...]] | None:
    try:
        from bench.zoo.tvops import import_torchvision

        torchvision = import_torchvision()
    except ImportError:
        return None
    import torch

    torch.manual_seed(0)
    return torchvision.models.resnet18().eval(), (torch.randn(1, 3, 224, 224),), ("x",)


MODELS = {"bert_tiny": _bert_tiny, "resnet18": _resnet18}


def _alone(module: Any, args: tuple[Any, ...]) -> float:
    """Eager's median per call, timed alone by torch.utils.benchmark."""
    import torch
    from torch.utils import benchmark

    with torch.no_grad():
        # Timer's num_threads defaults to 1: time with the threads compare's eager runner has
        timer = benchmark.Timer(stmt="module(*args)", globals={"module": module, "args": args},
                                num_threads=torch.get_num_threads())
        return float(timer.blocked_autorange(min_run_time=1.0).median)


def _in_compare(path: Path, module: Any, args: tuple[Any, ...], spinning: bool | None) -> dict[str, Any]:
    import portable.runners.api as api
    from portable.runners import TimingConfig

    original = api.OnnxRuntimeRunner

    class Spinning(original):  # type: ignore[misc, valid-type]
        """The ablation: ONNX Runtime's default spin-waiting, as compare had it before."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "spinning": None})

    if spinning is not None:
        api.OnnxRuntimeRunner = Spinning  # type: ignore[misc]
    try:
        report = api.compare(path, module, example_inputs=list(args), device="cpu", compile_mode=None, batches=[1],
                             timing=TimingConfig())
    finally:
        api.OnnxRuntimeRunner = original  # type: ignore[misc]
    latency = {r.runner: r.stats for r in report.latency}
    return {"eager_p50_s": latency["eager"].p50_s, "eager_cv": latency["eager"].cv,
            "ort_p50_s": latency["ort-cpu"].p50_s, "ort_cv": latency["ort-cpu"].cv,
            "threads": report.setup["threads"], "timing_warnings": list(report.timing_warnings)}


def _model(name: str, rounds: int) -> dict[str, Any]:
    import portable

    built = MODELS[name]()
    if built is None:
        return {"model": name, "skipped": "torchvision is not installed (make zoo-venv)"}
    module, args, names = built
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.onnx"
        portable.export(module, args, path, batch=1, input_names=names, verify=False)
        rows = []
        for _ in range(rounds):  # alternating, so a change of the machine's speed touches all three alike
            alone = _alone(module, args)
            fixed = _in_compare(path, module, args, None)
            spinning = _in_compare(path, module, args, True)
            rows.append({"alone_s": alone, "compare": fixed, "compare_ort_spinning": spinning})
    ratio = statistics.median(r["compare"]["eager_p50_s"] / r["alone_s"] for r in rows)
    before = statistics.median(r["compare_ort_spinning"]["eager_p50_s"] / r["alone_s"] for r in rows)
    return {"model": name, "rounds": rows, "eager_in_compare_over_alone": ratio,
            "eager_in_compare_over_alone_ort_spinning": before, "goal_met": ratio <= GOAL}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert_tiny,resnet18")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from bench._common import machine, versions

    results = [_model(name.strip(), args.rounds) for name in args.models.split(",")]
    json.dump({"benchmark": "cpu_honesty", "goal": f"eager p50 inside compare <= {GOAL}x eager alone",
               "machine": machine(), "versions": versions(), "results": results}, sys.stdout, indent=2)


if __name__ == "__main__":
    main()
