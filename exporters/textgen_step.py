"""One step of a decoder LLM over a static KV cache held as explicit graph inputs and outputs.

The step is the library's own code path: a transformers causal LM called with a
``transformers.StaticCache`` built as ``transformers.integrations.executorch`` builds it
(``TorchExportableModuleWithStaticCache``: sliding-window layers become full static layers, the
window stays in the mask; every layer initialized ahead of time). What differs from that recipe is
only where the cache lives: there it is a mutated buffer of the exported program, hidden from the
graph's signature (huggingface/transformers#38917, pytorch/pytorch#155862); here each layer's keys
and values are the graph inputs ``past_key_i`` / ``past_value_i`` (shape ``[batch, kv_heads, C,
head_dim]``), the cache's write offset is the input ``cache_position``, and the cache after the
step is the outputs ``present_key_i`` / ``present_value_i``. So one graph, exported once per
token count (``P`` for prefill, 1 for decode), runs at any position, and the host loop is array
work.

Inputs (all dims static; dim 0 is the batch):
    ``input_ids`` [B, T] int64, ``position_ids`` [B, T] int64 (the tokens' positions, RoPE's or the
    position embedding's), ``cache_position`` [B, 1] int64 (the cache slot of the block's first
    token; the same in every row: the library's static cache has one write offset per batch, the
    graph reads row 0), ``attention_mask`` [B, C] int64 (1 for the slots that hold a token of that
    row, the block's included), then ``past_key_0``, ``past_value_0``, ... [B, H, C, D].
Outputs: ``logits`` [B, T, V], ``present_key_0``, ``present_value_0``, ... [B, H, C, D]: the whole
    cache with the block's keys and values written at slots ``cache_position .. cache_position+T-1``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import FindingsError
from portable.exporters.rules import precheck_finding
from portable.findings import Finding, SourceLocation

if TYPE_CHECKING:
    import torch

__all__ = ["CACHE_KINDS", "STEP_INPUTS", "CacheShape", "StaticCacheRefused", "cache_shape", "input_names", "make_step",
           "output_names", "step_inputs"]

STEP_INPUTS = ("input_ids", "position_ids", "cache_position", "attention_mask")
CACHE_KINDS = ("key", "value")


class StaticCacheRefused(FindingsError):
    """The model's cache cannot be held as fixed-shape graph inputs; ``findings`` say where and why."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__(findings[0].message)
        self.findings = tuple(findings)


@dataclass(frozen=True)
class CacheShape:
    """The static cache of one model: layers, and each layer's ``[batch, heads, context, head_dim]``."""

    layers: int
    batch: int
    heads: int
    context: int
    head_dim: int
    dtype: Any  # torch.dtype

    @property
    def dims(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.context, self.head_dim)


def input_names(layers: int) -> tuple[str, ...]:
    return STEP_INPUTS + tuple(f"past_{kind}_{i}" for i in range(layers) for kind in CACHE_KINDS)


def output_names(layers: int) -> tuple[str, ...]:
    return ("logits",) + tuple(f"present_{kind}_{i}" for i in range(layers) for kind in CACHE_KINDS)


def make_step(model: Any, context: int, batch: int) -> torch.nn.Module:
    """The step module of ``model`` over a static cache of ``context`` slots (refused with
    :class:`StaticCacheRefused` when its cache cannot be static)."""
    refusal = refusal_findings(model)
    if refusal:
        raise StaticCacheRefused(refusal)
    return _step_class()(model, context, batch)


def _static_cache(model: Any, context: int, batch: int) -> Any:
    """``StaticCache`` as ``transformers.integrations.executorch.TorchExportableModuleWithStaticCache``
    builds it: sliding-window layers replaced by full static ones (the window is kept by the mask,
    which the model builds from its config), every layer initialized before tracing."""
    import torch
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer
    from transformers.configuration_utils import get_head_shapes

    config = model.config.get_text_config()
    cache = StaticCache(config=config, max_cache_len=context)
    for i, layer in enumerate(cache.layers):
        if isinstance(layer, StaticSlidingWindowLayer):
            cache.layers[i] = StaticLayer(context)
    heads, head_dim = get_head_shapes(config)
    cache.early_initialization(batch, heads, head_dim, model.dtype, torch.device("cpu"))
    return cache


def cache_shape(step: Any) -> CacheShape:
    """The cache geometry of a step module (from its first layer; every layer has the same)."""
    keys = step.cache.layers[0].keys
    batch, heads, context, head_dim = (int(d) for d in keys.shape)
    return CacheShape(len(step.cache.layers), batch, heads, context, head_dim, keys.dtype)


def step_inputs(shape: CacheShape, tokens: int, dtype: Any = None) -> tuple[Any, ...]:
    """Example inputs of a block of ``tokens`` tokens at position 0 over an empty cache: the four step
    inputs, then the cache as one dict (``{"key_0": ..., "value_0": ...}``; torch.onnx names its leaves
    ``past_key_0``..., and torch.export's dynamic batch follows the dict)."""
    import torch

    batch, context = shape.batch, shape.context
    positions = torch.arange(tokens).expand(batch, tokens).contiguous()
    mask = (torch.arange(context) < tokens).long().expand(batch, context).contiguous()
    cache = {f"{kind}_{i}": torch.zeros(shape.dims, dtype=dtype or shape.dtype)
             for i in range(shape.layers) for kind in CACHE_KINDS}
    return (torch.zeros(batch, tokens, dtype=torch.long), positions, torch.zeros(batch, 1, dtype=torch.long),
            mask, cache)


def _step_class() -> type:
    import torch

    class StaticCacheStep(torch.nn.Module):
        """``model`` over a :func:`_static_cache` whose tensors are the step's inputs (module docstring)."""

        def __init__(self, model: Any, context: int, batch: int) -> None:
            super().__init__()
            self.model = model
            self.cache = _static_cache(model, context, batch)

        def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, cache_position: torch.Tensor,
                    attention_mask: torch.Tensor, past: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            layers = self.cache.layers
            for i, layer in enumerate(layers):
                # clones: StaticLayer.update writes in place (index_copy_), and a graph input stays unchanged
                layer.keys, layer.values = past[f"key_{i}"].clone(), past[f"value_{i}"].clone()
                layer.cumulative_length = cache_position[0, 0].clone()
            out = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                             cache=self.cache, use_cache=True)
            present = {f"present_{kind}_{i}": getattr(layer, "keys" if kind == "key" else "values")
                       for i, layer in enumerate(layers) for kind in CACHE_KINDS}
            return {"logits": out.logits, **present}

    return StaticCacheStep


_HINT_NOT_CAUSAL_LM = ("pass a transformers causal LM (AutoModelForCausalLM...) or a module whose forward takes "
                       "input_ids, position_ids, attention_mask and cache= (a transformers StaticCache) and returns .logits")
_HINT_RECURRENT = ("its state is recurrent (conv/SSM state, fixed in size but not a key/value cache of C slots): "
                   "export it without --task text-generation, one forward over the whole sequence")


def refusal_findings(model: Any) -> list[Finding]:
    """Why ``model``'s cache cannot be a static KV cache (PORT107), at the line of its forward; [] when it can."""
    config = getattr(model, "config", None)
    forward = inspect.unwrap(getattr(type(model), "forward", None) or (lambda: None))
    where = _source(forward)
    if config is None or not callable(getattr(config, "get_text_config", None)):
        return [precheck_finding("PORT107", f"{type(model).__name__} has no transformers config: the static cache "
                                 "is sized from one", where, hint=_HINT_NOT_CAUSAL_LM)]
    parameters = inspect.signature(forward).parameters
    if "cache" not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return [precheck_finding("PORT107", f"{type(model).__name__}.forward takes no cache= argument, so a "
                                 "static cache cannot be passed to it", where, hint=_HINT_NOT_CAUSAL_LM)]
    return _layer_findings(model, where)


def _layer_findings(model: Any, where: SourceLocation | None) -> list[Finding]:
    """Layers whose cache is not a key/value tensor of C slots (linear attention, SSM state)."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    try:
        types, _ = get_layer_types_and_kwargs(model.config.get_text_config(decoder=True))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return [precheck_finding("PORT107", f"{type(model).__name__}: transformers cannot lay out a static cache for "
                                 f"its config ({type(exc).__name__}: {exc})", where, hint=_HINT_NOT_CAUSAL_LM)]
    odd = sorted({t for t in types if t not in _STATIC_LAYER_TYPES})
    if odd:
        return [precheck_finding("PORT107", f"{type(model).__name__}: layer type(s) {', '.join(odd)} keep a state "
                                 "that is not a key/value cache of C slots", where, hint=_HINT_RECURRENT)]
    return []


_STATIC_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})


def _source(function: Any) -> SourceLocation | None:
    """The file and line where ``function`` is defined."""
    try:
        file = inspect.getsourcefile(function)
        line = inspect.getsourcelines(function)[1]
    except (TypeError, OSError):
        return None
    return SourceLocation(file=str(Path(file)), line=line) if file else None
