"""Text generation on ONNX Runtime CPU: the static-cache decode step against the cache-less full forward at
position 200, interleaved in one run, and the generation latency (time to first token, decode p50/p90,
tokens/s); prints JSON.

    .venv/bin/python bench/textgen_bench.py [--hidden 256 --layers 4 --vocab 8000] > bench/results/textgen.json

The model is a LLaMA-style config of transformers' own ``LlamaForCausalLM`` (random weights), exported with
``portable export --task text-generation`` (C 256, P 32, its proof run). The baseline is the same model
without a cache, one static graph over the 201 tokens up to position 200 returning the last token's logits
(what a cache-less export has to run for every new token there). Goal (issue 23): the decode step at least
5x faster. Speed lives here, not in tests: the figures are printed; the goal is a figure to read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, machine, versions  # noqa: E402

POSITION = 200
GOAL = 5.0


def _model(args: argparse.Namespace) -> Any:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                      num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                                      intermediate_size=args.intermediate, max_position_embeddings=args.context,
                                      initializer_range=0.1)
    return transformers.LlamaForCausalLM(config).eval()


def _full_forward(model: Any, path: Path) -> Any:
    """The cache-less graph over positions 0..200, the last token's logits out."""
    import torch

    import portable

    class LastLogits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=input_ids, use_cache=False).logits[:, -1]

    ids = torch.zeros(1, POSITION + 1, dtype=torch.long)
    return portable.export(LastLogits().eval(), (ids,), path, batch=1, verify=True, input_names=("input_ids",))


def _interleaved(decode: Any, full: Any, config: Any) -> dict[str, Any]:
    from portable.runners.stats import LatencyStats
    from portable.runners.timing import HostTimer, Timed, interleave, warm_up

    timer = HostTimer()
    entries = [Timed("decode_step", decode, timer, timer), Timed("full_forward", full, timer, timer)]
    warmups = {e.name: warm_up(e.step, timer, config) for e in entries}
    measured = {m.name: LatencyStats.from_samples(m.samples, 1) for m in interleave(entries, warmups, config)}
    ratio = measured["full_forward"].p50_s / measured["decode_step"].p50_s
    return {"position": POSITION, "decode_step": measured["decode_step"].to_dict(),
            "full_forward": measured["full_forward"].to_dict(), "speedup_p50": round(ratio, 2),
            "warmup_steady": {k: w.steady for k, w in warmups.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("hidden", 256), ("layers", 4), ("heads", 4), ("kv-heads", 2), ("intermediate", 688),
                          ("vocab", 8000), ("context", 256), ("prefill", 32), ("tokens", 32), ("prompt", 20),
                          ("threads", 1)):
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args(argv)
    import numpy as np
    import onnxruntime as ort

    from portable.exporters.textgen import export_text_generation
    from portable.runners.generation import PairFiles, PairSession, prompt_ids
    from portable.runners.generation_latency import measure_generation
    from portable.runners.timing import TimingConfig

    model = _model(args)
    with tempfile.TemporaryDirectory() as tmp:
        pair = export_text_generation(model, Path(tmp) / "llama", context=args.context, prefill=args.prefill,
                                      tokens=args.tokens)
        full = _full_forward(model, Path(tmp) / "full.onnx")
        # one intra-op thread each by default: on a shared 2-core machine ORT's spinning pool of 2 threads
        # measures the neighbours' load more than the graph (--threads 2 for ORT's default here)
        session = PairSession(PairFiles(pair.prefill.path, pair.decode.path), threads=args.threads)
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        forward = ort.InferenceSession(str(full.path), options, providers=["CPUExecutionProvider"])
        ids = np.zeros((1, POSITION + 1), np.int64)
        config = TimingConfig()
        head_to_head = _interleaved(session.decode_call(POSITION), lambda: forward.run(None, {"input_ids": ids}), config)
        latency = measure_generation(session, prompt_ids(1, args.prompt, args.vocab, 0), args.tokens, config)
    params = sum(p.numel() for p in model.parameters())
    emit({"benchmark": "textgen", "title": "static-cache decode step vs cache-less full forward at position 200 (ORT CPU)",
          "goals": {"decode_speedup_at_200": f">= {GOAL}x"}, "met": head_to_head["speedup_p50"] >= GOAL,
          "model": {**vars(args), "parameters": params, "family": "LlamaForCausalLM"},
          "proof": pair.proof.to_dict() if pair.proof else None, "head_to_head": head_to_head,
          "generation": latency.to_dict(), "machine": machine(), "versions": versions()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
