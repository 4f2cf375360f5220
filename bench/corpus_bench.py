"""``portable fix`` and ``portable validate`` on ONNX files of other projects (issue 26; prints JSON).

The corpus is a folder made by ``bench/corpus_extract.py`` from snapshots of tracel-ai/burn-onnx,
sonos/tract, microsoft/onnxruntime-genai, microsoft/onnxruntime-extensions, microsoft/onnxconverter-common,
onnx/onnx-mlir and webonnx/wonnx (its ``SOURCES.json`` names each repo and commit; the files are not
committed). Every ``*.onnx`` in it gets, each in a fresh process, at most ``--jobs`` (2) at a time:

- ``portable fix FILE -o TMP -q --format json`` (``--timeout`` 60 s each): exit code, whether the proof held,
  a Python traceback on stderr (an internal error), "cannot run" proofs, stdout that is not JSON, and
  ONNX Runtime's own log lines on stderr (``[E:onnxruntime:`` / ``[W:onnxruntime:``);
- ``portable validate FILES --format json``, 40 files a process: each file's exit code, tracebacks,
  non-JSON stdout.

Usage: ``python bench/corpus_bench.py [CORPUS_DIR] [--jobs 2] [--timeout 60] [--only LIST] [--no-validate]``
(default corpus ``$PORTABLE_CORPUS`` or ``/work/shared/corpus``; absent: the JSON says skipped).
``--portable EXE`` runs another checkout's ``portable`` (a baseline).
``--only LIST`` takes a file of corpus-relative paths, one a line (a re-run of a subset).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, ROOT, emit, machine, versions  # noqa: E402

ORT_LOG = re.compile(r"\[[EWIV]:onnxruntime:")
TRACEBACK = "Traceback (most recent call last)"
CHUNK = 40
_EXE = [PORTABLE]  # --portable: another checkout's executable (a baseline of other code)


def _json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _run(argv: list[str], timeout: float) -> tuple[int | None, str, str, float]:
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "", time.perf_counter() - start
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - start


def _fix_row(path: Path, out: Path, timeout: float) -> dict[str, Any]:
    code, stdout, stderr, took = _run([_EXE[0], "fix", str(path), "-o", str(out), "--force", "-q", "--format", "json"], timeout)
    report = _json(stdout)
    proof = (report or {}).get("proof") or {}
    error = (report or {}).get("error") or {}
    message = str(error.get("message", "")) if isinstance(error, dict) else str(error or "")
    if not message and isinstance(proof, dict) and not proof.get("ok"):
        message = str(proof.get("message") or "")
    return {
        "exit": code,
        "wall_s": round(took, 2),
        "json": report is not None,
        "proven": bool(proof.get("ok")) if isinstance(proof, dict) else False,
        "traceback": TRACEBACK in stderr or "internal error" in stderr + message,
        "ort_log_lines": len(ORT_LOG.findall(stderr)),
        "cannot_run": "cannot run" in (message + stderr).lower() or "cannot be run" in (message + stderr).lower(),
        "message": (message or stderr.strip().splitlines()[-1:] and stderr.strip().splitlines()[-1] or "")[:300],
    }


def _validate_chunk(paths: list[Path], timeout: float) -> dict[str, dict[str, Any]]:
    """One ``portable validate`` process over a chunk of files (start-up paid once per chunk): each file's
    exit code from the JSON report; a traceback or non-JSON stdout is charged to every file of the chunk."""
    code, stdout, stderr, _took = _run([_EXE[0], "validate", *map(str, paths), "--format", "json"], timeout * len(paths))
    report = _json(stdout) or {}
    codes = {r.get("path"): r.get("exit_code") for r in report.get("reports", [])}
    shared = {"json": bool(report), "traceback": TRACEBACK in stderr, "process_exit": code}
    return {str(p): {"exit": codes.get(str(p)), **shared} for p in paths}


def one(path: Path, root: Path, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    rel = str(path.relative_to(root))
    row: dict[str, Any] = {"file": rel, "fix": _fix_row(path, tmp / (rel.replace("/", "__")), args.timeout)}
    sys.stderr.write(f"corpus: {rel}: fix {row['fix']['exit']}\n")
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    fixes = [r["fix"] for r in rows]
    summary: dict[str, Any] = {
        "files": len(rows),
        "fix_exit_codes": dict(Counter(str(f["exit"]) for f in fixes)),
        "fixed_and_proven": sum(f["exit"] == 0 and f["proven"] for f in fixes),
        "proven_with_findings": sum(f["exit"] == 1 and f["proven"] for f in fixes),
        "internal_errors": [r["file"] for r in rows if r["fix"]["traceback"]],
        "proofs_cannot_run": [{"file": r["file"], "message": r["fix"]["message"]} for r in rows if r["fix"]["cannot_run"]],
        "non_json_stdout": [r["file"] for r in rows if not r["fix"]["json"]],
        "ort_log_lines_on_stderr": {r["file"]: r["fix"]["ort_log_lines"] for r in rows if r["fix"]["ort_log_lines"]},
        "exit_3": [{"file": r["file"], "message": r["fix"]["message"]} for r in rows if r["fix"]["exit"] == 3],
    }
    checked = [r for r in rows if "validate" in r]
    if checked:
        summary["validate_exit_codes"] = dict(Counter(str(r["validate"]["exit"]) for r in checked))
        summary["validate_internal_errors"] = [r["file"] for r in checked if r["validate"]["traceback"]]
        summary["validate_non_json_stdout"] = [r["file"] for r in checked if not r["validate"]["json"]]
    return summary


def _commit(executable: Path) -> str | None:
    """The commit of the checkout whose venv holds ``executable`` (``<checkout>/.venv/bin/portable``)."""
    if executable.parent.name != "bin" or executable.parents[1].name != ".venv":  # a wrapper, not a venv's
        return None
    done = subprocess.run(["git", "-C", str(executable.parents[2]), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", default=os.environ.get("PORTABLE_CORPUS", "/work/shared/corpus"))
    parser.add_argument("--jobs", type=lambda v: max(1, int(v)), default=2,
                        help="fix processes at a time (2: the CI-sized machine; at least 1)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--only", type=Path, default=None)
    parser.add_argument("--no-validate", action="store_true")
    parser.add_argument("--portable", default=PORTABLE, help="the portable executable (default: this venv's)")
    args = parser.parse_args()
    _EXE[0] = args.portable
    root = Path(args.corpus)
    if not root.is_dir():
        emit({"benchmark": "corpus", "skipped": f"no corpus at {root} (bench/corpus_extract.py makes it)"})
        return 0
    paths = sorted(root.rglob("*.onnx"))
    if args.only:
        wanted = set(args.only.read_text().split())
        paths = [p for p in paths if str(p.relative_to(root)) in wanted]
    sources_file = root / "SOURCES.json"
    sources = json.loads(sources_file.read_text())["sources"] if sources_file.exists() else []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda p: one(p, root, Path(tmp), args), paths))
        if not args.no_validate:
            chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
            checked: dict[str, dict[str, Any]] = {}
            for part in pool.map(lambda c: _validate_chunk(c, args.timeout), chunks):
                checked.update(part)
            for row in rows:
                row["validate"] = checked[str(root / row["file"])]
    emit(
        {
            "benchmark": "corpus",
            "corpus": str(root),
            "sources": [{"repo": s["repo"], "commit": s["commit"], "files": len(s["files"])} for s in sources],
            "command": f"portable fix FILE -o OUT --force -q --format json (cap {args.timeout:g} s); "
            "portable validate FILES --format json (40 a process)",
            "jobs": args.jobs,
            "portable": {"executable": args.portable, "commit": _commit(Path(args.portable))},
            "wall_s": round(time.perf_counter() - start, 1),
            "summary": summarize(rows),
            "rows": rows,
            "machine": machine(),
            "versions": versions(),
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
