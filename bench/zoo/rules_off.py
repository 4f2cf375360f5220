"""The zoo exported twice, with the attention clean-ups and without: what they remove, and ORT's bits before and after.

    .venv/bin/python -m bench.zoo.rules_off [--only hf_vit,hf_bert] [--work DIR] > bench/results/attention_zoo.json

Every zoo model expected portable is built as the zoo builds it (seeded weights, ``bench/zoo/specs.py``) and
exported by portable's pipeline in a child process, once as today and once with exporters/attention_rewrites.py
and the ``ReshapeTransposeReshape`` rule turned off (``docs/gpu/models.py``'s ``_without_attention_rewrites``). Both
files run on ONNX Runtime's CPU provider on the same inputs (float inputs seeded normal draws, integer inputs the
builder's example), and every output is compared bit for bit. Two models at a time (2 cores): about 7 minutes.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
_CHILD = """
import sys, runpy, numpy as np
sys.path.insert(0, {root!r})
from bench.zoo.tvops import import_torchvision
import_torchvision()
if {off!r}:
    runpy.run_path({models!r})["_without_attention_rewrites"]()
from bench.zoo.registry import entries
from bench.zoo.specs import built
from portable.exporters.api import export
(entry,) = entries({name!r})
made = built(entry.name)
np.savez({feeds!r}, **{{n: a.detach().numpy() for n, a in zip(made.names, made.args)}})
export(made.module, made.args, {path!r}, batch="dynamic", verify=False, force=True, input_names=made.names)
"""


def _export(name: str, folder: Path, off: bool) -> Path:
    path = folder / f"{name}.{'off' if off else 'on'}.onnx"
    code = _CHILD.format(root=str(ROOT), off=off, models=str(ROOT / "docs" / "gpu" / "models.py"), name=name,
                         feeds=str(folder / f"{name}.npz"), path=str(path))
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, timeout=900)
    return path


def _outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})


def _ops(path: Path) -> collections.Counter:
    import onnx

    return collections.Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)


def check(name: str, folder: Path) -> dict[str, Any]:
    """One model: the op counts the clean-ups removed and whether every output keeps its bits."""
    try:
        on, off = _export(name, folder, False), _export(name, folder, True)
    except subprocess.CalledProcessError as exc:
        return {"model": name, "error": exc.stderr.decode(errors="replace").strip().splitlines()[-1][:300]}
    example = np.load(folder / f"{name}.npz")
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(example[n].shape).astype(example[n].dtype)
             if np.issubdtype(example[n].dtype, np.floating) else example[n] for n in example.files}
    got, want = _outputs(on, feeds), _outputs(off, feeds)
    removed = _ops(off) - _ops(on)
    return {"model": name, "nodes_off": sum(_ops(off).values()), "nodes_on": sum(_ops(on).values()),
            "removed": dict(removed), "added": dict(_ops(on) - _ops(off)),
            "identical_bits": len(got) == len(want) and all(a.shape == b.shape and a.tobytes() == b.tobytes()
                                                            for a, b in zip(got, want))}


def main() -> None:
    from bench.zoo.registry import PORTABLE, entries

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None)
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    names = [e.name for e in entries(args.only) if e.expected == PORTABLE]
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.work or temporary)
        folder.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(2) as pool:
            rows = list(pool.map(lambda n: check(n, folder), names))
    json.dump({"check": "attention clean-ups on the zoo", "rows": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
