"""Greedy generation through a prefill/decode pair in ONNX Runtime, and through the model's own ``generate``.

The host loop of a text-generation export (``portable export --task text-generation``,
docs/llm.md) is array work, and this module is that loop: the cache starts as zeros of
``[batch, heads, C, head_dim]`` per layer; the prompt goes through the prefill graph in blocks
of ``P`` tokens (the last block padded: its padded slots lie after the last real token, so
the causal mask and then the attention mask hide them, exactly, until the decode steps overwrite them:
docs/llm.md, "The padded prefill block"); then each decode step feeds the
last token at the next slot. Every call's ``present_*`` outputs are the next call's ``past_*``
inputs. The session binds them (ONNX Runtime's I/O binding) to two sets of buffers used in turn,
so the cache is never copied by the host and, on a GPU, never leaves the device; only the
logits of the step's last real token are read back.

The reference is transformers' ``generate`` on the same prompt (greedy, no end-of-sequence
stop): eager, and ``torch.compile``d over a static cache (``cache_implementation="static"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portable.errors import InputError, UsageError
from portable.quiet import quiet_libraries
from portable.runners.sessions import CPU, SessionFailed, SessionSpec, session_from_onnx
from portable.runners.step_inputs import NUMPY_TYPES as _NUMPY
from portable.runners.step_inputs import step_feeds

__all__ = ["MANIFEST_SUFFIX", "PairFiles", "PairGeometry", "PairSession", "Trace", "float64_logits", "prompt_ids",
           "fits", "generate_options", "step_feeds", "torch_generate"]

MANIFEST_SUFFIX = ".textgen.json"


@dataclass(frozen=True)
class PairFiles:
    """The two graphs of a text-generation export."""

    prefill: Path
    decode: Path
    quantization: dict[str, Any] | None = None  # the manifest's, for a weight-only int8 pair (judged by budgets)
    precision: str = "fp32"  # the manifest's: fp16 pairs are compared with the model in fp16, as the export proved them

    @classmethod
    def find(cls, path: str | Path) -> PairFiles:
        """From the pair's manifest (``NAME.textgen.json``) or either of its files (``NAME.prefill.onnx``)."""
        path = Path(path)
        if path.name.endswith(MANIFEST_SUFFIX):
            return cls._from_manifest(path)
        for kind in ("prefill", "decode"):
            if path.name.endswith(f".{kind}.onnx"):
                stem = path.name[: -len(f".{kind}.onnx")]
                pair = cls(path.with_name(f"{stem}.prefill.onnx"), path.with_name(f"{stem}.decode.onnx"))
                pair.check()
                return pair
        raise UsageError(f"{path}: not a text-generation pair: expected NAME{MANIFEST_SUFFIX}, NAME.prefill.onnx "
                         "or NAME.decode.onnx")

    @classmethod
    def _from_manifest(cls, path: Path) -> PairFiles:
        try:
            content = json.loads(path.read_text())
            graphs = content["graphs"]
            pair = cls(path.with_name(graphs["prefill"]["file"]), path.with_name(graphs["decode"]["file"]),
                       content.get("quantization"), str(content.get("precision") or "fp32"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"not a text-generation manifest: {type(exc).__name__}: {exc}", path=str(path)) from None
        pair.check()
        return pair

    def check(self) -> None:
        for file in (self.prefill, self.decode):
            if not file.is_file():
                raise InputError("no such file (one graph of the pair)", path=str(file))


@dataclass(frozen=True)
class PairGeometry:
    """What the host loop needs to know, read from the graphs' inputs."""

    batch: int | None  # None: dynamic
    context: int
    prefill_tokens: int
    cache_names: tuple[str, ...]  # past_* inputs, in order
    cache_dims: tuple[int, ...]  # [heads, C, head_dim] after the batch
    cache_dtype: Any

    @classmethod
    def of(cls, prefill: Any, decode: Any) -> PairGeometry:
        """From two ONNX Runtime sessions (their ``get_inputs()``)."""
        inputs = {i.name: i for i in prefill.get_inputs()}
        missing = [n for n in ("input_ids", "position_ids", "cache_position", "attention_mask") if n not in inputs]
        cache = [i for i in prefill.get_inputs() if i.name.startswith("past_")]
        if missing or not cache:
            raise InputError(f"not a text-generation graph: no input {', '.join(missing) or 'past_*'}")
        ids, first = inputs["input_ids"].shape, cache[0]
        decode_ids = next((i.shape for i in decode.get_inputs() if i.name == "input_ids"), None)
        if decode_ids is None or decode_ids[1] != 1:
            raise InputError(f"the decode graph's input_ids are {decode_ids}, not [batch, 1]")
        if first.type not in _NUMPY:  # bfloat16: numpy has no such type, so the host loop cannot hold its cache
            raise UsageError(f"the pair's cache is {first.type}: the host loop runs float32, float16 and float64 pairs "
                             "(numpy has no bfloat16); export with --precision fp16")
        return cls(ids[0] if isinstance(ids[0], int) else None, int(inputs["attention_mask"].shape[1]), int(ids[1]),
                   tuple(i.name for i in cache), tuple(int(d) for d in first.shape[1:]), _NUMPY[first.type])


@dataclass(frozen=True)
class Trace:
    """One runner's greedy generation: the new tokens ``[batch, N]`` and each step's logits ``[batch, V]``."""

    runner: str
    tokens: np.ndarray
    logits: tuple[np.ndarray, ...]
    step_seconds: tuple[float, ...] = ()  # per call: prefill block(s) first, then each decode step


def prompt_ids(batch: int, length: int, vocab: int, seed: int) -> np.ndarray:
    """The seeded prompt: ``[batch, length]`` token ids below ``vocab``."""
    return np.random.default_rng(seed).integers(0, vocab, size=(batch, length), dtype=np.int64)


def _session(path: Path, kind: str, spec: SessionSpec) -> Any:
    """An ONNX Runtime session of one graph, from the shared factory (runners/sessions.py: ORT's log, the
    session's and the default logger's, kept to errors: the CUDA provider's ScatterND warns through the default
    logger, once per node, that duplicate indices are undefined, and a step's cache slots never repeat; the
    provider asked for or a failure). The factory's :class:`SessionFailed` is an unreadable input here (exit 3),
    in the factory's words."""
    try:
        return session_from_onnx(path, spec, what=f"the {kind} graph")
    except SessionFailed as exc:
        raise InputError(exc.message, path=str(path)) from None


def _spec(providers: Sequence[Any], threads: int | None) -> SessionSpec:
    """The factory's spec for ``providers`` (names or ``(name, options)``, ONNX Runtime's form): the first is
    the session's provider; after it only the CPU provider, ONNX Runtime's own fallback for the nodes the
    first has no kernel for (the factory does not list it: ONNX Runtime adds it)."""
    if not providers:
        raise UsageError("no ONNX Runtime provider given for the pair")
    first, *rest = providers
    name, options = (first, {}) if isinstance(first, str) else (first[0], dict(first[1]) if len(first) > 1 else {})
    others = [p if isinstance(p, str) else p[0] for p in rest]
    if any(other != CPU for other in others):
        raise UsageError(f"providers {[name, *others]}: a pair runs on one provider (CPU as its fallback)")
    return SessionSpec(name, options, intra_op_threads=threads)


def fits(prompt: int, tokens: int, prefill_tokens: int, context: int) -> bool:
    """A prompt's padded prefill blocks, and the slots of ``tokens`` new tokens after it, within the context."""
    blocks = math.ceil(prompt / prefill_tokens) * prefill_tokens
    return prompt >= 1 and tokens >= 1 and max(blocks, prompt + tokens - 1) <= context


class PairSession:
    """The two graphs loaded in ONNX Runtime, and the greedy host loop over them (module docstring).

    ``device``: ``cpu``, or ``cuda`` (the cache buffers then live on the GPU; ``providers`` must
    hold the CUDA provider); ``threads``: ONNX Runtime's intra-op threads (default: one per core);
    ``cuda_graph``: the decode steps replayed as CUDA graphs (``runners/graph_decode.py``; CUDA only)."""

    def __init__(self, files: PairFiles, providers: Sequence[Any] = ("CPUExecutionProvider",),
                 device: str = "cpu", threads: int | None = None, cuda_graph: bool = False) -> None:
        self.files, self.device = files, device
        self.spec = _spec(providers, threads)
        if cuda_graph and (device != "cuda" or self.spec.provider != "CUDAExecutionProvider"):
            raise UsageError("CUDA graphs need the pair on the CUDA provider (device cuda)")
        self.cuda_graph = cuda_graph
        if files.quantization:  # weight-only int8: ORT keeps a DequantizeLinear for its QDQ fusions, dequantizing every
            # call; with those off it folds each into a float initializer at load (the file stays int8)
            self.spec = self.spec.with_(config_entries={**self.spec.config_entries, "session.disable_quant_qdq": "1"})
        self.prefill = _session(files.prefill, "prefill", self.spec)
        self.decode = _session(files.decode, "decode", self.spec)
        self.geometry = PairGeometry.of(self.prefill, self.decode)
        self._graphs: dict[int, Any] = {}

    def graph(self, batch: int) -> Any:
        """The CUDA-graph decode for ``batch`` (its buffers are fixed: one per batch size), made on first use."""
        if batch not in self._graphs:
            from portable.runners.graph_decode import GraphDecode

            try:
                self._graphs[batch] = GraphDecode(self.files.decode, self.spec, self.geometry, batch)
            except SessionFailed as exc:
                raise InputError(exc.message, path=str(self.files.decode)) from None
        return self._graphs[batch]

    def generate(self, prompt: np.ndarray, tokens: int, timer: Any = None) -> Trace:
        """Greedy generation of ``tokens`` new tokens after ``prompt`` ``[batch, L]``."""
        self.check_fits(prompt.shape[1], tokens)
        loop = _Loop(self, prompt.shape[0], timer)
        logits = loop.prefill(prompt)
        steps, chosen = [logits], [logits.argmax(-1)]
        for i in range(1, tokens):
            logits = loop.decode(chosen[-1][:, None], prompt.shape[1] + i - 1)
            steps.append(logits)
            chosen.append(logits.argmax(-1))
        return Trace("onnxruntime", np.stack(chosen, axis=1), tuple(steps), tuple(loop.seconds))

    def prompt_logits(self, prompt: np.ndarray) -> np.ndarray:
        """The logits ``[batch, L, V]`` after each token of ``prompt`` ``[batch, L]``, from the prefill graph's
        blocks (teacher forcing: every position at once, no token chosen)."""
        self.check_fits(prompt.shape[1], 1)
        loop, block = _Loop(self, prompt.shape[0], None), self.geometry.prefill_tokens
        parts = [loop.block(self.prefill, prompt[:, start:start + block], start, block)
                 for start in range(0, prompt.shape[1], block)]
        return np.concatenate(parts, axis=1)

    def decode_call(self, position: int, batch: int = 1) -> Callable[[], object]:
        """One decode step at slot ``position``, bound once, to be called again and again (timing: the same
        work each call, the cache read from one buffer set and written to the other)."""
        loop = _Loop(self, batch, None)
        binding = loop._bind(self.decode, np.zeros((batch, 1), np.int64), position, 1)
        return lambda: self.decode.run_with_iobinding(binding)

    def check_fits(self, prompt: int, tokens: int) -> None:
        """The prompt's padded blocks and the generated tokens fit in the context."""
        geometry = self.geometry
        if not fits(prompt, tokens, geometry.prefill_tokens, geometry.context):
            raise UsageError(f"a prompt of {prompt} token(s) (prefill blocks of {geometry.prefill_tokens}) and "
                             f"{tokens} new token(s) do not fit a context of {geometry.context}")


class _Loop:
    """One generation's cache buffers (two sets, used in turn) and its calls."""

    def __init__(self, pair: PairSession, batch: int, timer: Any) -> None:
        import onnxruntime as ort

        self.pair, self.batch, self.timer = pair, batch, timer
        geometry = pair.geometry
        if geometry.batch is not None and geometry.batch != batch:
            raise UsageError(f"the pair's batch is static ({geometry.batch}); a batch of {batch} cannot run")
        self.seconds: list[float] = []
        self.graph = pair.graph(batch) if pair.cuda_graph else None
        if self.graph is not None:  # its fixed buffers, from zeros
            self.graph.reset()
            self.cache, self.spare = self.graph.cache
            return
        dims = (batch, *geometry.cache_dims)
        zeros = lambda: ort.OrtValue.ortvalue_from_numpy(np.zeros(dims, geometry.cache_dtype), pair.device, 0)  # noqa: E731
        self.cache = [zeros() for _ in geometry.cache_names]
        self.spare = [zeros() for _ in geometry.cache_names]

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        block = self.pair.geometry.prefill_tokens
        logits = np.empty(0)
        for start in range(0, prompt.shape[1], block):
            logits = self.step(self.pair.prefill, prompt[:, start:start + block], start, block)
        return logits

    def step(self, session: Any, ids: np.ndarray, position: int, tokens: int = 1) -> np.ndarray:
        """Run one graph on ``ids`` (padded to ``tokens``) at slot ``position``; the logits of the last real token."""
        return self.block(session, ids, position, tokens)[:, -1]

    def block(self, session: Any, ids: np.ndarray, position: int, tokens: int) -> np.ndarray:
        """Run one graph on ``ids`` (padded to ``tokens``) at slot ``position``; the logits of every real token."""
        binding = self._bind(session, ids, position, tokens)
        self._timed(lambda: session.run_with_iobinding(binding))
        self.cache, self.spare = self.spare, self.cache
        return binding.get_outputs()[0].numpy()[:, :ids.shape[1]]

    def decode(self, ids: np.ndarray, position: int) -> np.ndarray:
        """One decode step: the decode graph, or its CUDA graph replayed; the logits ``[batch, V]``."""
        graph = self.graph
        if graph is None:
            return self.step(self.pair.decode, ids, position)
        current = self.cache
        self._timed(lambda: graph.run(ids, position, current))
        self.cache, self.spare = self.spare, self.cache
        return graph.last_logits()

    def _timed(self, call: Callable[[], object]) -> None:
        if self.timer is None:
            call()
        else:
            self.seconds.append(self.timer.time(call))

    def _bind(self, session: Any, ids: np.ndarray, position: int, tokens: int) -> Any:
        binding = session.io_binding()
        for name, value in step_feeds(self.pair.geometry.context, ids, position, tokens).items():
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
        binding.bind_output("logits", self.pair.device)  # first: get_outputs() follows the binding order
        for name, past, present in zip(self.pair.geometry.cache_names, self.cache, self.spare):
            binding.bind_ortvalue_input(name, past)
            binding.bind_ortvalue_output("present_" + name.removeprefix("past_"), present)
        return binding


def generate_options(compiled: bool, device: str, ids: Any, tokens: int) -> dict[str, Any]:
    """``generate``'s options for ``tokens`` greedy tokens after ``ids`` (no end-of-sequence stop, every slot
    attended), over a static-cache ``torch.compile``d decoding forward when ``compiled``: on a GPU
    reduce-overhead (CUDA graphs, what people who serve with torch.compile use), on the CPU default
    (transformers compiles on the CPU only when asked, as here)."""
    import torch

    greedy = {"attention_mask": torch.ones_like(ids), "max_new_tokens": tokens, "do_sample": False,
              "eos_token_id": None, "pad_token_id": 0}
    if not compiled:
        return greedy
    from transformers import CompileConfig

    config = CompileConfig(fullgraph=True, mode="reduce-overhead" if device == "cuda" else "default")
    config._compile_all_devices = True  # type: ignore[assignment]  # transformers' own switch to compile on CPU
    return greedy | {"cache_implementation": "static", "compile_config": config}


def torch_generate(model: Any, prompt: np.ndarray, tokens: int, compiled: bool = False, device: str = "cpu") -> Trace:
    """The model's own greedy ``generate``: eager (its default cache), or ``torch.compile``d over a
    static cache (transformers compiles the decoding forward; on CPU only when asked, as here)."""
    import torch

    ids = torch.from_numpy(prompt).to(device)
    options = generate_options(compiled, device, ids, tokens)
    with quiet_libraries(), torch.no_grad():  # transformers' generation notices (pad token, compile) too
        out = model.generate(ids, output_logits=True, return_dict_in_generate=True, **options)
    new = out.sequences[:, prompt.shape[1]:].cpu().numpy()
    logits = tuple(step.float().cpu().numpy() for step in out.logits)
    return Trace("torch-compiled" if compiled else "torch-eager", new, logits)


def float64_logits(model: Any, prompt: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each step's logits ``[batch, V]`` of a greedy run that chose ``tokens`` ``[batch, N]`` after ``prompt``, from
    the model in float64 (a ``.double()`` copy, let go on return): one forward over the prompt and the tokens fed
    back, without a cache; step ``i``'s logits are those after the prompt and the first ``i`` tokens."""
    import copy

    import torch

    double = copy.deepcopy(model).double().cpu().eval()
    ids = torch.from_numpy(np.concatenate([prompt, tokens[:, :-1]], axis=1))
    with quiet_libraries(), torch.no_grad():
        logits = double(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
    steps = logits[:, prompt.shape[1] - 1:].numpy()
    return tuple(steps[:, i] for i in range(tokens.shape[1]))
