"""The decode graph of a text-generation pair replayed as CUDA graphs (``PairSession(cuda_graph=True)``).

A captured CUDA graph replays the same kernels on the same device addresses, so everything the decode
step reads or writes lives in buffers fixed for the session: the four step inputs (updated in place
from the host before each replay: the token and its position change), the logits, and the two cache
buffer sets, used in turn as in the host loop (``runners/generation.py``). A step from set A to set B
and one from B to A are different address sets, so ONNX Runtime captures one graph per direction
(run option ``gpu_graph_id`` 1 and 2, CUDA provider option ``enable_cuda_graph``). The prefill graph
runs uncaptured and writes into the same buffers; a generation starts from zeros, as the host loop's
fresh buffers do. Measured on one H200 (docs/gpu/textgen.md): the 100M LLaMA's decode step 1.83 ms
against 3.49 ms without, with identical logits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import InputError, UsageError, one_line
from portable.runners.sessions import SessionSpec, session_from_onnx
from portable.runners.step_inputs import NUMPY_TYPES, step_feeds

__all__ = ["GraphDecode"]

class GraphDecode:
    """The decode session with CUDA graphs, and its fixed buffers for one batch size."""

    def __init__(self, path: Path, spec: SessionSpec, geometry: Any, batch: int) -> None:
        import onnxruntime as ort

        self.path = path
        options = {**spec.provider_options, "enable_cuda_graph": "1"}
        self.session = session_from_onnx(path, spec.with_(provider_options=options), what="the decode graph (CUDA graphs)")
        on_gpu = lambda array: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", 0)  # noqa: E731
        self.context = geometry.context
        self.inputs = {name: on_gpu(value) for name, value in
                       step_feeds(self.context, np.zeros((batch, 1), np.int64), 0, 1).items()}
        self.zeros = np.zeros((batch, *geometry.cache_dims), geometry.cache_dtype)
        self.cache = tuple([on_gpu(self.zeros) for _ in geometry.cache_names] for _ in range(2))
        self.logits = ort.OrtValue.ortvalue_from_shape_and_type([batch, 1, self._vocab()], self._logits_type(), "cuda", 0)
        self.bindings = [self._bind(geometry.cache_names, k) for k in range(2)]

    def _vocab(self) -> int:
        vocab = self.session.get_outputs()[0].shape[-1]
        if not isinstance(vocab, int):
            raise UsageError(f"CUDA graphs need a fixed vocabulary dimension; the logits are {vocab!r}")
        return vocab

    def _logits_type(self) -> Any:
        kind = self.session.get_outputs()[0].type
        if kind not in NUMPY_TYPES:
            raise UsageError(f"CUDA graphs: logits of type {kind} cannot be read back here (float16, float32, float64)")
        return NUMPY_TYPES[kind]

    def _bind(self, names: tuple[str, ...], k: int) -> tuple[Any, Any]:
        """Set ``k``'s binding: cache[k] in, cache[1 - k] out, replayed as graph ``k + 1``."""
        import onnxruntime as ort

        binding = self.session.io_binding()
        for name, value in self.inputs.items():
            binding.bind_ortvalue_input(name, value)
        binding.bind_ortvalue_output("logits", self.logits)
        for name, past, present in zip(names, self.cache[k], self.cache[1 - k]):
            binding.bind_ortvalue_input(name, past)
            binding.bind_ortvalue_output("present_" + name.removeprefix("past_"), present)
        run = ort.RunOptions()
        run.add_run_config_entry("gpu_graph_id", str(k + 1))
        return binding, run

    def reset(self) -> None:
        """A new generation: the cache it starts from as zeros (the other set is written whole by the first call)."""
        for value in self.cache[0]:
            value.update_inplace(self.zeros)

    def run(self, ids: np.ndarray, position: int, current: list[Any]) -> None:
        """One decode step of ``ids`` ``[batch, 1]`` at ``position`` from the cache set ``current``."""
        for name, value in step_feeds(self.context, ids, position, 1).items():
            self.inputs[name].update_inplace(np.ascontiguousarray(value))
        binding, options = self.bindings[0 if current is self.cache[0] else 1]
        try:
            self.session.run_with_iobinding(binding, options)
        except Exception as exc:  # noqa: BLE001 - ORT's refusal to capture (a node off the CUDA provider, ...)
            raise InputError(f"ONNX Runtime cannot run the decode graph as CUDA graphs: {one_line(exc, limit=300)}; "
                             "without them: --ep cuda", path=str(self.path)) from None

    def last_logits(self) -> np.ndarray:
        return np.asarray(self.logits.numpy())[:, -1]
