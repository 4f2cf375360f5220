"""The fp16/bf16 tolerance measurements, from the raw outputs ``precision.py`` saved on the H200.

For each model, precision, batch and pair: the error statistics ``portable compare`` reports
(``compare_arrays``), the smallest atol that passes at the default rtol (``need_atol``, and over
the expected output's RMS), and the verdict under the defaults and under the plain ones they replaced.
Correct pairs (ORT CPU or ``torch.compile`` against eager, in
the same precision) must pass; ``bad-*`` (one weight scaled by 1.01) show what the defaults can
still catch. ``eager vs truth`` (the fp32 model) is the precision's own error, for scale.

    python3 docs/gpu/precision_analysis.py DIR_WITH_NPZ > docs/gpu/precision.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from portable.runners.comparator import compare_arrays
from portable.runners.tolerances import DEFAULT_TOLERANCES, Tolerance

DTYPE = {"fp16": "float16", "bf16": "bfloat16"}
REPLACED = {"float16": Tolerance(1e-3, 1e-2, "before: float16"), "bfloat16": Tolerance(1e-2, 5e-2, "before: bfloat16")}


def _pair(actual: np.ndarray, expected: np.ndarray, dtype: str) -> dict[str, Any]:
    tolerance = DEFAULT_TOLERANCES[dtype]
    stats = compare_arrays(actual, expected, tolerance)
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    need = float((np.abs(a - e) - tolerance.rtol * np.abs(e)).max())
    rms = float(np.sqrt((e ** 2).mean()))
    return {"max_abs": stats.max_abs, "p99_abs": stats.p99_abs, "mean_abs": stats.mean_abs,
            "cosine": stats.cosine, "rms_expected": rms, "need_atol": need, "need_atol_over_rms": need / rms,
            "passes_default": stats.beyond == 0,
            "passes_before": compare_arrays(actual, expected, REPLACED[dtype]).beyond == 0}


def analyse(path: Path) -> list[dict[str, Any]]:
    model, precision = path.stem.rsplit("-", 1)
    data = np.load(path)
    keys = [k.split("|") for k in data.files]
    runners = sorted({k[0] for k in keys})
    rows = []
    for batch in sorted({int(k[2]) for k in keys}):
        def side(name: str, batch: int = batch) -> np.ndarray:
            return data[f"{name}|0|{batch}"]

        pairs = [(r, "eager") for r in runners if r not in ("eager", "truth")] + [("eager", "truth")]
        if "ort-cpu" in runners:
            pairs.append(("ort-cpu", "compiled"))
        for actual, expected in pairs:
            row = {"model": model, "precision": precision, "batch": batch, "actual": actual, "expected": expected,
                   "kind": "bad" if actual.startswith("bad-") else "context" if expected == "truth" else "correct"}
            rows.append({**row, **_pair(side(actual), side(expected), DTYPE[precision])})
    return rows


def main() -> None:
    rows = [row for path in sorted(Path(sys.argv[1]).glob("*.npz")) for row in analyse(path)]
    defaults = {DTYPE[p]: DEFAULT_TOLERANCES[DTYPE[p]].to_dict() for p in DTYPE}
    json.dump({"defaults": defaults, "before": {k: v.to_dict() for k, v in REPLACED.items()}, "rows": rows},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
