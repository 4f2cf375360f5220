"""The exporter's attention clean-ups on ONNX Runtime's CPU provider: BERT-base before and after, side by side.

    .venv/bin/python bench/attention_cleanups_bench.py [--batches 1,8] [--work DIR] > bench/results/attention_cleanups.json

BERT-base (docs/gpu/models.py:bert_base, sequence 128) exported twice by portable's pipeline, once as today and once
with the clean-ups turned off (``docs/gpu/models.py --without-attention-rewrites``: exporters/attention_rewrites.py
and the ``ReshapeTransposeReshape`` rule). Per batch, both files' outputs on the same seeded token ids (compared bit
for bit) and both timed round-robin in one process (portable's timing: warm-up to steady, p50 of the calls).
The GPU figure of the same pair is stage G1 of docs/gpu/run_ort_vs_compiled.sh.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import PYTHON, ROOT, emit, machine, versions  # noqa: E402

# docs/gpu/models.py run as a script, after torchvision's ops are defined (transformers imports torchvision)
_EXPORT = ("from bench.zoo.tvops import register_torchvision_ops; register_torchvision_ops(); import runpy, sys; "
           "sys.argv = ['models.py', *sys.argv[1:]]; runpy.run_path('docs/gpu/models.py', run_name='__main__')")


def _export(path: Path, *flags: str) -> dict[str, int]:
    subprocess.run([PYTHON, "-c", _EXPORT, "bert_base", str(path), *flags], cwd=ROOT, check=True,
                   capture_output=True)
    import onnx

    return dict(collections.Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node))


def _session(path: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _batch(files: dict[str, Path], batch: int) -> dict[str, Any]:
    from portable.runners.stats import LatencyStats
    from portable.runners.timing import HostTimer, Timed, TimingConfig, interleave, warm_up

    ids = np.random.default_rng(batch).integers(0, 30522, (batch, 128)).astype(np.int64)
    sessions = {name: _session(path) for name, path in files.items()}
    outputs = {name: s.run(None, {s.get_inputs()[0].name: ids})[0] for name, s in sessions.items()}
    timer, config = HostTimer(), TimingConfig(min_seconds=10.0, rounds=10)
    entries = [Timed(name, (lambda s=s: s.run(None, {s.get_inputs()[0].name: ids})), timer, timer)
               for name, s in sessions.items()]
    measured = interleave(entries, {e.name: warm_up(e.step, timer, config) for e in entries}, config)
    p50 = {m.name: LatencyStats.from_samples(m.samples, batch).to_dict()["p50_s"] * 1e3 for m in measured}
    before, after = outputs["clean-ups off"], outputs["as exported"]
    return {"batch": batch, "p50_ms": {k: round(v, 3) for k, v in p50.items()},
            "after_over_before": round(p50["as exported"] / p50["clean-ups off"], 4),
            "identical_bits": bool(np.array_equal(before.view(np.uint32), after.view(np.uint32))),
            "output_rms": float(np.sqrt((after ** 2).mean()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(args.work or temporary)
        work.mkdir(parents=True, exist_ok=True)
        files = {"as exported": work / "bert_base.onnx", "clean-ups off": work / "bert_base-kept.onnx"}
        ops = {"as exported": _export(files["as exported"]),
               "clean-ups off": _export(files["clean-ups off"], "--without-attention-rewrites")}
        rows = [_batch(files, int(b)) for b in args.batches.split(",")]
    emit({"benchmark": "attention_cleanups", "model": "bert_base (seq 128)", "provider": "CPUExecutionProvider",
          "ops": ops, "rows": rows, "machine": machine(), "versions": versions(("transformers",))})


if __name__ == "__main__":
    main()
