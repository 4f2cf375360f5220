"""What the offline target check adds to ``portable validate`` on BERT-base (issue 21: at most 10 %).

BERT-base (``transformers.BertModel(BertConfig())``, seq 128, random weights, ``--batch dynamic``)
is exported once with ``portable.export`` (or ``--model FILE`` is used). Then, side by side and
interleaved, each in a fresh process several times: ``portable validate FILE`` and ``portable
validate --target all FILE`` (every profile, every PORT2xx rule, the per-target lines). Medians and
their ratio; also the same two in one process (``validate(path, policy)``, best of the repeats),
which leaves the interpreter's start-up out.

    .venv/bin/python bench/target_bench.py [--runs 5] [--model bert_base.onnx] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, PYTHON, ROOT, emit, machine, measure, median_of, versions  # noqa: E402

GOAL = 1.10  # validate --target all wall / validate wall

_EXPORT = """
import sys
sys.path.insert(0, sys.argv[2])
import torch, transformers, portable
from bench.zoo.models_hf import TensorOutputs, text_inputs
torch.manual_seed(0)
names = ("input_ids", "attention_mask")
model = transformers.BertModel(transformers.BertConfig()).eval()
portable.export(TensorOutputs(model, names).eval(), text_inputs(30522, names, seq=128), sys.argv[1],
                batch="dynamic", input_names=names, verify=False, force=True)
"""

_IN_PROCESS = """
import json, sys, time
from portable.policy import Policy
from portable.validators import validate
from portable.validators.targets import TARGETS
path, repeat = sys.argv[1], int(sys.argv[2])
policies = {"validate": Policy(), "validate --target all": Policy(targets=TARGETS)}
best = {k: float("inf") for k in policies}
for _ in range(repeat):
    for key, policy in policies.items():
        start = time.perf_counter()
        report = validate(path, policy)
        best[key] = min(best[key], time.perf_counter() - start)
print(json.dumps({"best_s": best, "lines": [t.line() for t in report.targets]}))
"""


def _export(path: Path) -> None:
    subprocess.run([PYTHON, "-c", _EXPORT, str(path), str(ROOT)], check=True, cwd=ROOT, capture_output=True)


def _in_process(path: Path, repeat: int) -> dict:
    out = subprocess.run([PYTHON, "-c", _IN_PROCESS, str(path), str(repeat)], check=True, cwd=ROOT,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(runs: int, model: Path | None, keep: Path | None) -> dict:
    folder = Path(keep or tempfile.mkdtemp(prefix="portable-target-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = model or folder / "bert_base.onnx"
    try:
        if model is None:
            _export(path)
        commands = {"portable validate": [PORTABLE, "validate", str(path)],
                    "portable validate --target all": [PORTABLE, "validate", "--target", "all", str(path)]}
        samples: dict[str, list] = {name: [] for name in commands}
        for _ in range(runs):  # interleaved: the machine's noise hits both alike
            for name, argv in commands.items():
                samples[name].append(measure(argv))
        figures = {name: median_of(r) for name, r in samples.items()}
        inside = _in_process(path, runs)
        size = path.stat().st_size
    finally:
        if keep is None and model is None:
            shutil.rmtree(folder, ignore_errors=True)
    ratio = round(figures["portable validate --target all"]["wall_s"] / figures["portable validate"]["wall_s"], 3)
    best = inside["best_s"]
    return {
        "benchmark": "target",
        "title": "The offline target check's cost on BERT-base (validate vs validate --target all)",
        "model": {"file_bytes": size, "built": "BertModel(BertConfig()), seq 128, --batch dynamic" if model is None else str(model)},
        "commands": {name: " ".join(argv) for name, argv in commands.items()},
        "figures": figures,
        "in_process_best_s": {k: round(v, 4) for k, v in best.items()},
        "ratios": {"target_all_wall_over_validate_wall": ratio,
                   "in_process_target_all_over_validate": round(best["validate --target all"] / best["validate"], 3)},
        "target_lines": inside["lines"],
        "goal": {"ratio_max": GOAL},
        "met": ratio <= GOAL,
        "machine": machine(),
        "versions": versions(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", type=Path, default=None, help="an existing BERT-base file (default: export one)")
    parser.add_argument("--keep", type=Path, default=None, help="write the model here and keep it")
    args = parser.parse_args()
    emit(run(args.runs, args.model, args.keep))


if __name__ == "__main__":
    main()
