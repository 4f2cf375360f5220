"""ONNX Runtime: one runner per execution provider, sessions created with explicit providers.

GPU providers are timed through I/O binding: inputs are copied to the device once and
outputs stay there, so host copies are not counted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import UsageError, one_line
from portable.runners.base import Feeds, Runner, RunnerFailed, Step

__all__ = ["PROVIDER_ALIASES", "OnnxRuntimeRunner", "available_providers", "bind_io", "resolve_providers",
           "short_name"]

PROVIDER_ALIASES: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "trt": "TensorrtExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "dml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
}
_DEVICE_OF = {"CUDAExecutionProvider": "cuda", "TensorrtExecutionProvider": "cuda"}
_SKIP_BY_DEFAULT = {"AzureExecutionProvider"}


def short_name(provider: str) -> str:
    """``CUDAExecutionProvider`` -> ``cuda``."""
    for alias, full in PROVIDER_ALIASES.items():
        if full == provider:
            return alias
    return provider.removesuffix("ExecutionProvider").lower()


def available_providers() -> list[str]:
    import onnxruntime as ort

    return [p for p in ort.get_available_providers() if p not in _SKIP_BY_DEFAULT]


def resolve_providers(names: str | None, *, require_available: bool = True) -> list[str]:
    """``cpu,cuda`` -> full provider names; ``None`` -> every available provider."""
    available = available_providers()
    if not names:
        return available
    wanted = []
    for raw in (n.strip() for n in names.split(",") if n.strip()):
        full = raw if raw.endswith("ExecutionProvider") else PROVIDER_ALIASES.get(raw.lower(), "")
        if not full:
            raise UsageError(f"--ep {raw!r}: unknown execution provider (known: {', '.join(PROVIDER_ALIASES)})")
        if require_available and full not in available:
            raise UsageError(f"execution provider {full} is not available here (available: {', '.join(available)})")
        wanted.append(full)
    return list(dict.fromkeys(wanted))


def bind_io(session: Any, feeds: Feeds, device: str) -> Any:
    """An ``IOBinding`` with the inputs copied to ``device`` once and the outputs left there, so a timed
    ``run_with_iobinding`` counts no host transfer (how GPU providers are timed)."""
    import onnxruntime as ort

    binding = session.io_binding()
    for name, array in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), device, 0))
    for output in session.get_outputs():
        binding.bind_output(output.name, device)
    return binding


class OnnxRuntimeRunner(Runner):
    """``onnxruntime.InferenceSession`` on one execution provider (no silent fallback)."""

    kind = "onnxruntime"

    def __init__(self, model_path: str | Path, provider: str = "CPUExecutionProvider", *,
                 profile_dir: str | None = None) -> None:
        super().__init__()
        self.model_path = str(model_path)
        self.provider = provider
        self.name = f"ort-{short_name(provider)}"
        self.device = _DEVICE_OF.get(provider, "cpu")
        self._profile_dir = profile_dir
        self._session: Any = None
        self._binding: Any = None

    def load(self) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        if self._profile_dir:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(self._profile_dir) / self.name)
        start = time.perf_counter()
        try:
            self._session = ort.InferenceSession(self.model_path, options, providers=[self.provider])
        except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/InvalidGraph types
            raise RunnerFailed(f"ONNX Runtime ({self.provider}) cannot load {self.model_path}: "
                               f"{one_line(exc, limit=400)}") from None
        self.load_seconds = time.perf_counter() - start
        got = self._session.get_providers()
        if not got or got[0] != self.provider:
            raise RunnerFailed(f"ONNX Runtime gave providers {got} instead of {self.provider}")

    @property
    def session(self) -> Any:
        if self._session is None:
            raise RuntimeError(f"{self.name}: load() first")
        return self._session

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        try:
            return [np.asarray(o) for o in self.session.run(None, dict(feeds))]
        except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/RuntimeException types
            raise RunnerFailed(f"ONNX Runtime ({self.provider}) failed to run: {one_line(exc, limit=400)}") from None

    def prepare(self, feeds: Feeds) -> Step:
        session, plain = self.session, dict(feeds)
        if self.device == "cpu":
            return lambda: session.run(None, plain)
        binding = self._binding = bind_io(session, plain, self.device)
        return lambda: session.run_with_iobinding(binding)

    def synchronize(self) -> None:
        if self._binding is not None:
            self._binding.synchronize_outputs()

    def end_profiling(self) -> str | None:
        return self.session.end_profiling() if self._profile_dir else None

    def unload(self) -> None:
        self._binding = None
        self._session = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "provider": self.provider}
