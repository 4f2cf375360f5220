"""``portable fleet run --engine ray`` on a real two-node Ray cluster on loopback (a head node and a second
node, one CPU each), started once for the session: the same records and the same report as the local engine
on the same fleet file; a hang and a worker that dies on every attempt recorded with their reasons; and a
worker killed in the middle of a step (``fixtures/fleet/gate.py`` waits for it) retried by Ray, the fleet
complete. Skipped only where Ray is not installed (`make test` installs it: the `ray` extra)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'portable-onnx[ray]'; make test installs it)")

from portable.fleet import fleet_report, run_fleet_file  # noqa: E402
from portable.fleet.render import render  # noqa: E402
from portable.fleet.store import Store  # noqa: E402

RAY = str(Path(sys.executable).parent / "ray")
GATE_PID = "first.pid"  # fixtures/fleet/gate.py's FIRST


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ray_processes() -> list[psutil.Process]:
    """Ray's processes still alive on this machine (zombies are dead: their parent has not reaped them yet)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        text = " ".join(proc.info.get("cmdline") or []) + " " + (proc.info.get("name") or "")
        if ("ray::" in text or "raylet" in text or "gcs_server" in text) and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _start_cluster(port: int, env: dict[str, str]) -> None:
    common = ["--num-cpus", "1", "--object-store-memory", str(200 * 1024**2), "--disable-usage-stats"]
    subprocess.run([RAY, "start", "--head", "--port", str(port), "--include-dashboard=false", *common], check=True, env=env,
                   capture_output=True, timeout=120)
    subprocess.run([RAY, "start", "--address", f"127.0.0.1:{port}", *common], check=True, env=env, capture_output=True,
                   timeout=120)


def _stop_cluster(env: dict[str, str]) -> None:
    subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
    deadline = time.monotonic() + 30
    while _ray_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _ray_processes(), "Ray processes outlived the cluster"


def _kill_the_gated_worker(gate: Path, killed: dict[str, Any], stop: threading.Event) -> None:
    """When gate.py's first attempt has written its process id (it then waits to be killed), SIGKILL the Ray
    worker running that step (the step's process is forked from a server in the worker: its ancestor)."""
    while not stop.wait(0.1):
        text = (gate / GATE_PID).read_text().strip() if (gate / GATE_PID).exists() else ""
        if text:
            step = psutil.Process(int(text))
            worker = next(p for p in step.parents() if " ".join(p.cmdline()).startswith("ray::"))
            killed.update(step=step.pid, worker=worker.pid, title=" ".join(worker.cmdline()))
            worker.send_signal(signal.SIGKILL)
            return


def _run_beside_the_cluster(fixtures: Path, folder: Path) -> dict[str, Any]:
    """A one-step fleet run without ``--address`` while the test's cluster (``ray start``) is up: the run's own
    local cluster, one CPU, started and stopped by the run."""
    folder.mkdir()
    fleet = folder / "fleet.toml"
    fleet.write_text(f'[defaults]\ntargets = ["ort-cpu"]\nsteps = ["validate"]\n\n[[model]]\nname = "opset13"\n'
                     f'model = "{fixtures / "opset13.onnx"}"\n')
    try:
        summary = run_fleet_file(fleet, folder / "results", engine="ray", jobs=1)
    except Exception as exc:  # noqa: BLE001 - kept for its test: the cluster's other tests stand on their own
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"exit_code": summary.exit_code, "records": [(r.model, r.step, r.status, r.engine) for r in summary.records]}


@pytest.fixture(scope="session")
def ray_run(once, fleet_file) -> tuple[Path, dict[str, Any]]:
    """The session's fleet on a two-node loopback cluster (started and stopped here, once), the gated worker
    killed as soon as its step has started: the results folder and what happened."""

    def make(folder: Path) -> dict[str, Any]:
        gate, port = folder / "gate", _free_port()
        # the workers' environment is the nodes'; a test cluster without token auth whatever ~/.ray holds (a token
        # there makes `ray start --head` ask for it and `ray start --address` not send it, Ray 2.60)
        env = os.environ | {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1", "RAY_AUTH_MODE": "disabled",
                            "PORTABLE_FLEET_GATE": str(gate)}
        killed: dict[str, Any] = {}
        stop = threading.Event()
        killer = threading.Thread(target=_kill_the_gated_worker, args=(gate, killed, stop), daemon=True)
        try:
            _start_cluster(port, env)
            killer.start()
            summary = run_fleet_file(fleet_file, folder / "results", engine="ray", address=f"127.0.0.1:{port}")
            gone = not killed or not _alive(killed["step"])
            stop.set()  # the gated step is done: nothing more to kill
            beside = _run_beside_the_cluster(fleet_file.parent, folder / "beside")
        finally:
            stop.set()
            _stop_cluster(env)
        return {"exit_code": summary.exit_code, "ran": summary.ran, "records": len(summary.records), "killed": killed,
                "step_died_with_its_worker": gone, "beside": beside}

    folder, summary = once("ray", make)
    return folder / "results", summary


def _steady(text: str) -> str:
    """``text`` with the seconds a runtime's answer quotes made one word."""
    return re.sub(r"\b\d+(\.\d+)? s in the simulator", "N s in the simulator", text)


def _portable(report_json: str) -> dict:
    """The report without what differs by run: its folder, the run's line (the engine, the time) and the seconds a
    runtime's answer quotes (the HTP's "a run on seeded inputs succeeds (0.15 s in the simulator)")."""
    data = json.loads(_steady(report_json))
    for key in ("run", "source"):
        data.pop(key)
    return data


def test_the_cluster_gives_the_local_engines_records_and_report(local_run, ray_run):
    (local, local_summary), (on_ray, ray_summary) = local_run, ray_run
    assert ray_summary["exit_code"] == local_summary["exit_code"] == 1  # cond is refused, hang and killer fail
    assert ray_summary["records"] == local_summary["records"] == 20
    assert {r.engine for r in Store(on_ray).records()} == {"ray"}
    # the same records (the key, the verdict and its reason, what was measured, the file's digest), the same report
    ray_json, local_json = (render(fleet_report(folder), "json") for folder in (on_ray, local))
    assert _portable(ray_json) == _portable(local_json)
    # the Markdown page, but for its run's line
    ray_md, local_md = (_steady(render(fleet_report(folder), "md")).split("\n", 3)[3] for folder in (on_ray, local))
    assert ray_md == local_md


def test_a_hang_and_a_dying_step_on_the_cluster_are_recorded_with_their_reasons(ray_run):
    records = {(r.model, r.step): r for r in Store(ray_run[0]).records()}
    hang, killer = records[("hang", "export")], records[("killer", "export")]
    assert hang.status == "timeout" and hang.reason == "timed out after 4 s (the step's limit); killed"
    # the step's own process died, not its worker: nothing for Ray to retry, the record says how it died
    assert killer.status == "killed" and killer.reason == "the step's process was killed by SIGKILL" and killer.attempts == 1
    assert records[("killer", "validate")].status == "skipped" and records[("cnn", "compare")].status == "pass"


def test_a_worker_killed_during_a_step_is_retried_by_ray_and_the_fleet_completes(ray_run):
    results, summary = ray_run
    assert summary["killed"], "the gated step was never seen running"
    assert "ray::gate/export" in summary["killed"]["title"]  # the Ray worker running the step, killed mid-step
    assert summary["step_died_with_its_worker"]
    gate = Store(results).get("gate", "export")
    assert gate is not None and gate.status == "pass" and gate.attempts == 2 and gate.artefact


def test_a_run_without_an_address_starts_its_own_cluster_beside_one_running_here(ray_run):
    """Ray's own ``ray.init()`` would join the cluster ``ray start`` left running (and refuse ``num_cpus``
    there): ``portable fleet run --engine ray`` without ``--address`` failed with an internal error (exit 3)."""
    beside = ray_run[1]["beside"]
    assert "error" not in beside, beside.get("error")
    assert beside["records"] == [["opset13", "validate", "failed", "ray"]]  # opset 13: PORT001, a finding
    assert beside["exit_code"] == 1
