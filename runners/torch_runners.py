"""PyTorch runners: eager, and ``torch.compile`` (inductor) with a chosen mode.

Inputs are given positionally in the ONNX graph's input order; outputs are the flattened
pytree leaves of the module's result, which is the order the exporter gives the ONNX
outputs. ``torch.compile`` uses ``dynamic=False``: each batch size gets its own static
graph, and the first call per batch size (compilation included) is timed apart.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from portable.errors import one_line
from portable.runners.base import Feeds, Runner, RunnerFailed, Step

__all__ = ["COMPILE_MODES", "CompiledRunner", "EagerRunner", "ExampleArgs", "Float64Runner", "float64_outputs", "float64_reference",
           "structured", "tf32_mode"]

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


def structured(examples: Any) -> bool:
    """Example inputs that are not a flat tuple of tensors (a list, a dict, nested): the graph's flat
    inputs must be put back into their structure before the module is called."""
    import torch

    return examples is not None and any(not isinstance(a, torch.Tensor) for a in examples)


class ExampleArgs:
    """The graph's flat inputs put back into the example inputs' structure.

    The exporter makes one graph input per tensor leaf of the example inputs (lists, tuples, dicts,
    nested); this rebuilds that structure around the feeds, keeping the examples' non-tensor leaves, each
    tensor in its example's dtype. ``portable export``'s verify and ``portable compare`` call a module
    that takes a dict or a list through it alike.
    """

    def __init__(self, examples: Any) -> None:
        from torch.utils import _pytree

        self._leaves, self._spec = _pytree.tree_flatten(tuple(examples))
        self._slots = [i for i, leaf in enumerate(self._leaves) if _is_tensor(leaf)]

    def __call__(self, arrays: list[np.ndarray], device: str) -> list[Any]:
        import torch
        from torch.utils import _pytree

        if len(arrays) != len(self._slots):
            raise RunnerFailed(f"the graph has {len(arrays)} inputs, the example inputs {len(self._slots)} tensors")
        leaves = list(self._leaves)
        for slot, array in zip(self._slots, arrays):
            example = self._leaves[slot]
            tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=_numpy_dtype(array)))
            leaves[slot] = tensor.to(device=device, dtype=example.dtype)
        return list(_pytree.tree_unflatten(leaves, self._spec))


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _numpy_dtype(array: np.ndarray) -> Any:
    return np.float32 if array.dtype.name == "bfloat16" else array.dtype  # torch cannot read ml_dtypes' bfloat16


class EagerRunner(Runner):
    """The module as it is, on ``device``, under ``torch.no_grad``. With ``examples`` (the example inputs of
    a module that takes a list or a dict), the flat feeds are put back into their structure first."""

    kind = "torch-eager"

    def __init__(self, module: Any, device: str = "cpu", name: str = "eager", examples: Any = None) -> None:
        super().__init__()
        self.module = module
        self.device = device
        self.name = name
        self._fn: Any = None
        self._structure = ExampleArgs(examples) if examples is not None else None

    def load(self) -> None:
        start = time.perf_counter()
        self.module.eval().to(self.device)
        self._fn = self._build()
        self.load_seconds = time.perf_counter() - start

    def _build(self) -> Any:
        return self.module

    def _tensors(self, feeds: Feeds) -> list[Any]:
        import torch

        if self._structure is not None:
            return self._structure(list(feeds.values()), self.device)
        return [torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in feeds.values()]

    def _call(self, args: list[Any]) -> Any:
        import torch

        fn = self._loaded(self._fn)
        with torch.no_grad():
            return fn(*args)

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


class Float64Runner(EagerRunner):
    """The reference once more in float64: a copy of the module ``.double()``, its float inputs cast to float64.
    Its outputs are the exact side of the noise floor (:class:`~portable.runners.comparator.NoiseFloor`)
    that export's verify and ``compare`` judge fp32 arithmetic by."""

    def __init__(self, module: Any, device: str = "cpu", examples: Any = None) -> None:
        import copy

        super().__init__(copy.deepcopy(module).double(), device, "eager-float64", examples)

    def _tensors(self, feeds: Feeds) -> list[Any]:
        from torch.utils import _pytree

        args = super()._tensors(feeds)
        return list(_pytree.tree_map(lambda t: t.double() if _is_tensor(t) and t.is_floating_point() else t, args))


def float64_reference(module: Any, dtypes: Sequence[str], tolerances_given: bool, *, device: str = "cpu",
                      examples: Any = None, precision: str = "fp32") -> tuple[Float64Runner | None, str]:
    """The loaded float64 runner that calibrates a verdict, or None and why it does not apply: not fp32,
    no float32 output, tolerances given (judged alone, as asked), or a module that will not copy or convert."""
    if precision != "fp32" or "float32" not in dtypes:
        return None, f"default tolerances only (float64 calibration is for fp32 outputs; this is {precision})"
    if tolerances_given:
        return None, "--atol/--rtol as given (no float64 calibration)"
    try:
        runner = Float64Runner(module, device, examples)
        runner.load()
    except Exception as exc:  # noqa: BLE001 - a module that will not copy or convert: the tolerances alone
        return None, f"default tolerances only: the float64 copy failed ({one_line(exc, limit=200)})"
    return runner, "float64 reference: ran (ONNX Runtime judged against PyTorch fp32's own error too)"


def float64_outputs(module: Any, dtypes: Sequence[str], tolerances_given: bool, feeds: Any, *, device: str = "cpu",
                    examples: Any = None, judged: str = "ONNX Runtime",
                    say: Any = None) -> tuple[dict[int, list[np.ndarray]], str]:
    """:func:`float64_reference` run on ``feeds`` (batch -> feeds) and unloaded: its outputs per batch (none
    when it does not apply or an op has no float64 kernel) and the note that says how it went."""
    double, note = float64_reference(module, dtypes, tolerances_given, device=device, examples=examples)
    if double is None:
        return {}, note
    if say is not None:
        say("the reference in float64 (the noise floor of fp32 arithmetic)")
    try:
        exact = {b: double.infer(f) for b, f in feeds.items()}
    except RunnerFailed as exc:  # an op without a float64 kernel, say
        return {}, f"default tolerances only: PyTorch in float64 failed ({exc})"
    finally:
        double.unload()
    return exact, f"float64 reference: ran ({judged} judged against PyTorch fp32's own error too)"


class CompiledRunner(EagerRunner):
    """``torch.compile(module, mode=..., dynamic=False)`` with the inductor backend."""

    kind = "torch-compile"

    def __init__(self, module: Any, device: str = "cpu", mode: str = "default", name: str = "compiled",
                 examples: Any = None) -> None:
        super().__init__(module, device, name, examples)
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
