"""``portable fleet run --engine ray`` on a real two-node Ray cluster on loopback (a head node and a second
node, one CPU each): the same records and the same report as the local engine, and a worker killed during a
step is retried by Ray and the fleet completes. Skipped only where Ray is not installed (`make test`
installs it: the `ray` extra)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from support import load_builder

pytest.importorskip("ray", reason="Ray is not installed (pip install 'portable-onnx[ray]'; make test installs it)")

from portable.fleet import fleet_report, run_fleet_file  # noqa: E402
from portable.fleet.render import render  # noqa: E402

fleets = load_builder("fleet")
RAY = str(Path(sys.executable).parent / "ray")
ENV = os.environ | {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ray_processes() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        text = " ".join(proc.info.get("cmdline") or []) + " " + (proc.info.get("name") or "")
        if "ray::" in text or "raylet" in text or "gcs_server" in text:
            found.append(proc)
    return found


@pytest.fixture(scope="module")
def cluster():
    """A head node and a second node on loopback, one CPU each; stopped (and checked gone) afterwards."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    try:
        subprocess.run([RAY, "start", "--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard=false",
                        "--disable-usage-stats"], check=True, env=ENV, capture_output=True, timeout=120)
        subprocess.run([RAY, "start", "--address", address, "--num-cpus", "1", "--disable-usage-stats"], check=True,
                       env=ENV, capture_output=True, timeout=120)
        yield address
    finally:
        subprocess.run([RAY, "stop", "--force"], env=ENV, capture_output=True, timeout=120)
        deadline = time.monotonic() + 20
        while _ray_processes() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _ray_processes(), "Ray processes outlived the cluster"


def _portable(report_json: str) -> dict:
    data = json.loads(report_json)
    for key in ("run", "source"):
        data.pop(key)
    return data


def test_the_cluster_gives_the_local_engines_records_and_report(cluster, tmp_path):
    path = fleets.write(tmp_path / "fleet")
    local = run_fleet_file(path, tmp_path / "local", jobs=2)
    on_ray = run_fleet_file(path, tmp_path / "ray", engine="ray", address=cluster)
    assert on_ray.exit_code == local.exit_code == 1  # cond is refused
    assert {r.engine for r in on_ray.records} == {"ray"} and len(on_ray.records) == len(local.records) == 13
    assert _portable(render(fleet_report(tmp_path / "ray"), "json")) == _portable(render(fleet_report(tmp_path / "local"), "json"))
    ray_md, local_md = (render(fleet_report(tmp_path / kind), "md") for kind in ("ray", "local"))
    assert ray_md.split("\n", 3)[3] == local_md.split("\n", 3)[3]  # all but the run's line (engine, time)


def _kill_when_running(name: str, killed: list[int]) -> None:
    """SIGKILL the Ray worker that runs the task ``name`` (its process title is ``ray::NAME``), once."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not killed:
        for proc in psutil.process_iter(["cmdline"]):
            if f"ray::{name}" in " ".join(proc.info.get("cmdline") or []):
                time.sleep(1.5)  # mid-step: the build sleeps 5 s, and the attempt has told the monitor it started
                os.kill(proc.pid, signal.SIGKILL)
                killed.append(proc.pid)
                return
        time.sleep(0.2)


def test_a_worker_killed_during_a_step_is_retried_and_the_fleet_completes(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("PORTABLE_FLEET_SLOW_S", "5")
    path = fleets.write(tmp_path / "fleet", models=("slow", "opset13"))
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_running, args=("slow/export", killed))
    killer.start()
    summary = run_fleet_file(path, tmp_path / "results", engine="ray", address=cluster)
    killer.join()
    assert killed, "the slow step was never seen running"
    slow = next(r for r in summary.records if r.model == "slow")
    assert slow.status == "pass" and slow.attempts == 2 and summary.exit_code == 0
    assert {r.model for r in summary.records} == {"slow", "opset13"}
