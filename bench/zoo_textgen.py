"""``make zoo-textgen``: the trained decoders' text-generation table (issue 34), every figure from the CLI.

    .venv/bin/python bench/zoo_textgen.py [--only smollm2] [--work DIR] > bench/results/zoo_textgen.json

For each trained decoder: ``portable export SPEC --task text-generation`` at the defaults (C 256, P 32) in
fp32 and fp16 (the proof's verdict, or the refusal's rule), ``portable quantize --weight-only`` on the pair the
model ships as (fp32 where it fits, else fp16), and ``portable compare --text README.md --no-compile`` on every
pair written (teacher-forced top-1 agreement and perplexity ratio against PyTorch, the CPU decode p50 in ms per
token). Each command runs in its own process (wall time and that child's peak RSS from ``wait4``). The table
goes to stdout's JSON and, between its markers, into docs/llm.md. A model whose set-up is missing
(``make venv`` installs SmolLM2, ``make qwen25`` Qwen2.5) is recorded as such, not skipped silently.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PORTABLE, ROOT, emit, machine, measure, versions  # noqa: E402

__all__ = ["DECODERS", "Decoder", "main"]

DOC = ROOT / "docs" / "llm.md"
RULE = re.compile(r"\bPORT\d{3}\b")
START, END = "<!-- zoo-textgen:start -->", "<!-- zoo-textgen:end -->"


@dataclass(frozen=True)
class Decoder:
    """One trained decoder: its SPEC, the precision its weight-only pair is made from, and its set-up."""

    name: str
    spec: str
    w8_from: str
    setup: str  # the make target that installs it

    def ready(self) -> str | None:
        """None, or why the model cannot be built here."""
        sys.path.insert(0, str(ROOT / "fixtures" / "models"))
        try:
            module = __import__(Path(self.spec.split(":")[0]).stem)
            module.folder()
        except Exception as exc:  # noqa: BLE001 - any failure to find the weights is "not set up"
            return f"not set up ({type(exc).__name__}: {str(exc)[:160]}); run `make {self.setup}`"
        return None


DECODERS = (
    Decoder("SmolLM2-135M-Instruct", "fixtures/models/smollm2.py:model", "fp32", "venv"),
    Decoder("Qwen2.5-Coder-0.5B-Instruct", "fixtures/models/qwen25.py:model", "fp16", "qwen25"),
)


def run(argv: list[str], log: Path) -> dict[str, Any]:
    """``portable ARGV`` in a child process (:func:`_common.measure`), stdout and stderr to ``log``.*: exit
    code, wall, peak RSS."""
    done = measure([PORTABLE, *argv], logs=log)
    return {"argv": ["portable", *argv], "exit_code": done.returncode, "wall_s": round(done.wall_s, 1),
            "peak_rss_gb": round(done.peak_rss_bytes / 2**30, 2)}


def _beside(stem: Path, suffix: str) -> Path:
    """``stem`` + ``suffix``: not ``with_suffix``, which would cut "Qwen2.5-..." at its first dot."""
    return stem.parent / f"{stem.name}{suffix}"


def _json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def _pair_bytes(manifest: Path) -> int | None:
    data = _json(manifest)
    files = [manifest.parent / g["file"] for g in data.get("graphs", {}).values()]
    return sum(f.stat().st_size for f in files) if files and all(f.exists() for f in files) else None


def export(decoder: Decoder, precision: str, work: Path) -> dict[str, Any]:
    """The export's exit code, and the proof's verdict or the refusal's rules."""
    stem = work / f"{decoder.name}-{precision}"
    step = run(["export", decoder.spec, "--task", "text-generation", "--precision", precision, "-o", str(stem),
                "--format", "json", "--force"], stem)
    manifest = _beside(stem, ".textgen.json")
    report = _json(_beside(stem, ".out"))
    rules = sorted({str(f["rule"]) for f in _findings(report) if f.get("severity") == "error" and f.get("rule")})
    rules = rules or sorted(set(RULE.findall(str(report.get("message") or ""))))  # refused before any graph
    proof = _json(manifest).get("proof") if step["exit_code"] == 0 else None
    written = step["exit_code"] == 0  # else a manifest there is an earlier run's
    return {**step, "manifest": str(manifest) if written else None, "bytes": _pair_bytes(manifest) if written else None,
            "proof": _proof_line(proof), "refused_by": rules, "message": report.get("message")}


def _findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(report.get("findings", []))
    for graph in report.get("reports", []):
        found += graph.get("findings", [])
    return found


def _proof_line(proof: Any) -> str | None:
    if not isinstance(proof, dict):
        return None
    return str(proof.get("message") or ("passed" if proof.get("passed") else "failed"))


def quantize(decoder: Decoder, manifest: str, work: Path) -> dict[str, Any]:
    stem = work / f"{decoder.name}-w8"
    step = run(["quantize", manifest, "-o", str(stem), "--weight-only", "--format", "json", "--force"], stem)
    out = _beside(stem, ".textgen.json")
    written = step["exit_code"] == 0
    return {**step, "manifest": str(out) if written else None, "bytes": _pair_bytes(out) if written else None}


def compare(decoder: Decoder, manifest: str, work: Path, label: str) -> dict[str, Any]:
    """Teacher forcing over the README and the CPU latency, against eager PyTorch."""
    stem = work / f"{decoder.name}-{label}-compare"
    report_path = _beside(stem, ".json")
    step = run(["compare", manifest, "--reference", decoder.spec, "--task", "text-generation", "--text", "README.md",
                "--no-compile", "--format", "json", "-o", str(report_path)], stem)
    report = _json(report_path)
    forced, latency = report.get("teacher_forced") or {}, report.get("latency", {}).get("onnxruntime-cpu", {})
    decode = latency.get("decode", {}).get("p50_s")
    return {**step, "passed": report.get("passed"), "judged_by": report.get("judged_by"),
            "top1_agreement": forced.get("top1_agreement"), "ppl_ratio": forced.get("ppl_ratio"),
            "ppl_onnxruntime": forced.get("ppl_onnxruntime"), "tokens_scored": forced.get("tokens"),
            "decode_p50_ms": round(decode * 1000, 1) if decode else None,
            "tokens_per_s": latency.get("tokens_per_s"), "message": report.get("message")}


def measure_decoder(decoder: Decoder, work: Path) -> dict[str, Any]:
    """Both float exports, the weight-only pair, and compare on each pair written."""
    missing = decoder.ready()
    if missing:
        return {"name": decoder.name, "spec": decoder.spec, "skipped": missing}
    pairs = {p: export(decoder, p, work) for p in ("fp32", "fp16")}
    source = pairs[decoder.w8_from].get("manifest")
    pairs["w8"] = quantize(decoder, source, work) if source else {"skipped": f"no {decoder.w8_from} pair"}
    pairs["w8"]["from"] = decoder.w8_from
    for label, pair in pairs.items():
        if pair.get("manifest"):
            pair["compare"] = compare(decoder, pair["manifest"], work, label)
    return {"name": decoder.name, "spec": decoder.spec, "pairs": pairs}


def _mb(size: int | None) -> str:
    return f"{size / 1e6:,.1f} MB" if size else ""


def _verdict(pair: dict[str, Any]) -> str:
    if pair.get("skipped"):
        return str(pair["skipped"])
    if pair["exit_code"] != 0:
        said = str(pair.get("message") or "see its log").split(";")[0].replace("|", "\\|")
        rules = ", ".join(pair.get("refused_by") or []) or said
        return f"refused (exit {pair['exit_code']}: {rules})"
    if not pair.get("proof"):
        return "written (judged by budgets)"
    return "proof: " + str(pair["proof"]).replace("|", "\\|")  # a table cell: "max |logits diff|"


def _row(name: str, label: str, pair: dict[str, Any]) -> str:
    cmp = pair.get("compare") or {}
    top1 = f"{cmp['top1_agreement'] * 100:.2f} %" if cmp.get("top1_agreement") is not None else ""
    ratio = f"{cmp['ppl_ratio']:.4f}x" if cmp.get("ppl_ratio") is not None else ""
    exit_ = f"exit {cmp['exit_code']} ({cmp.get('judged_by')})" if cmp else ""
    ms = f"{cmp['decode_p50_ms']} ms" if cmp.get("decode_p50_ms") else ""
    return f"| {name} | {label} | {_verdict(pair)} | {_mb(pair.get('bytes'))} | {exit_} | {top1} | {ratio} | {ms} |"


def table(models: list[dict[str, Any]]) -> str:
    head = ("| model | pair | export / quantize | both graphs | compare --text README.md | top-1 agreement "
            "| perplexity ratio | CPU decode p50 |\n|---|---|---|---|---|---|---|---|")
    rows = []
    for model in models:
        if model.get("skipped"):
            rows.append(f"| {model['name']} | | {model['skipped']} | | | | | |")
            continue
        for label, pair in model["pairs"].items():
            shown = f"w8 from {pair['from']}" if label == "w8" else label
            rows.append(_row(model["name"], shown, pair))
    return head + "\n" + "\n".join(rows)


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    before, rest = doc.split(START, 1)
    _, after = rest.split(END, 1)
    DOC.write_text(f"{before}{START}\n{text}\n{END}{after}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated name prefixes, e.g. smollm2")
    parser.add_argument("--work", type=Path, default=None, help="keep the pairs and logs here")
    args = parser.parse_args()
    chosen = [d for d in DECODERS if not args.only or any(d.name.lower().startswith(o.lower())
                                                          for o in args.only.split(","))]
    work = args.work or Path(tempfile.mkdtemp(prefix="zoo-textgen-"))
    work.mkdir(parents=True, exist_ok=True)
    models = [measure_decoder(d, work) for d in chosen]
    emit({"bench": "zoo_textgen", "machine": machine(), "versions": versions(), "work": str(work),
          "models": models})  # first: the figures survive a table that fails
    write_doc(table(models))
    return 0


if __name__ == "__main__":
    sys.exit(main())
