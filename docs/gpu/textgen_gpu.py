"""GPU figures of issue 23 (docs/llm.md): a LLaMA-style decoder of ~100M parameters exported with
``--task text-generation``, then on one GPU: ONNX Runtime's CUDA provider with I/O binding (the cache kept on
the device, two buffer sets used in turn: ``portable.runners.generation.PairSession``) against PyTorch's
static-cache decode compiled with ``torch.compile(mode="reduce-overhead")`` (CUDA graphs), and eager.

    python3 docs/gpu/textgen_gpu.py --out DIR [--device cuda] [--hidden 768 --layers 12 ...]

Numerics strict fp32 on both sides (TF32 off in PyTorch and ``use_tf32=0`` in ONNX Runtime). The proof first
(greedy tokens of ORT-CUDA against the model's own generate, eager and compiled, on the GPU), then the timing:
each runner warmed up until steady, then timed in round-robin blocks (``portable.runners.timing``), host clock
with a device synchronisation after each call. A decode step of PyTorch's loop resets the cache's write
offset (as ORT's ``cache_position`` input does), so every timed step does the same work at one position.
Writes DIR/textgen-gpu.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where textgen-gpu.json goes")
    parser.add_argument("--models", default=None, help="where the pair is written (default: --out)")
    parser.add_argument("--device", default="cuda")
    for name, default in (("hidden", 768), ("layers", 12), ("heads", 12), ("kv-heads", 4), ("intermediate", 2048),
                          ("vocab", 16000), ("context", 1024), ("prefill", 128), ("tokens", 32), ("prompt", 100)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per runner")
    return parser.parse_args()


def _model(args: argparse.Namespace) -> Any:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                      num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                                      intermediate_size=args.intermediate, max_position_embeddings=args.context,
                                      initializer_range=0.05)
    return transformers.LlamaForCausalLM(config).eval()


def _environment(device: str) -> dict[str, Any]:
    import onnxruntime as ort
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "onnxruntime": ort.__version__, "providers": ort.get_available_providers(),
            "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None, "platform": platform.platform()}


def _proof(session: Any, model: Any, prompt: Any, args: argparse.Namespace) -> dict[str, Any]:
    from portable.runners.generation import torch_generate
    from portable.runners.generation_report import compare_traces, spread
    from portable.runners.tolerances import ToleranceTable

    ours = session.generate(prompt, args.tokens)
    tolerance = ToleranceTable().for_output("logits", "float32")
    out: dict[str, Any] = {"tokens": ours.tokens.tolist(), "distinct_tokens": spread(ours)[0],
                           "logits_spread": spread(ours)[1]}
    for compiled in (False,) if args.no_compile else (False, True):
        start = time.perf_counter()
        theirs = torch_generate(model, prompt, args.tokens, compiled=compiled, device=args.device)
        comparison = compare_traces(ours, theirs, tolerance).to_dict()
        out[theirs.runner] = comparison | {"seconds": round(time.perf_counter() - start, 2)}
    return out


def _torch_steps(model: Any, args: argparse.Namespace, prompt: Any, position: int) -> dict[str, Any]:
    """PyTorch over transformers' StaticCache: the prefill block (eager) and one decode step (eager and compiled)."""
    import torch
    from transformers import StaticCache

    device = args.device
    cache = StaticCache(config=model.config, max_cache_len=args.context)
    block = torch.zeros(1, args.prefill, dtype=torch.long, device=device)
    block[:, :prompt.shape[1]] = torch.from_numpy(prompt).to(device)
    positions = torch.arange(args.prefill, device=device)[None]
    token = torch.zeros(1, 1, dtype=torch.long, device=device)
    where = torch.tensor([[position]], device=device)

    def reset(offset: int) -> None:
        for layer in cache.layers:
            if getattr(layer, "is_initialized", False):
                layer.cumulative_length.fill_(offset)

    def prefill() -> Any:
        reset(0)
        return model(input_ids=block, position_ids=positions, cache=cache, use_cache=True).logits

    def decode(forward: Any) -> Any:
        reset(position)
        return forward(input_ids=token, position_ids=where, cache=cache, use_cache=True).logits

    with torch.no_grad():
        prefill()
    steps = {"torch-eager prefill": prefill, "torch-eager decode": lambda: decode(model.forward)}
    if not args.no_compile:
        mode = "reduce-overhead" if device == "cuda" else "default"
        compiled = torch.compile(model.forward, mode=mode, fullgraph=True)
        start = time.perf_counter()
        with torch.no_grad():
            for _ in range(3):  # compile, then record the CUDA graph
                decode(compiled)
        steps[f"torch-compiled ({mode}) decode"] = lambda: decode(compiled)
        steps["compile_seconds"] = round(time.perf_counter() - start, 1)  # type: ignore[assignment]
    return steps


def _time(steps: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from portable.runners.stats import LatencyStats
    from portable.runners.timing import HostTimer, Timed, TimingConfig, interleave, warm_up

    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    timer = HostTimer(sync)
    config = TimingConfig(min_seconds=args.seconds, warmup_max_seconds=15.0)
    entries = [Timed(name, step, timer, timer) for name, step in steps.items() if callable(step)]
    with torch.no_grad():
        warm = {e.name: warm_up(e.step, timer, config) for e in entries}
        measured = interleave(entries, warm, config)
    return {m.name: LatencyStats.from_samples(m.samples, 1).to_dict()
            | {"warmup_steady": warm[m.name].steady, "pipelined_median_s": sorted(m.pipelined)[len(m.pipelined) // 2]}
            for m in measured}


def main() -> int:
    args = _args()
    import torch

    from portable.exporters.textgen import export_text_generation
    from portable.runners.generation import PairFiles, PairSession, prompt_ids
    from portable.runners.generation_latency import measure_generation
    from portable.runners.timing import HostTimer, TimingConfig

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"config": vars(args), "environment": _environment(args.device)}
    model = _model(args)
    result["parameters"] = sum(p.numel() for p in model.parameters())
    start = time.perf_counter()
    models = Path(args.models or out)
    models.mkdir(parents=True, exist_ok=True)
    pair = export_text_generation(model, models / "llama", context=args.context, prefill=args.prefill, verify=False,
                                  force=True)
    result["export_seconds"] = round(time.perf_counter() - start, 1)
    result["file_bytes"] = {p.name: p.stat().st_size for p in (pair.prefill.path, pair.decode.path)}
    print("exported", result["export_seconds"], "s", flush=True)
    providers: list[Any] = ([("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
                            if args.device == "cuda" else ["CPUExecutionProvider"])
    session = PairSession(PairFiles(pair.prefill.path, pair.decode.path), providers, device=args.device)
    result["ort_providers"] = session.decode.get_providers()
    model.to(args.device)
    prompt = prompt_ids(1, args.prompt, args.vocab, 0)
    result["proof"] = _proof(session, model, prompt, args)
    print("proof", json.dumps({k: v.get("message") for k, v in result["proof"].items() if isinstance(v, dict)}), flush=True)
    position = args.prompt + args.tokens // 2
    steps = _torch_steps(model, args, prompt, position)
    result["compile_seconds"] = steps.pop("compile_seconds", None)
    steps["ort-cuda decode" if args.device == "cuda" else "ort-cpu decode"] = session.decode_call(position)
    steps["ort prefill"] = _ort_prefill(session, prompt)
    if args.device == "cuda":
        graph = _ort_graph_decode(session, position)
        result["cuda_graph_decode"] = {k: v for k, v in graph.items() if k != "step"}
        if "step" in graph:
            steps["ort-cuda-graph decode"] = graph["step"]
    result["position"] = position
    result["steps"] = _time(steps, args)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    config = TimingConfig(min_seconds=args.seconds, warmup_max_seconds=15.0)
    result["ort_generation"] = measure_generation(session, prompt, args.tokens, config, HostTimer(sync),
                                                  runner=f"onnxruntime-{args.device}").to_dict()
    (out / "textgen-gpu.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: round(v["p50_s"] * 1e3, 3) for k, v in result["steps"].items()}), flush=True)
    return 0


def _ort_prefill(session: Any, prompt: Any) -> Any:
    """One prefill call of the prompt's (padded) block, bound once."""
    from portable.runners.generation import _Loop

    loop = _Loop(session, prompt.shape[0], None)
    binding = loop._bind(session.prefill, prompt, 0, session.geometry.prefill_tokens)
    return lambda: session.prefill.run_with_iobinding(binding)


def _ort_graph_decode(pair: Any, position: int) -> dict[str, Any]:
    """The decode graph on the CUDA provider with CUDA graphs (``enable_cuda_graph=1``): one captured graph per
    buffer set (run option ``gpu_graph_id`` 1: cache A -> B, 2: B -> A), the step inputs in fixed device buffers
    updated in place from the host each call (as a generation loop must: the token and position change), the
    logits in a fixed buffer. Its logits are checked against the plain CUDA session's on the same inputs and
    the same (zero) cache. {"error": ...} when ONNX Runtime refuses to capture."""
    import numpy as np
    import onnxruntime as ort

    from portable.runners.generation import _Loop
    from portable.runners.sessions import SessionFailed, SessionSpec, session_from_onnx

    geometry = pair.geometry
    spec = SessionSpec("CUDAExecutionProvider", {"use_tf32": "0", "enable_cuda_graph": "1"})
    try:
        session = session_from_onnx(pair.files.decode, spec, what="the decode graph")
    except SessionFailed as exc:
        return {"error": exc.message}
    host = _step_inputs(geometry.context, position)
    device = {n: ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for n, a in host.items()}
    cache = [[ort.OrtValue.ortvalue_from_numpy(np.zeros((1, *geometry.cache_dims), geometry.cache_dtype), "cuda", 0)
              for _ in geometry.cache_names] for _ in range(2)]
    shape = [1 if not isinstance(d, int) else d for d in session.get_outputs()[0].shape]
    logits = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, "cuda", 0)
    bindings, options = [], []
    for k in range(2):
        binding = session.io_binding()
        for name, value in device.items():
            binding.bind_ortvalue_input(name, value)
        binding.bind_ortvalue_output("logits", logits)
        for name, past, present in zip(geometry.cache_names, cache[k], cache[1 - k]):
            binding.bind_ortvalue_input(name, past)
            binding.bind_ortvalue_output("present_" + name.removeprefix("past_"), present)
        run = ort.RunOptions()
        run.add_run_config_entry("gpu_graph_id", str(k + 1))
        bindings.append(binding)
        options.append(run)
    turn = [0]

    def step() -> None:
        for name, value in device.items():
            value.update_inplace(host[name])
        session.run_with_iobinding(bindings[turn[0]], options[turn[0]])
        turn[0] = 1 - turn[0]

    try:
        for _ in range(4):  # capture both graphs, replay both
            step()
        plain = _Loop(pair, 1, None)
        reference = plain._bind(pair.decode, np.zeros((1, 1), np.int64), position, 1)
        pair.decode.run_with_iobinding(reference)
        expected = reference.get_outputs()[0].numpy()
    except Exception as exc:  # noqa: BLE001 - ORT's refusal to capture is the finding
        return {"error": " ".join(str(exc).split())[:400]}
    got = logits.numpy()
    return {"step": step, "max_abs_vs_plain": float(np.abs(got - expected).max()),
            "logits_rms": float(np.sqrt((expected.astype(np.float64) ** 2).mean())),
            "graph_ids": [1, 2]}


def _step_inputs(context: int, position: int) -> dict[str, Any]:
    """A decode step's inputs at slot ``position`` (token 0), as PairSession's loop binds them."""
    import numpy as np

    return {"input_ids": np.zeros((1, 1), np.int64), "position_ids": np.full((1, 1), position, np.int64),
            "cache_position": np.full((1, 1), position, np.int64),
            "attention_mask": (np.arange(context) < position + 1).astype(np.int64)[None]}


if __name__ == "__main__":
    raise SystemExit(main())
