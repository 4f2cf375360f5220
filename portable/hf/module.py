"""The module a folder exports as: the transformers model under its task's inputs and outputs.

Inputs are positional in the order transformers' forward takes them (``input_ids``, ``attention_mask``,
``token_type_ids``; ``pixel_values``), so that the graph's inputs, ``compare``'s positional feeds and the
module agree; the result is a dict keyed by the task's output names (``last_hidden_state``, ``logits``,
``sentence_embedding``), which the exporter makes the graph's output names. torch is imported inside the
functions (the classes are made on first use).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from portable.hf.sentence import SentencePipeline, dense_layers, run_pipeline

if TYPE_CHECKING:
    import torch

__all__ = ["TEXT_INPUTS", "example_inputs", "task_module"]

TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # transformers' forward order


def _outputs(result: Any, names: Sequence[str]) -> dict[str, Any]:
    return {name: result[name] for name in names}


def _dict_flag(model: Any) -> dict[str, bool]:
    """``return_dict=True`` where the model's forward takes it (transformers' own models; a folder's own code
    may not: its forward is called as it is, its result read by key)."""
    import inspect

    params = inspect.signature(model.forward).parameters.values()
    takes = any(p.name == "return_dict" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    return {"return_dict": True} if takes else {}


@functools.cache
def _classes() -> tuple[type, type]:
    import torch

    class TextTask(torch.nn.Module):
        """A text model's task: token ids (and the masks it takes) in, the task's outputs out."""

        def __init__(self, model: Any, inputs: Sequence[str], outputs: Sequence[str],
                     pipeline: SentencePipeline | None) -> None:
            super().__init__()
            self.model, self.inputs, self.outputs, self.pipeline = model, tuple(inputs), tuple(outputs), pipeline
            self.dense = dense_layers(pipeline) if pipeline is not None else torch.nn.ModuleList()
            self.flag = _dict_flag(model)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                    token_type_ids: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
            given = dict(zip(self.inputs, (input_ids, attention_mask, token_type_ids)))
            result = self.model(**given, **self.flag)
            if self.pipeline is None:
                return _outputs(result, self.outputs)
            mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
            return {"sentence_embedding": run_pipeline(self.pipeline, self.dense, result.last_hidden_state, mask)}

    class ImageTask(torch.nn.Module):
        """An image model's task: ``pixel_values`` in, the task's outputs out."""

        def __init__(self, model: Any, outputs: Sequence[str]) -> None:
            super().__init__()
            self.model, self.outputs, self.flag = model, tuple(outputs), _dict_flag(model)

        def forward(self, pixel_values: torch.Tensor) -> dict[str, torch.Tensor]:
            return _outputs(self.model(pixel_values=pixel_values, **self.flag), self.outputs)

    return TextTask, ImageTask


def task_module(model: Any, modality: str, inputs: Sequence[str], outputs: Sequence[str],
                pipeline: SentencePipeline | None = None) -> torch.nn.Module:
    """``model`` under the task's inputs and outputs (``pipeline``: a sentence-transformers folder's pooling)."""
    text, image = _classes()
    module = text(model, inputs, outputs, pipeline) if modality == "text" else image(model, outputs)
    return module.eval()


def example_inputs(inputs: Sequence[str], dims: dict[str, int], vocab: int, channels: int, seed: int = 0,
                   ) -> tuple[Any, ...]:
    """Seeded example inputs at batch 2: token ids drawn from the vocabulary, an attention mask with the second
    row padded over its last third (so the padding path is traced and verified), zero token types; normal
    pixel values."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    if inputs == ("pixel_values",):
        return (torch.randn(2, channels, dims["height"], dims["width"], generator=generator),)
    length = dims["sequence_length"]
    values = {"input_ids": torch.randint(0, max(vocab, 1), (2, length), generator=generator),
              "attention_mask": torch.ones(2, length, dtype=torch.int64),
              "token_type_ids": torch.zeros(2, length, dtype=torch.int64)}
    values["attention_mask"][1, length - length // 3:] = 0
    return tuple(values[name] for name in inputs)
