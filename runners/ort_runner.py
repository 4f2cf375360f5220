"""ONNX Runtime: one runner per execution provider, sessions created with explicit providers
and explicit provider options.

Numerics: one mode per run sets every provider as it sets PyTorch. Strict fp32 gives the CUDA
provider ``use_tf32=0`` (it computes float32 convolutions and GEMMs in TF32 by default);
``tf32`` gives ``use_tf32=1``. The TensorRT provider is given ``trt_fp16_enable`` /
``trt_int8_enable`` off; ONNX Runtime's TensorRT options have no TF32 switch (TensorRT allows
TF32 by default), which the report says. The options ONNX Runtime reports back for the session
(``get_provider_options``) are what the report shows, not only what was asked.

GPU providers are timed through I/O binding: inputs are copied to the device once and
outputs stay there, so host copies are not counted. ``cuda-graph`` (``enable_cuda_graph=1``)
binds inputs and outputs to fixed device buffers, one CUDA graph per batch size (run option
``gpu_graph_id``), since a replayed graph reads and writes the addresses it was captured with.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import UsageError, one_line
from portable.runners.base import Feeds, Runner, RunnerFailed, Step
from portable.runners.sessions import SessionFailed, SessionSpec, session_from_onnx

__all__ = ["CUDA", "GRAPH_SUFFIX", "NHWC_SUFFIX", "PROVIDER_ALIASES", "REPORTED_OPTIONS", "EpChoice", "OnnxRuntimeRunner",
           "StaticBinding", "available_providers", "bind_io", "provider_options", "resolve_eps", "resolve_providers",
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
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"
GRAPH_SUFFIX = "-graph"  # "cuda-graph": the CUDA provider with enable_cuda_graph=1
NHWC_SUFFIX = "-nhwc"  # "cuda-nhwc": the CUDA provider with prefer_nhwc=1 (channels-last convolutions)
_DEVICE_OF = {CUDA: "cuda", TENSORRT: "cuda"}
# The options shown in reports, as ONNX Runtime gives them back for the session.
REPORTED_OPTIONS = ("device_id", "use_tf32", "cudnn_conv_algo_search", "arena_extend_strategy", "gpu_mem_limit",
                    "enable_cuda_graph", "do_copy_in_default_stream", "cudnn_conv_use_max_workspace", "prefer_nhwc",
                    "trt_fp16_enable", "trt_int8_enable")
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


@dataclass(frozen=True)
class EpChoice:
    """One ONNX Runtime runner to make: a provider, and for CUDA whether to replay CUDA graphs and
    whether to prefer NHWC (channels-last) kernels."""

    provider: str
    cuda_graph: bool = False
    nhwc: bool = False

    @property
    def name(self) -> str:
        """The runner's name: ``ort-cuda``, ``ort-cuda-graph``, ``ort-cuda-nhwc``, ``ort-cuda-graph-nhwc``."""
        return (f"ort-{short_name(self.provider)}" + (GRAPH_SUFFIX if self.cuda_graph else "")
                + (NHWC_SUFFIX if self.nhwc else ""))


def _ep_choice(raw: str) -> EpChoice:
    """``cuda-graph-nhwc`` -> CUDA with both options; the options belong to the CUDA provider only."""
    base, flags = raw, {GRAPH_SUFFIX: False, NHWC_SUFFIX: False}
    while any(base.lower().endswith(s) for s in flags):
        suffix = next(s for s in flags if base.lower().endswith(s))
        flags[suffix], base = True, base[: -len(suffix)]
    provider = resolve_providers(base)[0]
    if any(flags.values()) and provider != CUDA:
        raise UsageError(f"--ep {raw}: CUDA graphs and NHWC are options of the CUDA provider only "
                         "(--ep cuda-graph, cuda-nhwc, cuda-graph-nhwc)")
    return EpChoice(provider, flags[GRAPH_SUFFIX], flags[NHWC_SUFFIX])


def resolve_eps(names: str | None) -> list[EpChoice]:
    """``cpu,cuda,cuda-graph,cuda-nhwc`` -> the runners to make (``cuda-graph``: CUDA with CUDA graphs,
    ``cuda-nhwc``: CUDA with ``prefer_nhwc=1``; both: ``cuda-graph-nhwc``)."""
    if not names:
        return [EpChoice(p) for p in resolve_providers(None)]
    return list(dict.fromkeys(_ep_choice(raw) for raw in (n.strip() for n in names.split(",") if n.strip())))


def provider_options(provider: str, *, tf32: bool, cuda_graph: bool = False, nhwc: bool = False) -> dict[str, str]:
    """The options a session is created with: the numerics mode, and ONNX Runtime's defaults
    for the rest spelled out, so that the report states them."""
    if provider == CUDA:
        return {"device_id": "0", "use_tf32": "1" if tf32 else "0", "cudnn_conv_algo_search": "EXHAUSTIVE",
                "arena_extend_strategy": "kNextPowerOfTwo", "do_copy_in_default_stream": "1",
                "enable_cuda_graph": "1" if cuda_graph else "0", "prefer_nhwc": "1" if nhwc else "0"}
    if provider == TENSORRT:  # no TF32 switch in ORT's TensorRT options: FP16/INT8 off is what strict can ask
        return {"device_id": "0", "trt_fp16_enable": "False", "trt_int8_enable": "False"}
    return {}


def _symbols(session: Any, feeds: Feeds) -> dict[str, int]:
    """Sizes of the inputs' symbolic axes in these feeds (``batch`` -> 32, ``seq`` -> 128)."""
    sizes: dict[str, int] = {}
    for spec in session.get_inputs():
        for dim, size in zip(spec.shape, np.shape(feeds[spec.name])):
            if isinstance(dim, str):
                sizes[dim] = int(size)
    return sizes


def _static_shape(shape: Sequence[Any], sizes: dict[str, int], output: str) -> list[int]:
    dims = [sizes.get(d, d) if isinstance(d, str) else d for d in shape]
    static = [d for d in dims if isinstance(d, int) and d >= 0]
    if len(static) != len(dims):
        raise RunnerFailed(f"CUDA graphs need output shapes known from the input shapes: output {output!r} has "
                           f"shape {list(shape)} (export with static shapes, or use --ep cuda)")
    return static


class StaticBinding:
    """Inputs and outputs bound to buffers on ``device`` that keep their addresses: a new batch
    of inputs is copied into the same buffers (``update``), as CUDA graph replay requires."""

    def __init__(self, session: Any, feeds: Feeds, device: str, graph_id: int) -> None:
        import onnxruntime as ort

        from portable.runners.inputs import device_value

        self.binding = session.io_binding()
        # copies: on the CPU device an OrtValue wraps the array's memory, and update() writes into it
        self.inputs = {n: device_value(a, device) for n, a in feeds.items()}
        sizes = _symbols(session, feeds)
        self.outputs = []
        for out in session.get_outputs():
            value = ort.OrtValue.ortvalue_from_shape_and_type(_static_shape(out.shape, sizes, out.name),
                                                               _element_type(out.type, out.name), device, 0)
            self.outputs.append(value)
            self.binding.bind_ortvalue_output(out.name, value)
        for name, value in self.inputs.items():
            self.binding.bind_ortvalue_input(name, value)
        self.run_options = ort.RunOptions()
        self.run_options.add_run_config_entry("gpu_graph_id", str(graph_id))  # 0 is reserved, -1 disables

    def update(self, feeds: Feeds) -> None:
        from portable.runners.inputs import ort_value

        for name, array in feeds.items():
            self.inputs[name].update_inplace(ort_value(np.require(array, requirements="C")))

    def run(self, session: Any) -> None:
        session.run_with_iobinding(self.binding, self.run_options)

    def fetch(self) -> list[np.ndarray]:
        """The outputs copied to host arrays (the device buffers stay bound)."""
        from portable.runners.inputs import host_array

        self.binding.synchronize_outputs()
        return [host_array(o) for o in self.outputs]


def _element_type(ort_type: str, output: str) -> int:
    """ONNX Runtime's ``tensor(bfloat16)`` -> ``TensorProto.BFLOAT16`` (its names are TensorProto's)."""
    import onnx

    name = ort_type.removeprefix("tensor(").removesuffix(")").upper()
    if not ort_type.startswith("tensor(") or name == "STRING" or name not in onnx.TensorProto.DataType.keys():
        raise RunnerFailed(f"CUDA graphs: output {output!r} has type {ort_type}, not a tensor a device buffer holds")
    return int(onnx.TensorProto.DataType.Value(name))


def bind_io(session: Any, feeds: Feeds, device: str) -> Any:
    """An ``IOBinding`` with the inputs copied to ``device`` once and the outputs left there, so a timed
    ``run_with_iobinding`` counts no host transfer (how GPU providers are timed)."""
    from portable.runners.inputs import device_value

    binding = session.io_binding()
    for name, array in feeds.items():
        binding.bind_ortvalue_input(name, device_value(array, device))
    for output in session.get_outputs():
        binding.bind_output(output.name, device)
    return binding


class OnnxRuntimeRunner(Runner):
    """``onnxruntime.InferenceSession`` on one execution provider (no silent fallback)."""

    kind = "onnxruntime"

    def __init__(self, model_path: str | Path, provider: str = "CPUExecutionProvider", *,
                 profile_dir: str | None = None, tf32: bool = False, cuda_graph: bool = False,
                 spinning: bool | None = None, threads: int | None = None, nhwc: bool = False) -> None:
        """``spinning``/``threads``: the CPU provider's intra-op spin-waiting and thread count
        (None: ONNX Runtime's defaults; ``compare`` turns spinning off, see runners/sessions.py).
        ``nhwc``: the CUDA provider's ``prefer_nhwc`` (its NHWC convolution kernels, with the layout
        transposes inserted and cancelled by ONNX Runtime's layout transformer)."""
        super().__init__()
        if (cuda_graph or nhwc) and provider != CUDA:
            raise UsageError(f"CUDA graphs and NHWC are options of {CUDA} only, not {provider}")
        self.model_path = str(model_path)
        self.provider = provider
        self.cuda_graph = cuda_graph
        self.spinning, self.threads = spinning, threads
        self.name = EpChoice(provider, cuda_graph, nhwc).name
        self.device = _DEVICE_OF.get(provider, "cpu")
        self.options = provider_options(provider, tf32=tf32, cuda_graph=cuda_graph, nhwc=nhwc)
        self.effective_options: dict[str, str] = {}
        self.load_failed = False  # the session could not be created on this provider
        self._profile_dir = profile_dir
        self._session: Any = None
        self._binding: Any = None
        self._static: dict[tuple[tuple[int, ...], ...], StaticBinding] = {}
        self._bfloat16_inputs: frozenset[str] = frozenset()  # set by load()

    @property
    def spec(self) -> SessionSpec:
        """The session this runner loads (runners/sessions.py). The default logger is quieted there too:
        without it, provider-library and cuDNN-frontend messages reach stderr (seen on the H200: "No
        registered plugin EP device found", cudnn_fe_call errors)."""
        profile = str(Path(self._profile_dir) / self.name) if self._profile_dir else None
        return SessionSpec(self.provider, self.options, spinning=self.spinning, intra_op_threads=self.threads,
                           profile_prefix=profile)

    def load(self) -> None:
        start = time.perf_counter()
        try:
            self._session = session_from_onnx(self.model_path, self.spec, what=self.model_path)
        except SessionFailed:
            self.load_failed = True
            raise
        self.load_seconds = time.perf_counter() - start
        self._bfloat16_inputs = frozenset(i.name for i in self._session.get_inputs() if i.type == "tensor(bfloat16)")
        given = self._session.get_provider_options().get(self.provider, {})
        self.effective_options = {k: str(given[k]) for k in REPORTED_OPTIONS if k in given}

    @property
    def session(self) -> Any:
        return self._loaded(self._session)

    def _static_binding(self, feeds: Feeds) -> StaticBinding:
        """The fixed buffers for this input shape (one CUDA graph each), with ``feeds`` copied in."""
        key = tuple(tuple(a.shape) for a in feeds.values())
        bound = self._static.get(key)
        if bound is None:
            bound = self._static[key] = StaticBinding(self.session, feeds, self.device, len(self._static) + 1)
        else:
            bound.update(feeds)
        return bound

    def _declared(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """The feeds in the graph's own element types: a bfloat16 input comes drawn in float32 (the
        runners share their feeds with PyTorch, which reads no ml_dtypes array) and goes in as bfloat16."""
        if not self._bfloat16_inputs:
            return dict(feeds)
        import ml_dtypes

        wanted = self._bfloat16_inputs
        return {n: np.asarray(a).astype(ml_dtypes.bfloat16) if n in wanted else a for n, a in feeds.items()}

    def _host_call(self, feeds: Feeds) -> Callable[[], list[Any]]:
        """One run on host ``feeds`` (ORT copies them to the provider's device): through OrtValues when a
        feed has a type ``session.run`` refuses (ml_dtypes' bfloat16: "Numpy_type 256 can't be converted
        to MLDataType")."""
        from portable.runners.inputs import host_array, is_ml_dtype, ort_value

        declared, session = self._declared(feeds), self.session
        if not any(is_ml_dtype(a.dtype) for a in declared.values()):
            return lambda: session.run(None, declared)
        pinned = (declared, {n: ort_value(a) for n, a in declared.items()})  # the OrtValues borrow the arrays
        return lambda: [host_array(o) for o in session.run_with_ort_values(None, pinned[1])]

    def infer(self, feeds: Feeds) -> list[np.ndarray]:
        try:
            if self.cuda_graph:
                bound = self._static_binding(self._declared(feeds))
                bound.run(self.session)
                return bound.fetch()
            return [np.asarray(o) for o in self._host_call(feeds)()]
        except RunnerFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/RuntimeException types
            raise RunnerFailed(f"ONNX Runtime ({self.provider}) failed to run: {one_line(exc, limit=400)}") from None

    def prepare(self, feeds: Feeds) -> Step:
        session, declared = self.session, self._declared(feeds)
        if self.cuda_graph:
            bound = self._static_binding(declared)
            self._binding = bound.binding
            return lambda: bound.run(session)
        if self.device == "cpu":
            return self._host_call(feeds)
        binding = self._binding = bind_io(session, declared, self.device)
        return lambda: session.run_with_iobinding(binding)

    def synchronize(self) -> None:
        if self._binding is not None:
            self._binding.synchronize_outputs()

    def end_profiling(self) -> str | None:
        return self.session.end_profiling() if self._profile_dir else None

    def unload(self) -> None:
        self._binding = None
        self._static = {}
        self._session = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "provider": self.provider, "provider_options": self.effective_options}
