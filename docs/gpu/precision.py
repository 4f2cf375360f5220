"""Raw outputs for choosing the fp16 and bf16 parity tolerances (docs/gpu/README.md, "Precision").

For one model and one precision, on the same seeded feeds per batch size (``make_feeds``, as
``portable compare`` draws them):

- ``eager``: the module in that precision on CUDA (the reference side of ``compare``);
- ``compiled``: ``torch.compile`` default mode of it;
- ``ort-cpu``: ONNX Runtime's CPU provider on the export in that precision (fp16 only: ORT's CPU
  provider has no bf16 kernels for MatMul, Add, Conv);
- ``truth``: the float32 module on CUDA, TF32 off, on the same (rounded) inputs;
- ``bad-<param>``: eager with one weight scaled by 1.01: what a parity check must still catch.

Writes ``OUT/NAME-PRECISION.npz`` (keys ``runner|output index|batch``), for ``precision_analysis.py``.

    python3 docs/gpu/precision.py resnet50 fp16 out/models/resnet50_fp16.onnx OUT --batch 1,32 \
        --perturb layer3.0.conv2.weight --perturb fc.weight
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models  # noqa: E402  (docs/gpu/models.py: the SPEC targets)

from portable.runners.inputs import graph_io, int_ranges_from_examples, make_feeds  # noqa: E402
from portable.runners.torch_runners import tf32_mode  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _leaves(result: Any) -> list[torch.Tensor]:
    if hasattr(result, "to_tuple"):
        result = result.to_tuple()
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _torch_run(module: Any, feeds: dict[str, np.ndarray], dtype: torch.dtype, device: str) -> list[np.ndarray]:
    args = [torch.from_numpy(a).to(device) for a in feeds.values()]
    args = [a.to(dtype) if a.is_floating_point() else a for a in args]
    with torch.no_grad():
        out = _leaves(module(*args))
    # float16 stays float16 (exact, half the size); bfloat16 has no NumPy dtype: float32 (exact too)
    return [(o if o.dtype == torch.float16 else o.float()).cpu().numpy() for o in out]


def _ort_run(path: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return [np.asarray(o, dtype=np.float32) for o in session.run(None, feeds)]


def _perturbed(module: Any, name: str) -> Any:
    bad = copy.deepcopy(module)
    with torch.no_grad():
        dict(bad.named_parameters())[name].mul_(1.01)
    return bad


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("precision", choices=sorted(DTYPES))
    parser.add_argument("onnx", help="the export in this precision (its inputs define the feeds)")
    parser.add_argument("out")
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--perturb", action="append", default=[])
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    dtype = DTYPES[args.precision]
    module32, example = getattr(models, args.name)()
    module32 = module32.to(args.device).eval()
    module = copy.deepcopy(module32).to(dtype)
    compiled = torch.compile(module, dynamic=False)
    specs, _ = graph_io(args.onnx)
    int_ranges = int_ranges_from_examples(specs, example)  # each integer input from its example's range
    saved: dict[str, np.ndarray] = {}
    with tf32_mode(False):
        for batch in [int(b) for b in args.batch.split(",")]:
            feeds = make_feeds(specs, batch, seed=0, int_ranges=int_ranges)
            sides = {"eager": _torch_run(module, feeds, dtype, args.device),
                     "compiled": _torch_run(compiled, feeds, dtype, args.device),
                     "truth": _torch_run(module32, feeds, torch.float32, args.device)}
            if args.precision == "fp16":
                sides["ort-cpu"] = _ort_run(args.onnx, feeds)
            for param in args.perturb:
                sides[f"bad-{param}"] = _torch_run(_perturbed(module, param), feeds, dtype, args.device)
            for runner, outputs in sides.items():
                for index, value in enumerate(outputs):
                    saved[f"{runner}|{index}|{batch}"] = value
            print(f"{args.name} {args.precision} batch {batch}: {sorted(sides)}", flush=True)
    target = Path(args.out) / f"{args.name}-{args.precision}.npz"
    np.savez_compressed(target, **saved)
    print(f"wrote {target} ({target.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
