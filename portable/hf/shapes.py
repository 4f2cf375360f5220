"""The static dims of a folder's inputs, each with where it came from: ``--shape NAME=VALUE`` (optimum's names:
``sequence_length``, ``height``, ``width``), else the folder's own configs (the image processor's output size,
the tokenizer's ``model_max_length`` or sentence-transformers' ``max_seq_length``, capped by
:data:`DEFAULT_SEQUENCE_LENGTH`), else the model's config (``image_size``)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from portable.errors import UsageError

__all__ = ["DEFAULT_SEQUENCE_LENGTH", "Dim", "image_size", "parse_shapes", "size_dict", "sized_like", "text_length"]

# The cap of a text model's default sequence length: a tokenizer's model_max_length is often 512 (BERT) or
# unbounded (1e30), and a static graph costs its full length on every call. 128 holds most sentences whole.
DEFAULT_SEQUENCE_LENGTH = 128
_SHAPE = re.compile(r"^([a-z_]+)=(\d+)$")


@dataclass(frozen=True)
class Dim:
    """One static dim: its value, and where it came from (for the report and the manifest)."""

    value: int
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "from": self.source}


def parse_shapes(values: Sequence[str], allowed: Sequence[str], task: str) -> dict[str, int]:
    """``--shape NAME=VALUE`` values; a name the task does not have is a usage error naming the ones it has."""
    shapes: dict[str, int] = {}
    for text in values:
        match = _SHAPE.match(text.strip())
        if not match or int(match.group(2)) < 1:
            raise UsageError(f"--shape {text!r}: expected NAME=VALUE with VALUE >= 1 (names: {', '.join(allowed)})")
        name = match.group(1)
        if name not in allowed:
            raise UsageError(f"--shape {name}: {task} has no dim {name!r} (its dims: {', '.join(allowed) or 'none'})")
        shapes[name] = int(match.group(2))
    return shapes


def _limit(value: Any) -> int | None:
    """A sane length limit (transformers writes 1e30 for 'none')."""
    return int(value) if isinstance(value, (int, float)) and 0 < value < 1_000_000 else None


def text_length(given: Mapping[str, int], tokenizer: Any, sentence_config: Mapping[str, Any] | None,
                config: Mapping[str, Any]) -> Dim:
    """``sequence_length``: given, else the folder's own limit capped by the default, else the default."""
    if "sequence_length" in given:
        return Dim(given["sequence_length"], "--shape")
    limits = [("sentence_bert_config.json's max_seq_length", _limit((sentence_config or {}).get("max_seq_length"))),
              ("the tokenizer's model_max_length", _limit(getattr(tokenizer, "model_max_length", None))),
              ("config.json's max_position_embeddings", _limit(config.get("max_position_embeddings")))]
    for source, limit in limits:
        if limit is not None:
            if limit <= DEFAULT_SEQUENCE_LENGTH:
                return Dim(limit, source)
            return Dim(DEFAULT_SEQUENCE_LENGTH, f"{source} ({limit}) capped at the default {DEFAULT_SEQUENCE_LENGTH}")
    return Dim(DEFAULT_SEQUENCE_LENGTH, "the default")


def size_dict(value: Any) -> dict[str, int]:
    """An image processor's ``size`` or ``crop_size`` as a plain dict of the keys it sets (transformers 5 holds
    them as a ``SizeDict`` dataclass, older processors as a dict)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: int(getattr(value, f.name)) for f in dataclasses.fields(value) if getattr(value, f.name) is not None}
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def sized_like(value: Any, sizes: Mapping[str, int]) -> Any:
    """``sizes`` in the type ``value`` has (a ``SizeDict`` stays one)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value)(**sizes)
    return dict(sizes)


def _square(value: Any) -> tuple[int, int] | None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = size_dict(value)
    if isinstance(value, int):
        return value, value
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return int(value[0]), int(value[1])
    if isinstance(value, Mapping):
        if "height" in value and "width" in value:
            return int(value["height"]), int(value["width"])
        if "shortest_edge" in value:
            return int(value["shortest_edge"]), int(value["shortest_edge"])
    return None


def _processor_size(processor: Any) -> tuple[int, int] | None:
    """The image processor's output size: its crop when it crops, else its resize target."""
    if processor is None:
        return None
    if getattr(processor, "do_center_crop", False) and _square(getattr(processor, "crop_size", None)):
        return _square(processor.crop_size)
    return _square(getattr(processor, "size", None))


def image_size(given: Mapping[str, int], processor: Any, config: Mapping[str, Any]) -> dict[str, Dim]:
    """``height`` and ``width``: given, else the preprocessor's output size, else config.json's image_size."""
    found, source = _processor_size(processor), "preprocessor_config.json"
    if found is None:
        nested = config.get("vision_config")
        vision: Mapping[str, Any] = nested if isinstance(nested, Mapping) else config
        found, source = _square(vision.get("image_size", 224)), "config.json's image_size"
        if "image_size" not in vision:
            source = "the default (224: config.json has no image_size)"
    height, width = found or (224, 224)
    return {"height": Dim(given["height"], "--shape") if "height" in given else Dim(height, source),
            "width": Dim(given["width"], "--shape") if "width" in given else Dim(width, source)}
