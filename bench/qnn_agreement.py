"""The qnn profile against Qualcomm's HTP on the fixtures and real exports (issue 47 item 2; docs/targets.md,
"The QNN HTP's answers, as a source").

    python bench/qnn_agreement.py [FILE.onnx ...] > bench/results/qnn_agreement.json

For every file (by default: each rule fixture of fixtures/rules, the fix cases of fixtures/fix, and portable's
exports of fixtures/models' cnn, transformer and minilm at batch 1 and dynamic), ``portable.validate`` with
``--target qnn --live``: the offline line, the HTP's verdict, and the disagreements the live check names (the ops
of the nodes the profile and the HTP judge differently, over the nodes the HTP was given). Each disagreement is
either fixed in the profile (its measured source) or listed in docs/targets.md as a known difference.
"""

from __future__ import annotations

import json
import runpy
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPORTS = ("cnn", "transformer", "minilm")


def _fixtures(folder: Path) -> list[Path]:
    rules = runpy.run_path(str(ROOT / "fixtures" / "rules" / "build.py"))
    fix = runpy.run_path(str(ROOT / "fixtures" / "fix" / "build.py"))
    paths = list(rules["write_all"](folder / "rules"))
    for name in ("opset13", "functions", "batch_shapes", "named_dims", "lost_dims", "control_flow"):
        paths.append(fix["write"](name, folder / "fix"))
    return paths


def _exports(folder: Path) -> list[Path]:
    from portable.exporters.spec_export import export_spec

    paths = []
    for name in EXPORTS:
        for batch in (1, "dynamic"):
            path = folder / f"{name}.b{batch}.onnx"
            try:
                export_spec(f"{ROOT / 'fixtures' / 'models' / name}.py:build", path, batch=batch)
            except Exception as exc:  # noqa: BLE001 - a fixture that does not export is skipped, said
                print(f"{name} at batch {batch}: not exported ({exc})", file=sys.stderr)
                continue
            paths.append(path)
    return paths


def _one(path: Path) -> dict[str, Any]:
    import portable
    from portable.policy import Policy

    report = portable.validate(path, Policy(targets=("qnn",), targets_live=True))
    if report.error is not None or not report.targets:
        return {"file": f"{path.parent.name}/{path.name}", "error": report.error}
    qnn = report.targets[0]
    live = dict(qnn.live)
    return {"file": f"{path.parent.name}/{path.name}", "offline": qnn.line().split("; live (")[0], "live": live.get("verdict"),
            "disagreements": live.get("disagreements", "not compared"),
            "refused": [{"op": o, "node": n, "reason": r[:200]} for o, n, r in qnn.live_refusals]}


def main(paths: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="qnn-agree-") as tmp:
        files = [Path(p) for p in paths] or [*_fixtures(Path(tmp)), *_exports(Path(tmp))]
        rows = [_one(p) for p in files]
    differ = [r for r in rows if r.get("disagreements") not in ("0", "not compared", None)]
    ops = Counter(part.split(" (")[0].strip() for r in differ for part in r["disagreements"].split(": ", 1)[1].split("), "))
    json.dump({"files": len(rows), "with_disagreements": len(differ), "ops": dict(ops.most_common()), "rows": rows},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
