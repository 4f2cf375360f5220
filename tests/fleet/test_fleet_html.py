"""``portable fleet report --format html``: one self-contained page (nothing fetched), rendered by a real
headless Chromium (Debian's ``chromium``): its screenshot shows the per-target bars in their colours and the
page holds every model's reason. Skipped, saying so, where Chromium is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from portable.fleet.records import StepRecord
from portable.fleet.store import Store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def _summary(supported: int, partitions: int, falls_back: bool) -> dict:
    return {"nodes": 10, "supported": supported, "partitions": partitions, "falls_back": falls_back,
            "loads": supported == 10, "fallback": {} if supported == 10 else {"Erf": 10 - supported}, "fixed_batch": None}


def _store(root: Path) -> Path:
    """A results store by hand: one model whole on both targets, one partly, one refused."""
    store = Store(root)
    settings = {"steps": ["export", "validate"], "targets": ["ort-cpu", "qnn"]}
    store.write_run({"fleet": "fleet.toml", "engine": "local", "portable": "test", "at": "now",
                     "models": [{"name": n, "model": f"{n}.py:build", "settings": settings} for n in ("good", "split", "bad")]})
    for name, qnn in (("good", _summary(10, 1, True)), ("split", _summary(7, 3, True))):
        store.put(StepRecord(name, "export", "pass", "", "k", 1.0, {"how": "export"}))
        store.put(StepRecord(name, "validate", "pass", "", "k", 1.0, {"targets": {"ort-cpu": _summary(10, 1, False), "qnn": qnn}}))
    store.put(StepRecord("bad", "export", "failed", "refused: PORT004: dynamic control flow op 'If'", "k", 1.0,
                         {"how": "export", "rules": ["PORT004"]}))
    store.put(StepRecord("bad", "validate", "skipped", "no portable file: export failed", "k", 0.0))
    return root


def test_the_page_is_self_contained_and_says_why(cli, tmp_path):
    page = tmp_path / "report.html"
    result = cli("fleet", "report", str(_store(tmp_path / "results")), "--format", "html", "-o", str(page))
    text = page.read_text()
    assert result.exit_code == 1  # a model was refused: the report's exit code says so
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text) and "<script" not in text
    assert "refused: PORT004: dynamic control flow op &#x27;If&#x27;" in text and '<td class="">qnn</td>' in text


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium)")
def test_headless_chromium_renders_the_bars_in_their_colours(cli, tmp_path):
    from PIL import Image

    page, shot = tmp_path / "report.html", tmp_path / "shot.png"
    cli("fleet", "report", str(_store(tmp_path / "results")), "--format", "html", "-o", str(page))
    subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    "--window-size=1200,900", page.as_uri()], check=True, capture_output=True, timeout=120)
    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    colours = {tuple(c) for c in np.unique(pixels, axis=0)}
    assert (0x3A, 0xA5, 0x5B) in colours  # whole (green): both models on ort-cpu, one on qnn
    assert (0xE5, 0xB5, 0x32) in colours  # partly (amber): the split model on qnn
    assert (0x9A, 0xA3, 0xB5) in colours  # no file (grey): the refused model
    assert (0xFB, 0xDC, 0xDC) in colours  # a red cell: the refusal


def test_report_merge_reads_fleet_results_folders_and_fleet_reports(cli, tmp_path):
    results = _store(tmp_path / "results")
    (tmp_path / "fleet.json").write_text(cli("fleet", "report", str(results), "--format", "json").output)
    merged = cli("report", "merge", str(results), str(tmp_path / "fleet.json"))
    assert merged.exit_code == 0, merged.output
    assert f"| {results} | qnn | 3 | 1 | 1 | 0 | 1 | 0 |" in merged.output
    assert f"| {tmp_path / 'fleet.json'} | ort-cpu | 3 | 2 | 0 | 0 | 1 | 0 |" in merged.output
