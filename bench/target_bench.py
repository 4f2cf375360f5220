"""What the offline target check adds to ``portable validate`` on BERT-base (issue 21: at most 10 %).

BERT-base (``transformers.BertModel(BertConfig())``, seq 128, random weights, ``--batch dynamic``)
is exported once with ``portable.export`` (or ``--model FILE`` is used). Then, side by side and
interleaved, each in a fresh process several times: ``portable validate FILE`` and ``portable
validate --target all FILE`` (every profile, every PORT2xx rule, the per-target lines). Medians of
each command's CPU seconds (user + system: the steadier figure on a shared machine) and wall
seconds, and their ratios; also the same two in one process (``validate(path, policy)``, best CPU
time of the repeats), which leaves the interpreter's start-up and the file's mapping out.

    .venv/bin/python bench/target_bench.py [--runs 5] [--model bert_base.onnx] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, PYTHON, ROOT, emit, machine, versions  # noqa: E402

GOAL = 1.10  # validate --target all / validate, CPU seconds of the command (medians)

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
        start = time.process_time()
        report = validate(path, policy)
        best[key] = min(best[key], time.process_time() - start)
# The target work alone, on a fresh context each time (profiles read afresh too, as in a new process):
from portable.validators.context import ModelContext
from portable.validators.loading import load_model_file
from portable.validators.rules import ALL_RULES
from portable.validators.targets.profile import load_profile
loaded = load_model_file(path)
work = float("inf")
for _ in range(repeat):
    load_profile.cache_clear()
    start = time.process_time()
    ctx = ModelContext(loaded.proto, path, Policy(targets=TARGETS))
    for rule in (r() for r in ALL_RULES if r.needs_targets):
        list(rule.check(ctx))
    ctx.targets.summaries()
    work = min(work, time.process_time() - start)
best["target work alone"] = work
print(json.dumps({"best_cpu_s": best, "lines": [t.line() for t in report.targets]}))
"""


def _run(argv: list[str]) -> tuple[float, float]:
    """One command in a fresh process: its wall seconds and its CPU seconds (user + system, from
    ``wait4``: on a shared machine the CPU time is the steadier figure)."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise RuntimeError(f"{argv} exited {os.waitstatus_to_exitcode(status)}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def _medians(runs: list[tuple[float, float]]) -> dict:
    return {"wall_s": round(statistics.median(w for w, _ in runs), 4), "cpu_s": round(statistics.median(c for _, c in runs), 4),
            "runs": len(runs), "wall_s_all": [round(w, 3) for w, _ in runs], "cpu_s_all": [round(c, 3) for _, c in runs]}


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
                samples[name].append(_run(argv))
        figures = {name: _medians(r) for name, r in samples.items()}
        inside = _in_process(path, runs)
        size = path.stat().st_size
    finally:
        if keep is None and model is None:
            shutil.rmtree(folder, ignore_errors=True)
    ours, base = figures["portable validate --target all"], figures["portable validate"]
    ratio = round(ours["cpu_s"] / base["cpu_s"], 3)
    best = inside["best_cpu_s"]
    return {
        "benchmark": "target",
        "title": "The offline target check's cost on BERT-base (validate vs validate --target all)",
        "model": {"file_bytes": size, "built": "BertModel(BertConfig()), seq 128, --batch dynamic" if model is None else str(model)},
        "commands": {name: " ".join(argv) for name, argv in commands.items()},
        "figures": figures,
        "in_process_best_cpu_s": {k: round(v, 4) for k, v in best.items()},
        "ratios": {"target_all_over_validate_cpu": ratio,
                   "target_all_over_validate_wall": round(ours["wall_s"] / base["wall_s"], 3),
                   "in_process_target_all_over_validate_cpu": round(best["validate --target all"] / best["validate"], 3),
                   "in_process_target_work_over_validate_cpu": round(best["target work alone"] / best["validate"], 3)},
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
