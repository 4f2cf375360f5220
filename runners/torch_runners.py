"""PyTorch runners: eager, and ``torch.compile`` (inductor) with a chosen mode.

Inputs are given positionally in the ONNX graph's input order; outputs are the flattened
pytree leaves of the module's result, which is the order the exporter gives the ONNX
outputs. ``torch.compile`` uses ``dynamic=False``: each batch size gets its own static
graph, and the first call per batch size (compilation included) is timed apart.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from portable.errors import one_line
from portable.runners.base import Feeds, Runner, RunnerFailed, Step

__all__ = ["COMPILE_MODES", "CompiledRunner", "EagerRunner", "tf32_mode"]

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """Allow or forbid TF32 for CUDA matmuls and cuDNN convolutions, restoring afterwards."""
    import torch

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _to_numpy(value: Any) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        return tensor.cpu().numpy()
    return np.asarray(value)


def _leaves(result: Any) -> list[Any]:
    from torch.utils import _pytree

    if hasattr(result, "to_tuple"):  # transformers ModelOutput: the exporter flattens its values
        result = result.to_tuple()
    return [leaf for leaf in _pytree.tree_leaves(result) if leaf is not None]


class EagerRunner(Runner):
    """The module as it is, on ``device``, under ``torch.no_grad``."""

    kind = "torch-eager"

    def __init__(self, module: Any, device: str = "cpu", name: str = "eager") -> None:
        super().__init__()
        self.module = module
        self.device = device
        self.name = name
        self._fn: Any = None

    def load(self) -> None:
        start = time.perf_counter()
        self.module.eval().to(self.device)
        self._fn = self._build()
        self.load_seconds = time.perf_counter() - start

    def _build(self) -> Any:
        return self.module

    def _tensors(self, feeds: Feeds) -> list[Any]:
        import torch

        return [torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in feeds.values()]

    def _call(self, args: list[Any]) -> Any:
        import torch

        if self._fn is None:
            raise RuntimeError(f"{self.name}: load() first")
        with torch.no_grad():
            return self._fn(*args)

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        try:
            result = self._call(self._tensors(feeds))
        except Exception as exc:  # noqa: BLE001 - inductor, CUDA out of memory, a shape mismatch: this runner's failure
            raise RunnerFailed(f"{self.name} failed: {one_line(exc, limit=400)}") from None
        return [_to_numpy(leaf) for leaf in _leaves(result)]

    def prepare(self, feeds: Feeds) -> Step:
        args = self._tensors(feeds)
        return lambda: self._call(args)

    def synchronize(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def unload(self) -> None:
        self._fn = None


class CompiledRunner(EagerRunner):
    """``torch.compile(module, mode=..., dynamic=False)`` with the inductor backend."""

    kind = "torch-compile"

    def __init__(self, module: Any, device: str = "cpu", mode: str = "default", name: str = "compiled") -> None:
        super().__init__(module, device, name)
        if mode not in COMPILE_MODES:
            raise ValueError(f"unknown compile mode {mode!r}")
        self.mode = mode

    def _build(self) -> Any:
        import torch

        return torch.compile(self.module, mode=None if self.mode == "default" else self.mode,
                             backend="inductor", dynamic=False)

    def _call(self, args: list[Any]) -> Any:
        if self.mode != "default":  # CUDA graph trees (reduce-overhead, max-autotune): a new iteration starts
            import torch

            torch.compiler.cudagraph_mark_step_begin()
        return super()._call(args)

    def unload(self) -> None:
        import torch

        super().unload()
        torch._dynamo.reset()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "mode": self.mode}
