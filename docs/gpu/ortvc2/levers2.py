"""bench/ort_vs_compiled_bench.py's `levers` with one lever only (plain ORT-CUDA with CUDA graphs, portable's
provider defaults, TF32 off) plus the rewritten files given with --also, beside compiled reduce-overhead,
all timed round-robin in one process: the bench itself, with a `graph` kind added to its LEVERS table
(and the runners of $ORTVC2_EXTRA, below).

    python3 docs/gpu/ortvc2/levers2.py levers --onnx M.onnx --reference docs/gpu/models.py:SPEC --kind graph \
        --batch 32 --also NAME=FILE ... --out OUT.json
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import ort_vs_compiled_bench as bench  # noqa: E402

bench.LEVERS["graph"] = (("ort-cuda-graph", {}, True, ""),)
# ORTVC2_EXTRA='[["NAME", {"prefer_nhwc": "1"}, true, "FILE.onnx"], ...]': more runners with provider options
# (over portable's defaults) and a file of their own; bench._rewritten is told to return such a file as it is.
import json  # noqa: E402
import os  # noqa: E402

bench.LEVERS["graph"] += tuple(tuple(e) for e in json.loads(os.environ.get("ORTVC2_EXTRA", "[]")))
_rewritten = bench._rewritten
bench._rewritten = lambda onnx, rewrite, folder: rewrite if rewrite.endswith(".onnx") else _rewritten(onnx, rewrite, folder)
raise SystemExit(bench.main())
