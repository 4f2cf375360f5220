"""Extract every ``*.onnx`` of other projects' mirrors into a corpus folder (issue 26).

Usage: ``python bench/corpus_extract.py OUT_DIR MIRROR_GIT_DIR...`` where each mirror is a bare git
directory named ``.../owner+name/repo`` (what the session's ``fetch`` gives). Files go to
``OUT_DIR/<owner+name>/<path>``; Git LFS pointers and files over 50 MB are skipped. ``OUT_DIR/SOURCES.json``
records each repo, its commit and every file taken or skipped, so the corpus can be rebuilt.
The corpus itself is not committed (third-party test files); this script is what regenerates it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MAX_BYTES = 50 * 1024 * 1024
LFS = b"version https://git-lfs.github.com/spec/"


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def _blobs(git_dir: Path) -> list[tuple[str, int, str]]:
    out = _git(git_dir, "ls-tree", "-r", "-l", "-z", "HEAD").decode()
    rows = []
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        _mode, kind, sha, size = meta.split()
        if kind == "blob" and path.endswith(".onnx"):
            # a blob the snapshot lacks (its largest files may be absent) has no size: -1
            rows.append((path, int(size) if size.isdigit() else -1, sha))
    return rows


def extract(out: Path, git_dir: Path) -> dict[str, object]:
    name = git_dir.parent.name if git_dir.name == "repo" else git_dir.name
    commit = _git(git_dir, "rev-parse", "HEAD").decode().strip()
    taken, skipped = [], []
    for path, size, sha in _blobs(git_dir):
        if size > MAX_BYTES:
            skipped.append({"path": path, "why": f"{size} bytes > 50 MB"})
            continue
        if size < 0:
            skipped.append({"path": path, "why": "blob absent from the snapshot"})
            continue
        data = _git(git_dir, "cat-file", "blob", sha)
        if data.startswith(LFS):
            skipped.append({"path": path, "why": "git-lfs pointer"})
            continue
        target = out / name / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        taken.append(path)
    repo = name.replace("+", "/", 1)
    return {"repo": repo, "commit": commit, "files": taken, "skipped": skipped}


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    sources = [extract(out, Path(g)) for g in argv[1:]]
    (out / "SOURCES.json").write_text(json.dumps({"sources": sources}, indent=1) + "\n")
    for s in sources:
        print(f"{s['repo']}@{str(s['commit'])[:10]}: {len(s['files'])} taken, {len(s['skipped'])} skipped")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
