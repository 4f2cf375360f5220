"""The tasks a model folder exports as, by optimum's names, and which one a folder means.

A task is data: the transformers Auto class that loads it, the mapping table of transformers that says which
``model_type`` can do it (``MODEL_FOR_..._MAPPING_NAMES``: transformers' own answer, so a new architecture
needs no line here), its inputs' kind (text or image) and its outputs' names. The folder's task is read from
``config.json``'s ``architectures`` (``BertForSequenceClassification`` is text-classification, ``BertModel``
feature-extraction) or, for a sentence-transformers folder, from ``modules.json`` (sentence-similarity).

optimum's ``TasksManager`` is not used: it answers the same question from its own per-architecture tables,
which exist for optimum's exporter (dummy-input generators, dynamic axes) that portable does not need, and
``optimum-onnx`` pins ``transformers<4.58`` while the folder path needs transformers 5.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from portable.errors import UsageError

__all__ = ["FOLDER_TASKS", "TASK_NAMES", "Task", "check_task", "infer_task", "tasks_of"]


@dataclass(frozen=True)
class Task:
    """One task: ``auto`` loads it, ``mapping`` (in ``transformers.models.auto.modeling_auto``) says which model
    types can do it, ``modality`` which inputs it takes, ``outputs`` the graph's output names."""

    name: str
    auto: str
    mapping: str
    modality: str  # "text" | "image"
    outputs: tuple[str, ...]

    @property
    def dims(self) -> tuple[str, ...]:
        """The dims ``--shape`` may name (optimum's names)."""
        return ("sequence_length",) if self.modality == "text" else ("height", "width")


FOLDER_TASKS: dict[str, Task] = {t.name: t for t in (
    Task("feature-extraction", "AutoModel", "MODEL_MAPPING_NAMES", "text", ("last_hidden_state",)),
    # a sentence-transformers folder's whole pipeline: the transformer, its pooling, Normalize (portable.hf.sentence)
    Task("sentence-similarity", "AutoModel", "MODEL_MAPPING_NAMES", "text", ("sentence_embedding",)),
    Task("text-classification", "AutoModelForSequenceClassification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
         "text", ("logits",)),
    Task("token-classification", "AutoModelForTokenClassification", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
         "text", ("logits",)),
    Task("fill-mask", "AutoModelForMaskedLM", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "text", ("logits",)),
    Task("question-answering", "AutoModelForQuestionAnswering", "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES", "text",
         ("start_logits", "end_logits")),
    Task("image-classification", "AutoModelForImageClassification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
         "image", ("logits",)),
    # today's static-cache pair (exporters/textgen.py): its own shapes (--context, --prefill)
    Task("text-generation", "AutoModelForCausalLM", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "text", ("logits",)),
)}
TASK_NAMES = tuple(FOLDER_TASKS)
# the base model's mapping lists every model type; a vision base model's inputs are images
_VISION_BASE = "MODEL_FOR_IMAGE_MAPPING_NAMES"


def _table(name: str) -> Mapping[str, Any]:
    from transformers.models.auto import modeling_auto

    return getattr(modeling_auto, name, {})


def _classes(value: Any) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (str(value),)


def tasks_of(model_type: str) -> list[str]:
    """The tasks transformers can load ``model_type`` for (feature-extraction for every known type)."""
    return [t.name for t in FOLDER_TASKS.values() if t.name != "sentence-similarity" and model_type in _table(t.mapping)]


def modality(task: Task, model_type: str) -> str:
    """A base model's inputs: images for a vision model type (ViT, ConvNeXt, ResNet; CLIP's vision tower, which
    transformers' vision table does not list, by its base class's forward: ``pixel_values``, no ``input_ids``)."""
    if task.name == "feature-extraction" and (model_type in _table(_VISION_BASE) or _takes_pixels(model_type)):
        return "image"
    return task.modality


def _takes_pixels(model_type: str) -> bool:
    import inspect

    import transformers

    names = _classes(_table("MODEL_MAPPING_NAMES").get(model_type, ()))
    found = getattr(transformers, names[0], None) if names else None
    try:
        params = inspect.signature(found.forward).parameters if found is not None else {}
    except (TypeError, ValueError):
        return False
    return "pixel_values" in params and "input_ids" not in params


def infer_task(config: Mapping[str, Any], sentence_transformers: bool) -> tuple[str, str]:
    """The folder's task and where it came from: modules.json, else the first of ``architectures`` found in a
    task's mapping (the heads before the base model), else the base model when config.json names none."""
    if sentence_transformers:
        return "sentence-similarity", "modules.json (a sentence-transformers folder)"
    model_type = str(config.get("model_type", ""))
    architectures = [str(a) for a in config.get("architectures") or ()]
    for architecture in architectures:
        for task in (t for t in FOLDER_TASKS.values() if t.name != "sentence-similarity"):
            if task.name != "feature-extraction" and architecture in _classes(_table(task.mapping).get(model_type, ())):
                return task.name, f"config.json's architectures ({architecture})"
        if architecture in _classes(_table("MODEL_MAPPING_NAMES").get(model_type, ())):
            return "feature-extraction", f"config.json's architectures ({architecture})"
    if not architectures:
        return "feature-extraction", "config.json names no architectures: the base model"
    raise UsageError(f"config.json's architectures {architectures} name no task portable exports; give --task "
                     f"({', '.join(tasks_of(model_type)) or 'none known for ' + model_type})")


def check_task(task: str, model_type: str, sentence_transformers: bool) -> Task:
    """The task, if the model type can do it; a usage error naming the tasks it can do otherwise."""
    found = FOLDER_TASKS.get(task)
    if found is None:
        raise UsageError(f"--task {task}: not a task of a model folder (choose from {', '.join(TASK_NAMES)})")
    if task == "sentence-similarity" and not sentence_transformers:
        raise UsageError("--task sentence-similarity: needs a sentence-transformers folder (modules.json with its "
                         "Pooling); this folder is a plain transformers model: --task feature-extraction gives its "
                         "token states")
    if model_type not in _table(found.mapping):
        raise UsageError(f"--task {task}: transformers has no {found.auto} for model type {model_type!r} (its tasks: "
                         f"{', '.join(tasks_of(model_type)) or 'none'})")
    return found
