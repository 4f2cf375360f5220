"""A model folder loaded for export or as ``compare``'s reference: everything checked that can be checked from
the folder's JSON first (config.json, the task, ``--shape``), then the tokenizer or image processor, then the
weights through transformers' Auto class (local files only: never a download)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portable.errors import InputError, UsageError, one_line
from portable.hf.folder import Folder, read_folder, require_transformers
from portable.hf.sentence import SentencePipeline, read_pipeline
from portable.hf.shapes import Dim, image_size, parse_shapes, text_length
from portable.hf.tasks import Task, check_task, infer_task, modality

__all__ = ["FolderModel", "FolderPlan", "load_folder", "plan_folder"]


@dataclass(frozen=True)
class FolderPlan:
    """What a folder will export as, from its JSON alone (nothing loaded yet)."""

    folder: Folder
    task: Task
    task_source: str
    modality: str
    shapes: dict[str, int]
    trust_remote_code: bool


@dataclass(frozen=True)
class FolderModel:
    """A loaded folder: the module to export (the task's wrapper; the causal LM itself for text-generation), its
    example inputs and their names, the dims with their sources, and the tokenizer or image processor."""

    plan: FolderPlan
    module: Any
    args: tuple[Any, ...]
    names: tuple[str, ...]
    dims: dict[str, Dim]
    tokenizer: Any = None
    processor: Any = None
    pipeline: SentencePipeline | None = field(default=None, repr=False)

    @property
    def task(self) -> str:
        return self.plan.task.name

    def record(self) -> dict[str, Any]:
        """Where the file came from, for the manifest: the folder, the task and every dim with its source."""
        return {"folder": str(self.plan.folder.root), "given": self.plan.folder.given, "task": self.task,
                "task_from": self.plan.task_source, "model_type": self.plan.folder.model_type,
                "inputs": list(self.names), "outputs": list(self.plan.task.outputs),
                "dims": {name: dim.to_dict() for name, dim in self.dims.items()},
                "sentence_transformers": self.pipeline.to_dict() if self.pipeline else None}


def plan_folder(text: str, task: str | None = None, shapes: Sequence[str] = (),
                trust_remote_code: bool = False) -> FolderPlan:
    """The folder read and its task and ``--shape`` checked, before anything heavy is loaded."""
    folder = read_folder(text, trust_remote_code)
    if task in (None, "model"):
        name, source = infer_task(folder.config, folder.sentence_transformers)
    else:
        name, source = str(task), "--task"
    found = _check_task(name, folder)
    kind = modality(found, folder.model_type)
    allowed = () if found.name == "text-generation" else (("sequence_length",) if kind == "text" else ("height", "width"))
    if found.name == "text-generation" and shapes:
        raise UsageError("--shape: text-generation's lengths are --context (the KV cache) and --prefill (one prefill "
                         "call's tokens)")
    return FolderPlan(folder, found, source, kind, parse_shapes(shapes, allowed, found.name), trust_remote_code)


def _check_task(name: str, folder: Folder) -> Task:
    """The task checked against transformers' tables; remote code: against its own auto_map."""
    if not folder.remote_code:
        return check_task(name, folder.model_type, folder.sentence_transformers)
    from portable.hf.tasks import FOLDER_TASKS

    found = FOLDER_TASKS.get(name)
    if found is None or found.auto not in folder.config.get("auto_map", {}):
        raise UsageError(f"--task {name}: the folder's remote code maps no {found.auto if found else name} (its "
                         f"auto_map: {', '.join(folder.config.get('auto_map', {}))})", path=str(folder.path))
    return found


def _quiet() -> Any:
    from portable.quiet import quiet_user_code

    return quiet_user_code()


def _preprocessing(plan: FolderPlan) -> tuple[Any, Any]:
    """The folder's tokenizer (text) or image processor (images), None where it has none."""
    transformers = require_transformers()
    path = str(plan.folder.path)
    trust = plan.trust_remote_code
    try:
        with _quiet():
            if plan.modality == "text":
                has = any((plan.folder.path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"))
                return (transformers.AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust)
                        if has else None), None
            if (plan.folder.path / "preprocessor_config.json").is_file():
                return None, transformers.AutoImageProcessor.from_pretrained(path, local_files_only=True,
                                                                              trust_remote_code=trust)
    except Exception as exc:  # noqa: BLE001 - a broken tokenizer or processor file
        raise InputError(f"cannot load the folder's {'tokenizer' if plan.modality == 'text' else 'image processor'}: "
                         f"{one_line(exc)}", path=path) from None
    return None, None


def _weights(plan: FolderPlan) -> Any:
    """The model through the task's Auto class, float32, from local files only."""
    import torch

    transformers = require_transformers()
    auto = getattr(transformers, plan.task.auto)
    try:
        with _quiet():
            model = auto.from_pretrained(str(plan.folder.path), local_files_only=True, dtype=torch.float32,
                                         trust_remote_code=plan.trust_remote_code)
    except Exception as exc:  # noqa: BLE001 - missing or broken weights, a config the class refuses
        raise InputError(f"transformers cannot load the model: {one_line(exc)}", path=str(plan.folder.path)) from None
    return model.eval()


def _text_inputs(model: Any, tokenizer: Any, config: dict[str, Any]) -> tuple[str, ...]:
    """The text inputs the model takes, in its forward's order: token types only where the tokenizer makes them
    (or, without a tokenizer, where the model has more than one type)."""
    from portable.hf.module import TEXT_INPUTS

    params = set(inspect.signature(model.forward).parameters)
    made = set(getattr(tokenizer, "model_input_names", ()) or ())
    names = [n for n in TEXT_INPUTS if n in params]
    if "token_type_ids" in names and not (("token_type_ids" in made) if tokenizer is not None
                                          else int(config.get("type_vocab_size", 0) or 0) > 1):
        names.remove("token_type_ids")
    return tuple(names)


def _dims(plan: FolderPlan, tokenizer: Any, processor: Any, pipeline: SentencePipeline | None) -> dict[str, Dim]:
    config = plan.folder.config
    if plan.modality == "text":
        sbert = {"max_seq_length": pipeline.max_seq_length} if pipeline and pipeline.max_seq_length else None
        return {"sequence_length": text_length(plan.shapes, tokenizer, sbert, config)}
    return image_size(plan.shapes, processor, config)


def load_folder(text: str, task: str | None = None, shapes: Sequence[str] = (), trust_remote_code: bool = False,
                weights: str | Path | None = None) -> FolderModel:
    """The folder ``text`` names, loaded for ``task`` (None or "model": the folder's own) at ``shapes``."""
    if weights is not None:
        raise UsageError("--weights: a model folder's weights are its own (config.json beside them)")
    plan = plan_folder(text, task, shapes, trust_remote_code)
    pipeline = (read_pipeline(plan.folder.root, plan.folder.modules or ())
                if plan.task.name == "sentence-similarity" else None)
    tokenizer, processor = _preprocessing(plan)
    dims = {} if plan.task.name == "text-generation" else _dims(plan, tokenizer, processor, pipeline)
    model = _weights(plan)
    if plan.task.name == "text-generation":
        return FolderModel(plan, model, (), (), dims, tokenizer, processor)
    return _wrapped(plan, model, dims, tokenizer, processor, pipeline)


def _wrapped(plan: FolderPlan, model: Any, dims: dict[str, Dim], tokenizer: Any, processor: Any,
             pipeline: SentencePipeline | None) -> FolderModel:
    from portable.hf.module import example_inputs, task_module

    config = model.config.to_dict()
    names = _text_inputs(model, tokenizer, config) if plan.modality == "text" else ("pixel_values",)
    vision = config.get("vision_config") or config
    args = example_inputs(names, {k: d.value for k, d in dims.items()}, int(config.get("vocab_size", 0) or 0),
                          int(vision.get("num_channels", 3) or 3))
    module = task_module(model, plan.modality, names, plan.task.outputs, pipeline)
    return FolderModel(plan, module, args, names, dims, tokenizer, processor, pipeline)
