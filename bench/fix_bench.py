"""``portable fix`` on models not written here (prints JSON; not a test).

Corpus, fetch-free: the model files the onnx wheel ships (``onnx/backend/test/data``:
light, pytorch-converted, pytorch-operator, simple; ``real`` holds only download links),
onnxruntime's bundled ``datasets/*.onnx``, an even sample of the ONNX backend node test
cases the wheel generates (``--node-cases``, default 300 of about 1,900), and the
fixture CNN and transformer exported by ``torch.onnx.export(dynamo=True)`` at opsets 13,
17, 20 and 21 (one of them with external data). For each: validate before, ``fix`` with
the proof (on the test case's own inputs where the corpus has them: random integers are not
valid indices everywhere), validate after. A model "fixable" is one whose only failing rules are those the
remedies address (opset, local functions, foldable shape computations, symbolic dims,
external data) and that uses no element type the target opset lacks (float8, int4...: no
conversion reaches opset 18; those are counted apart); the goal is that at least 90 % of them
pass after ``fix`` with the proof holding. A proof failure is portable's fault unless ONNX Runtime cannot run the original.

Models run in one child process, in order; a model that kills it (a crash in a native
library) is recorded as such and the child is restarted after it.

    .venv/bin/python bench/fix_bench.py [--node-cases N|all] [--limit N] [--shard K/N]

``--shard K/N`` runs every N-th model from the K-th (0-based): N shards side by side cover the corpus
once, each printing its rows (merge them to compare two checkouts model by model).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, emit, machine, versions  # noqa: E402

FIXABLE = {"PORT001", "PORT002", "PORT007", "PORT008", "PORT009", "PORT010"}
BACKEND_DIRS = ("light", "pytorch-converted", "pytorch-operator", "simple")
TORCH_OPSETS = (13, 17, 20, 21)
GOAL = 0.90


Case = tuple[str, str, Path, "Path | None"]  # source, name, model, inputs for the proof (.npz) or None


def _save_inputs(arrays: list[Any], path: Path) -> Path | None:
    """The test case's inputs as an .npz (arr_0... in input order) that ``np.load`` reads without pickle:
    strings as str arrays, ml_dtypes' types (float8, int4...) as their values in float32 or int8/uint8,
    which ``load_npz`` casts back exactly; None when one is not a tensor."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    from portable.runners.comparator import comparable

    arrays = [numpy_helper.to_array(a) if isinstance(a, TensorProto) else a for a in arrays]
    arrays = [np.asarray(a) if isinstance(a, np.generic) else a for a in arrays]  # a numpy scalar: a 0-d tensor
    if not arrays or not all(isinstance(a, np.ndarray) for a in arrays):
        return None
    saved = [np.vectorize(_text, otypes=[str])(a) if a.dtype.kind == "O" else comparable(a) for a in arrays]
    if not all(a.dtype.kind in "biufUS" for a in saved):
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{f"arr_{i}": a for i, a in enumerate(saved)})
    return path


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _dir_inputs(model: Path, folder: Path, name: str) -> Path | None:
    import onnx
    from onnx import numpy_helper

    data = model.parent / "test_data_set_0"
    files = sorted(data.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1])) if data.is_dir() else []
    arrays = []
    for file in files:
        tensor = onnx.TensorProto()
        tensor.ParseFromString(file.read_bytes())
        arrays.append(numpy_helper.to_array(tensor))
    return _save_inputs(arrays, folder / "inputs" / f"{name}.npz")


def _backend_models(folder: Path) -> list[Case]:
    import onnx

    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    found: list[Case] = []
    for sub in BACKEND_DIRS:
        for path in sorted((data / sub).rglob("*.onnx")):
            name = path.parent.name if path.name == "model.onnx" else path.stem
            found.append((f"backend/{sub}", name, path, _dir_inputs(path, folder, name)))
    return found


def _ort_models() -> list[Case]:
    import onnxruntime

    datasets = Path(onnxruntime.__file__).parent / "datasets"
    return [("onnxruntime", p.stem, p, None) for p in sorted(datasets.glob("*.onnx"))]


def _node_cases(count: int | None, folder: Path) -> list[Case]:
    import warnings

    import onnx
    from onnx.backend.test.case.node import collect_testcases

    if count == 0:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = sorted(collect_testcases(None), key=lambda c: c.name)
    step = 1 if count is None or count >= len(cases) else len(cases) / count
    chosen = [cases[int(i * step)] for i in range(len(cases) if step == 1 else count)]  # type: ignore[arg-type]
    found: list[Case] = []
    for case in chosen:
        path = folder / "node" / f"{case.name}.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(case.model, path)  # type: ignore[arg-type]
        arrays = list(case.data_sets[0][0]) if case.data_sets else []
        found.append(("backend/node", case.name, path, _save_inputs(arrays, folder / "inputs" / f"{case.name}.npz")))
    return found


def _torch_models(folder: Path) -> list[Case]:
    import importlib
    import warnings

    import torch

    sys.path.insert(0, str(ROOT))
    found: list[Case] = []
    for name in ("cnn", "transformer"):
        module, args = importlib.import_module(f"fixtures.models.{name}").build()
        for opset in TORCH_OPSETS:
            external = name == "cnn" and opset == 17
            path = folder / "torch" / f"{name}_opset{opset}{'_external' if external else ''}" / "model.onnx"
            path.parent.mkdir(parents=True, exist_ok=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, args, str(path), dynamo=True, opset_version=opset, external_data=external,
                                  verbose=False, dynamic_shapes=({0: torch.export.Dim("batch")},))
            found.append(("torch.onnx.export", path.parent.name, path, None))
    return found


def _addressed(path: Path, findings: list[Any]) -> bool:
    """Only what the remedies address fails: the opset, model-local functions (not custom ops), shape
    computations that fold (not those fed by data: "depends on more than the batch size"), dims that
    are symbolic in the graph but not in the inputs (those need --dim, which the benchmark does not
    guess), external data. "Fixable" is this without :func:`_newer_types`."""
    failing = {f.rule_id for f in findings}
    if not failing or not failing <= FIXABLE:
        return False
    data_fed = ("depends on more than the batch", "is a graph input")  # the second: validators' wording on main
    if any(f.rule_id == "PORT007" and any(w in f.message for w in data_fed) for f in findings):
        return False
    if any(f.rule_id == "PORT008" and f.message.startswith("graph input") for f in findings):
        return False
    if "PORT002" not in failing:
        return True
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    local = {(f.domain, f.name) for f in model.functions}
    used = {(n.domain, n.op_type) for n in model.graph.node if n.domain not in ("", "ai.onnx")}
    return bool(local) and used <= local


def _newer_types(path: Path, findings: list[Any]) -> list[str]:
    """With PORT001 failing: the element types the model uses that the target opset does not have
    (float8 came with opset 19, int4 with 21...). No conversion can take such a model to the target,
    so its PORT001 is not one a remedy addresses (until this check, such models counted as fixable)."""
    if not any(f.rule_id == "PORT001" for f in findings):
        return []
    import onnx
    import onnx_ir as ir

    from portable.exporters.remedies import types_newer_than
    from portable.policy import load_policy

    try:
        model = ir.from_proto(onnx.load(str(path), load_external_data=False))
    except Exception:  # noqa: BLE001 - a graph onnx-ir cannot read: fix says why
        return []
    return types_newer_than(model, load_policy().opset)


def fix_one(source: str, name: str, path: Path, out: Path, inputs: Path | None) -> dict[str, Any]:
    """Validate, fix (with the proof), validate the result: one row of the benchmark."""
    from portable.errors import PortableError
    from portable.repair import FixFailed, fix
    from portable.validators import validate

    before = validate(path)
    failing = {f.rule_id for f in before.failing()}
    addressed = before.error is None and _addressed(path, list(before.failing()))
    newer = _newer_types(path, list(before.failing())) if addressed else []
    row: dict[str, Any] = {"source": source, "name": name, "before_ok": before.ok, "before_error": before.error,
                           "rules_before": sorted(failing), "fixable": addressed and not newer,
                           "addressed": addressed, "newer_types": newer,
                           "inputs": "test data" if inputs else "seeded"}
    start = time.perf_counter()
    try:
        result = fix(path, out, force=True, inputs=inputs)
    except FixFailed as exc:
        result = exc.result
        row["failure"] = exc.message
    except PortableError as exc:
        result = None
        row["failure"] = f"{type(exc).__name__}: {exc}"
    row["seconds"] = round(time.perf_counter() - start, 3)
    return row | _outcome(result)


def _outcome(result: Any) -> dict[str, Any]:
    if result is None:
        return {"after_ok": False, "proof": "not run", "remaining": [], "applied": []}
    proof = result.proof
    state = "not run" if proof is None else "unavailable" if proof.unavailable else "held" if proof.ok else "failed"
    return {"after_ok": bool(result.ok), "proof": state, "proof_message": proof.message if proof else None,
            "max_abs_diff": proof.to_dict()["max_abs_diff"] if proof else None,
            "remaining": sorted({f.rule_id for f in result.remaining}),
            "applied": [r.name for r in result.remedies if r.status == "applied"],
            "refused": {r.name: r.detail for r in result.remedies if r.status in ("refused", "failed")},
            "opset": [result.opset_before, result.opset_after]}


def worker(listing: Path, out: Path) -> None:
    """Child mode: one JSON row per model on stdout, in order."""
    from portable.quiet import quiet_libraries

    for index, (source, name, path, inputs) in enumerate(json.loads(listing.read_text())):
        sys.stdout.write(json.dumps({"index": index, "started": name}) + "\n")
        sys.stdout.flush()
        with quiet_libraries():
            row = fix_one(source, name, Path(path), out / f"{index}.onnx", Path(inputs) if inputs else None)
        sys.stdout.write(json.dumps({"index": index, "row": row}) + "\n")
        sys.stdout.flush()


def run_all(cases: list[Case], folder: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while len(rows) < len(cases):
        rest = cases[len(rows):]
        listing = folder / "listing.json"
        listing.write_text(json.dumps([[s, n, str(p), str(i) if i else None] for s, n, p, i in rest]))
        out = folder / "out"
        out.mkdir(exist_ok=True)
        child = subprocess.Popen([PYTHON, __file__, "--worker", str(listing), str(out)], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        for line in child.stdout or ():
            message = json.loads(line)
            if "row" in message:
                rows.append(message["row"])
                sys.stderr.write(f"fixbench: {len(rows)}/{len(cases)} {message['row']['name']}\n")
        child.wait()
        if len(rows) < len(cases):  # the child died on the next model
            source, name, _, _ = cases[len(rows)]
            rows.append({"source": source, "name": name, "crashed": f"exit {child.returncode}", "after_ok": False,
                         "proof": "not run", "fixable": False, "before_ok": False, "rules_before": [],
                         "remaining": [], "seconds": None})
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    fixable = [r for r in rows if r.get("fixable")]
    fixed = [r for r in fixable if r["after_ok"] and r["proof"] == "held"]
    runnable = [r for r in fixable if r["proof"] != "unavailable"]
    faults = [r for r in rows if r["proof"] == "failed"]
    times = sorted(r["seconds"] for r in rows if r.get("seconds") is not None)
    share = len(fixed) / len(fixable) if fixable else 0.0
    newer = [r for r in rows if r.get("addressed") and r.get("newer_types")]
    return {
        "models": len(rows), "pass_before": sum(r["before_ok"] for r in rows),
        "pass_after": sum(bool(r["after_ok"]) for r in rows),
        "fixable": len(fixable), "fixable_pass_after_with_proof": len(fixed),
        "fixable_share": round(share, 4),
        "fixable_share_runnable": round(len(fixed) / len(runnable), 4) if runnable else 0.0,
        "not_fixable_newer_types": len(newer),  # fixable but for types the target opset lacks (float8, int4...)
        "not_fixable_newer_types_detail": {r["name"]: r["newer_types"] for r in newer},
        "fixable_share_counting_newer_types": round(len(fixed) / (len(fixable) + len(newer)), 4) if fixable else 0.0,
        "proof_failures": len(faults), "proof_failures_detail": [{"name": r["name"], "message": r.get("proof_message")}
                                                                 for r in faults],
        "proof_unavailable": sum(r["proof"] == "unavailable" for r in rows),
        "crashed": [r["name"] for r in rows if r.get("crashed")],
        "fixable_not_fixed": [{"name": r["name"], "remaining": r.get("remaining"), "proof": r["proof"],
                               "refused": r.get("refused"), "failure": r.get("failure")}
                              for r in fixable if r not in fixed],
        "seconds_per_model": {"median": statistics.median(times) if times else None,
                              "p90": times[int(0.9 * (len(times) - 1))] if times else None,
                              "max": times[-1] if times else None, "total": round(sum(times), 1)},
        "by_source": _by_source(rows),
        "goal": f">= {GOAL:.0%} of fixable models pass after fix with the proof holding",
        "met": share >= GOAL and not faults,
        "met_where_the_proof_can_run": bool(runnable) and len(fixed) / len(runnable) >= GOAL and not faults,
    }


def _by_source(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        entry = out.setdefault(r["source"], {"models": 0, "pass_before": 0, "pass_after": 0, "fixable": 0})
        entry["models"] += 1
        entry["pass_before"] += bool(r["before_ok"])
        entry["pass_after"] += bool(r["after_ok"])
        entry["fixable"] += bool(r.get("fixable"))
    return out


def _shard(text: str) -> slice:
    """``K/N`` (0 <= K < N): every N-th model from the K-th."""
    k, sep, n = text.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and int(k) < int(n)):
        raise SystemExit(f"--shard {text!r}: expected K/N with 0 <= K < N")
    return slice(int(k), None, int(n))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-cases", default="300", help="backend node test cases to include: N or 'all'")
    parser.add_argument("--limit", type=int, default=None, help="only the first N models (a quick look)")
    parser.add_argument("--shard", default=None, help="K/N: only models K, K+N, K+2N... (0-based)")
    parser.add_argument("--worker", nargs=2, metavar=("LISTING", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]))
        return 0
    with tempfile.TemporaryDirectory(prefix="fixbench-") as tmp:
        folder = Path(tmp)
        count = None if args.node_cases == "all" else int(args.node_cases)
        cases = [*_backend_models(folder), *_ort_models(), *_torch_models(folder), *_node_cases(count, folder)]
        cases = cases[:args.limit] if args.limit else cases
        if args.shard:
            cases = cases[_shard(args.shard)]
        start = time.perf_counter()
        rows = run_all(cases, folder)
        wall = round(time.perf_counter() - start, 1)
    summary = summarize(rows)
    sys.stderr.write(f"fixbench: {summary['models']} models, {summary['pass_before']} pass before, "
                     f"{summary['pass_after']} after; fixable {summary['fixable']}, of which "
                     f"{summary['fixable_pass_after_with_proof']} pass with the proof "
                     f"({summary['fixable_share']:.1%}); proof failures {summary['proof_failures']}; "
                     f"median {summary['seconds_per_model']['median']} s per model\n")
    emit({"benchmark": "fix", "command": " ".join([Path(PYTHON).name, *sys.argv]), "wall_s": wall,
          "machine": machine(), "versions": versions(), "pid": os.getpid(), **summary, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
