"""Issue 44's done-means on the trained all-MiniLM-L6-v2 folder, every step a CLI command (no Python written):

    portable export FOLDER -o m.onnx --shape sequence_length=128
    portable quantize m.onnx -o m.int8.onnx --calibration sentences.txt --eval held.txt
    portable compare m.onnx --reference FOLDER

    .venv/bin/python bench/minilm_folder_bench.py [--work DIR] > bench/results/minilm_folder.json

The sentences are fixtures/sentences.py's (240 calibration, 120 held out, disjoint package descriptions). The
float file's ``sentence_embedding`` is held to sentence-transformers' own ``encode`` of the held-out sentences
(cosine, min and mean); quantize's own report gives the int8 file's mean cosine against the float file.
Each command runs in its own process (wall time and peak RSS from ``wait4``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "fixtures" / "models"),
                str(Path(__file__).resolve().parents[1] / "fixtures")]
from _common import PORTABLE, emit, machine, measure, versions  # noqa: E402

LENGTH = 128


def _cosines(model: Path, folder: Path, texts: list[str]) -> dict[str, float]:
    import onnxruntime as ort
    from sentence_transformers import SentenceTransformer

    from portable.hf import inputs_for

    ours = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(
        ["sentence_embedding"], inputs_for(model, text=texts))[0]
    reference = SentenceTransformer(str(folder), device="cpu")
    reference.max_seq_length = LENGTH
    theirs = reference.encode(texts, convert_to_numpy=True)
    cosine = np.sum(ours * theirs, axis=1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    return {"min": float(cosine.min()), "mean": float(cosine.mean()), "sentences": len(texts)}


def _step(argv: list[str], logs: Path) -> dict[str, Any]:
    run = measure(argv, logs=logs)
    return {"command": " ".join(argv[1:]), "exit_code": run.returncode, "wall_s": round(run.wall_s, 2),
            "peak_rss_mb": round(run.peak_rss_bytes / 2**20, 1)}


def main() -> None:
    import minilm
    import sentences

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="minilm-folder-"))
    found = sentences.calibration_and_held_out(240, 120)
    (work / "sentences.txt").write_text("\n".join(found["calibration"]) + "\n")
    (work / "held.txt").write_text("\n".join(found["held_out"]) + "\n")
    folder, model, int8 = minilm.folder(), work / "m.onnx", work / "m.int8.onnx"
    steps = {"export": _step([PORTABLE, "export", str(folder), "-o", str(model), "--shape", f"sequence_length={LENGTH}",
                              "--force"], work / "export")}
    steps["sentence_transformers_cosine"] = _cosines(model, folder, found["held_out"])
    steps["quantize"] = _step([PORTABLE, "quantize", str(model), "-o", str(int8), "--calibration",
                               str(work / "sentences.txt"), "--eval", str(work / "held.txt"), "--force", "--format",
                               "json"], work / "quantize")
    report = json.loads((work / "quantize.out").read_text() or "{}")
    steps["quantize"]["accuracy"] = report.get("accuracy")
    steps["compare"] = _step([PORTABLE, "compare", str(model), "--reference", str(folder), "--no-latency"],
                             work / "compare")
    emit({"benchmark": "minilm_folder", "machine": machine(), "versions": versions(), "steps": steps})


if __name__ == "__main__":
    main()
