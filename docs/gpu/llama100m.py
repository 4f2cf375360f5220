"""The ~100M-parameter LLaMA-style decoder of docs/gpu/textgen.md as a SPEC (random weights, seeded; hidden 768,
12 layers, GQA 12/4, vocabulary 16,000), for ``portable export ... --task text-generation`` and
``portable compare ... --task text-generation --device cuda`` on the GPU (docs/gpu/run_textgen_cli.sh)."""

from __future__ import annotations

import torch


def model() -> torch.nn.Module:
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=16000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                      num_key_value_heads=4, intermediate_size=2048, max_position_embeddings=1024,
                                      initializer_range=0.05)
    return transformers.LlamaForCausalLM(config).eval()
