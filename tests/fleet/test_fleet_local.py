"""``portable fleet run`` with the local engine on the fixtures' models and two ONNX files from elsewhere, with
a model that hangs and one whose worker dies: every record as it should be, the reasons in the report, and a
rerun that does nothing. The run is the session's one (tests/fleet/conftest.py), read here, never changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from portable.fleet import check_fleet, fleet_report, run_fleet_file
from portable.fleet.render import render
from portable.fleet.store import Store


def _records(results: Path) -> dict[tuple[str, str], dict]:
    return {(r.model, r.step): r.to_dict() for r in Store(results).records()}


def test_every_good_model_is_whole_and_each_trouble_is_recorded_with_its_reason(local_run):
    results, summary = local_run
    records = _records(results)
    assert summary["exit_code"] == 1 and summary["ran"] == summary["records"] == len(records) == 20
    assert {s for (m, s), r in records.items() if m == "cnn" and r["status"] == "pass"} == {
        "export", "validate", "live", "quantize", "compare"}
    assert records[("opset13", "export")]["data"]["how"] == "fix" and records[("opset13", "compare")]["status"] == "pass"
    assert "opset" in records[("squeezenet", "export")]["data"]["remedies"]
    assert records[("gate", "export")]["status"] == "pass"
    cond = records[("cond", "export")]
    assert cond["status"] == "failed" and cond["data"]["rules"] == ["PORT004"] and cond["reason"].startswith("refused: PORT004")
    assert records[("hang", "export")]["status"] == "timeout" and "4 s" in records[("hang", "export")]["reason"]
    assert records[("killer", "export")]["status"] == "killed" and "SIGKILL" in records[("killer", "export")]["reason"]
    for model in ("cond", "hang", "killer"):
        assert records[(model, "validate")]["status"] == "skipped"
    quantized = records[("cnn", "quantize")]["data"]
    assert quantized["min_sqnr_db"] > 20 and quantized["top1_agreement"] >= 0.9


def test_the_report_says_why_per_target_and_per_model(local_run):
    results, _ = local_run
    report = fleet_report(results)
    text = render(report, "md")
    assert "| ort-cpu | 7 | 3 (43 %) | 0 (0 %) | 0 (0 %) | 4 (57 %) | 1 (100 %) | 0 (0 %) | 0 (0 %) | 1/7 |" in text
    assert "- cond export: **failed**: refused: PORT004" in text
    assert "- hang export: **timeout**: timed out after 4 s (the step's limit); killed" in text
    assert "- killer export: **killed**: the step's process was killed by SIGKILL" in text
    rows = {m["name"]: m for m in json.loads(render(report, "json"))["models"]}
    assert rows["cnn"]["passed"] and rows["cnn"]["export"] == "exported" and rows["cnn"]["contract"] == "portable"
    assert rows["cnn"]["parity"].startswith("pass (max abs") and "dB" in rows["cnn"]["int8"]
    assert rows["opset13"]["export"].startswith("fixed (") and rows["cond"]["export"] == "refused: PORT004"
    assert report.exit_code == 1


def test_a_rerun_does_nothing_and_a_changed_setting_reruns_only_what_depends_on_it(local_run, fleet_file, tmp_path):
    results = Path(shutil.copytree(local_run[0], tmp_path / "results"))  # the session's run stays as it was
    heard: list[tuple[str, str, bool]] = []
    again = run_fleet_file(fleet_file, results, on_record=lambda record, kept: heard.append((record.model, record.step, kept)))
    # a killed step is the machine's fault, not the model's: the next run tries it again; nothing else runs
    assert [(m, s) for m, s, kept in heard if not kept] == [("killer", "export")]
    assert again.kept == local_run[1]["records"] - 1 and again.exit_code == local_run[1]["exit_code"]
    heard.clear()
    changed = fleet_file.parent / "changed.toml"  # beside the first: the same model paths
    changed.write_text(fleet_file.read_text().replace('targets = ["ort-cpu", "qnn"]', 'targets = ["ort-cpu", "tract"]'))
    check = check_fleet(changed)
    assert check.models[0].settings.targets == ("ort-cpu", "tract")
    run_fleet_file(changed, results, jobs=2,
                   on_record=lambda record, kept: heard.append((record.model, record.step, kept or record.status == "skipped")))
    ran_now = {(model, step) for model, step, kept in heard if not kept}  # (a skipped step is written again, not run)
    assert ran_now == {("cnn", "validate"), ("cnn", "live"), ("opset13", "validate"), ("squeezenet", "validate"),
                       ("killer", "export")}
    heard.clear()
    raised = fleet_file.parent / "raised.toml"  # the hang's time limit raised: its timed-out export runs again
    assert fleet_file.read_text().count("timeout-s = 4\n") == 1
    raised.write_text(fleet_file.read_text().replace("timeout-s = 4\n", "timeout-s = 5\n"))
    run_fleet_file(raised, results, on_record=lambda record, kept: heard.append((record.model, record.step, kept)))
    assert ("hang", "export", False) in heard and ("cnn", "export", True) in heard
    hang = Store(results).get("hang", "export")
    assert hang is not None and hang.status == "timeout" and hang.data["limits"]["timeout_s"] == 5


HOLDER = '''
import multiprocessing
import time
from multiprocessing import util
from pathlib import Path

from portable.fleet import Step, StepOutcome, register

HELD = []


def hold(ctx):
    """Hold a semaphore till exit as tqdm's lock does (a named one: the step's process is not forked plainly),
    with a slow exit handler before its clean-up."""
    lock = multiprocessing.get_context("forkserver").RLock()
    HELD.append(lock)
    util.Finalize(None, time.sleep, (1.0,), exitpriority=10)
    Path(ctx.args[0]).write_text(lock._semlock.name)
    return StepOutcome("pass")


register(Step("hold", hold, "holds a semaphore till its process exits", needs_file=False, depends=()))
'''


def test_a_step_that_sent_its_outcome_ends_on_its_own_and_leaves_nothing_behind(tmp_path, monkeypatch):
    """Its exit handlers run (not killed once its outcome is in): a library's semaphore is unlinked, not leaked
    in /dev/shm (the resource tracker's "leaked semaphore objects" at exit)."""
    from portable.fleet.local import run_alone
    from portable.fleet.records import StepContext
    from portable.fleet.work import Task

    (tmp_path / "fleet_holder_step.py").write_text(HOLDER)
    monkeypatch.syspath_prepend(str(tmp_path))  # the step's process takes this process's sys.path
    named = tmp_path / "semaphore.txt"
    context = StepContext("m", "m.py:build", (), None, (), {}, None, str(tmp_path), (str(named),))
    done = run_alone(Task("m", "hold", "k", context, ("fleet_holder_step",), timeout_s=60))
    assert done.outcome.status == "pass" and named.read_text().startswith("/mp-")
    assert not Path("/dev/shm", "sem." + named.read_text().lstrip("/")).exists()
