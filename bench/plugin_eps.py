"""Other targets' own compilers on this Linux CPU, as ONNX Runtime plugin execution providers (issue 47 item 6).

    python bench/plugin_eps.py MODEL.onnx [MODEL.onnx ...] > plugin_eps.json

Needs only onnxruntime, onnx and numpy, plus whichever plugin packages are installed: ``onnxruntime_qnn``
(onnxruntime-qnn, Qualcomm's HTP simulator) and ``onnxruntime_ep_openvino`` (onnxruntime-ep-openvino, Intel's
OpenVINO EP: CPU, GPU and NPU plugins, of which this machine has the CPU). It does not import portable, so it runs
in a scratch environment that holds a plugin the project does not install (docs/targets.md, "Others of the same
kind", says how it was run). Per plugin and model: the devices it reports, the nodes ONNX Runtime gave it and the
CPU provider (``get_provider_graph_assignment_info``), its partitions, the session time, one run on seeded
inputs (batch 1) and the max abs difference from ONNX Runtime's CPU provider on the same inputs.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections import Counter
from typing import Any

import numpy as np
import onnxruntime as ort

# package -> (the EP name, the ep_metadata filter of the device to use, its provider options)
PLUGINS: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "onnxruntime_qnn": ("QNNExecutionProvider", {}, {}),
    "onnxruntime_ep_openvino": ("OpenVINOExecutionProvider", {"ov_device": "CPU"}, {}),
}


def _feeds(session: Any) -> dict[str, np.ndarray]:
    rng, out = np.random.default_rng(0), {}
    for spec in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.shape]
        dtype = {"tensor(float)": np.float32, "tensor(int64)": np.int64}.get(spec.type, np.float32)
        out[spec.name] = rng.standard_normal(shape).astype(dtype) if dtype == np.float32 else rng.integers(0, 2, shape).astype(dtype)
    return out


def _register(package: str) -> tuple[str, list[Any], dict[str, str]] | None:
    try:
        module = importlib.import_module(package)
    except ImportError:
        return None
    name, wanted, options = PLUGINS[package]
    ort.register_execution_provider_library(name, module.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == name
               and all(d.ep_metadata.get(k) == v for k, v in wanted.items())]
    if package == "onnxruntime_qnn":
        options = {**options, "backend_path": module.get_qnn_htp_path()}
    return name, devices, options


def _session(path: str, name: str, devices: list[Any], options: dict[str, str]) -> tuple[Any, float]:
    """A session on the plugin's first device; with no devices, on the provider ``name`` built into this onnxruntime
    (onnxruntime-openvino's build carries OpenVINOExecutionProvider inside its own onnxruntime package)."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if devices:
        so.add_provider_for_devices(devices[:1], options)
    start = time.perf_counter()
    session = ort.InferenceSession(path, so, providers=None if devices else [(name, options), "CPUExecutionProvider"])
    return session, time.perf_counter() - start


def _one(path: str, name: str, devices: list[Any], options: dict[str, str]) -> dict[str, Any]:
    cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = _feeds(cpu)
    expected = cpu.run(None, feeds)
    try:
        session, seconds = _session(path, name, devices, options)
    except Exception as exc:  # noqa: BLE001 - the EP's refusal is the measurement
        return {"model": path, "loads": False, "error": " ".join(str(exc).split())[:300]}
    placed: Counter[str] = Counter()
    partitions = 0
    for sub in session.get_provider_graph_assignment_info():
        placed[sub.ep_name] += len(sub.get_nodes())
        partitions += sub.ep_name == name
    start = time.perf_counter()
    got = session.run(None, feeds)
    run_s = time.perf_counter() - start
    worst = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(e, np.float64)))) for a, e in zip(got, expected))
    return {"model": path, "loads": True, "session_s": round(seconds, 3), "run_s": round(run_s, 4),
            "nodes": dict(placed), "partitions": partitions, "max_abs_vs_cpu": worst}


def main(paths: list[str]) -> None:
    out: dict[str, Any] = {"onnxruntime": ort.__version__, "plugins": {}, "built_in": {}}
    if "OpenVINOExecutionProvider" in ort.get_available_providers():  # onnxruntime-openvino's own build
        out["built_in"]["OpenVINOExecutionProvider"] = [_one(p, "OpenVINOExecutionProvider", [], {"device_type": "CPU"})
                                                        for p in paths]
    for package in PLUGINS:
        found = _register(package)
        if found is None:
            out["plugins"][package] = "not installed"
            continue
        name, devices, options = found
        version = getattr(importlib.import_module(package), "__version__", "?")
        out["plugins"][package] = {"version": version, "ep": name,
                                   "devices": [dict(d.ep_metadata) | {"type": str(d.device.type)} for d in devices],
                                   "models": [_one(p, name, devices, options) for p in paths] if devices else "no device"}
    json.dump(out, sys.stdout, indent=1, default=str)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
