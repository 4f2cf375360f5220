"""A sentence-transformers folder's pipeline after its transformer, read from ``modules.json``: the Pooling its
config names (mean, CLS, max, mean over sqrt(length)), Dense layers, and Normalize where the folder has it.

Read here rather than through sentence-transformers itself: its modules hand a dict of features from one to
the next, and what the export needs is three small tensor functions over (token states, attention mask),
written once below in sentence-transformers' own arithmetic (``sentence_transformers.models.Pooling``'s
masked sum over the clamped token count; ``Normalize``'s ``F.normalize``); sentence-transformers would bring
scikit-learn and scipy to the ``hf`` extra for them. tests/hf/test_trained_minilm.py holds the file to
sentence-transformers' own ``encode`` (cosine >= 0.9999 on real sentences).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError
from portable.hf.folder import read_json

if TYPE_CHECKING:
    import torch

__all__ = ["POOLING_MODES", "Dense", "SentencePipeline", "dense_layers", "read_pipeline", "run_pipeline"]

# sentence-transformers' Pooling config keys, in the order its forward concatenates them
POOLING_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
                 "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len"}
_ACTIVATIONS = ("torch.nn.modules.activation.Tanh", "torch.nn.modules.linear.Identity")


@dataclass(frozen=True)
class Dense:
    """A Dense module: its weights and its activation (Tanh or Identity)."""

    weight: Any
    bias: Any
    tanh: bool


@dataclass(frozen=True)
class SentencePipeline:
    """What comes after the transformer, in order: pooling modes (concatenated), Dense layers, Normalize."""

    pooling: tuple[str, ...]
    dense: tuple[Dense, ...]
    normalize: bool
    max_seq_length: int | None
    modules: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"modules": list(self.modules), "pooling": list(self.pooling), "dense_layers": len(self.dense),
                "normalize": self.normalize}


def _pooling(folder: Path) -> tuple[str, ...]:
    config = read_json(folder / "config.json")
    modes = tuple(mode for key, mode in POOLING_MODES.items() if config.get(key))
    others = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v and k not in POOLING_MODES)
    if others or not modes:
        raise UsageError(f"Pooling {', '.join(others) or 'with no mode'}: portable exports the CLS, mean, max and "
                         "mean-sqrt-len poolings", path=str(folder / "config.json"))
    return modes


def _dense(folder: Path) -> Dense:
    import torch

    config = read_json(folder / "config.json")
    activation = str(config.get("activation_function", "torch.nn.modules.linear.Identity"))
    if activation not in _ACTIVATIONS:
        raise UsageError(f"Dense activation {activation}: portable exports Tanh and Identity", path=str(folder))
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(folder / "model.safetensors"))
    else:
        state = torch.load(str(folder / "pytorch_model.bin"), map_location="cpu", weights_only=True)
    return Dense(state["linear.weight"].float(), state.get("linear.bias"), activation.endswith("Tanh"))


def read_pipeline(root: Path, modules: Sequence[dict[str, Any]]) -> SentencePipeline:
    """The modules after the Transformer, in modules.json's order; one it does not know is a usage error."""
    pooling: tuple[str, ...] = ()
    dense: list[Dense] = []
    normalize = False
    kinds = []
    for module in sorted(modules, key=lambda m: int(m.get("idx", 0))):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        kinds.append(kind)
        path = root / str(module.get("path", ""))
        if kind == "Pooling":
            pooling = _pooling(path)
        elif kind == "Dense":
            dense.append(_dense(path))
        elif kind == "Normalize":
            normalize = True
        elif kind != "Transformer":
            raise UsageError(f"modules.json names a {module.get('type')} module: portable exports Transformer, Pooling, "
                             "Dense and Normalize", path=str(root / "modules.json"))
    if not pooling:
        raise UsageError("modules.json has no Pooling module: no sentence embedding to export (--task "
                         "feature-extraction gives the token states)", path=str(root / "modules.json"))
    sbert = read_json(root / "sentence_bert_config.json") if (root / "sentence_bert_config.json").is_file() else {}
    limit = sbert.get("max_seq_length") if isinstance(sbert, dict) else None
    return SentencePipeline(pooling, tuple(dense), normalize, int(limit) if isinstance(limit, int) else None, tuple(kinds))


def _pool(mode: str, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sentence-transformers' Pooling, one mode (``mask``: the attention mask as floats, [batch, seq, 1])."""
    import torch

    if mode == "cls":
        return tokens[:, 0]
    if mode == "max":
        return torch.where(mask > 0, tokens, torch.full_like(tokens, -1e9)).max(dim=1).values
    summed = (tokens * mask).sum(dim=1)
    count = mask.sum(dim=1).clamp(min=1e-9)
    return summed / (count if mode == "mean" else count.sqrt())


def dense_layers(pipeline: SentencePipeline) -> Any:
    """The Dense modules as ``nn.Linear`` layers (registered in the exported module, so ``--precision`` converts
    them with the transformer)."""
    import torch

    layers = torch.nn.ModuleList()
    for dense in pipeline.dense:
        linear = torch.nn.Linear(dense.weight.shape[1], dense.weight.shape[0], bias=dense.bias is not None)
        with torch.no_grad():
            linear.weight.copy_(dense.weight)
            if dense.bias is not None:
                linear.bias.copy_(dense.bias)
        layers.append(linear)
    return layers


def run_pipeline(pipeline: SentencePipeline, layers: Any, tokens: torch.Tensor,
                 attention_mask: torch.Tensor) -> torch.Tensor:
    """Token states -> the sentence embedding ``[batch, dim]`` (``layers``: :func:`dense_layers`)."""
    import torch

    mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
    embedding = torch.cat([_pool(mode, tokens, mask) for mode in pipeline.pooling], dim=1)
    for layer, dense in zip(layers, pipeline.dense):
        embedding = layer(embedding)
        embedding = torch.tanh(embedding) if dense.tanh else embedding
    if pipeline.normalize:
        # F.normalize's arithmetic (x / max(||x||, 1e-12)) in ops ONNX Runtime's symbolic shape inference (quantize's
        # quant_pre_process) follows: F.normalize expands the norm to the input's run-time shape (Shape -> Concat ->
        # Expand), and torch.linalg.vector_norm becomes ReduceL2, whose output shape it leaves unknown
        norm = (embedding * embedding).sum(dim=1, keepdim=True).sqrt().clamp(min=1e-12)
        embedding = embedding / norm
    return embedding
