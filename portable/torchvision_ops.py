"""Make PyPI's torchvision importable beside the CPU torch, before torchvision or timm is imported.

PyPI's torchvision 0.28 is a CUDA build: its compiled ``_C`` ops do not load beside torch
2.13.0+cpu, so ``torchvision::nms`` is never defined, and ``torchvision._meta_registrations``
fails at import on ``register_fake("torchvision::nms")``. Here the two schemas that module
needs (``nms``, ``qnms``; the same strings as torchvision's ``csrc/ops/nms.cpp``) are defined with
plain PyTorch kernels; torchvision then registers its own fake (meta) kernels on them.
:func:`import_torchvision` also lets ``torchvision.ops.boxes.nms`` past its "compiled ops
loaded?" guard (``roi_align`` has a pure-PyTorch path of its own and keeps it). Only when
torchvision's ops did load (a matching build) is nothing done.

portable calls :func:`ensure_torchvision_importable` before it imports a SPEC's module or loads a model folder
through transformers (which imports torchvision when it is installed): without it, every folder failed with
"Could not import module 'BertModel'" wherever PyPI's torchvision sat beside the CPU torch (found by exporting the
trained MiniLM folder in a venv with the zoo extra). No library does this: torchvision expects its matching torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ensure_torchvision_importable", "import_torchvision", "nms_reference", "register_torchvision_ops"]

_LIBRARY: list[Any] = []  # keeps the torch.library.Library alive: dropping it unregisters the ops


def nms_reference(boxes: Any, scores: Any, iou_threshold: float) -> Any:
    """Greedy non-maximum suppression in plain PyTorch: indices kept, by decreasing score."""
    import torch

    order = scores.argsort(descending=True)
    keep: list[int] = []
    while order.numel():
        first = int(order[0])
        keep.append(first)
        rest = order[1:]
        if not rest.numel():
            break
        top_left = torch.maximum(boxes[first, :2], boxes[rest, :2])
        bottom_right = torch.minimum(boxes[first, 2:], boxes[rest, 2:])
        inter = (bottom_right - top_left).clamp(min=0).prod(dim=1)
        area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
        iou = inter / (area(boxes[first]) + area(boxes[rest]) - inter)
        order = rest[~(iou > iou_threshold)]  # as torchvision: suppressed only above the threshold (NaN kept)
    return torch.tensor(keep, dtype=torch.long, device=boxes.device)


def _qnms(boxes: Any, scores: Any, iou_threshold: float) -> Any:
    return nms_reference(boxes.dequantize(), scores.dequantize(), iou_threshold)


def register_torchvision_ops() -> None:
    """Define ``torchvision::nms``/``qnms`` unless torchvision's own compiled ops can provide them."""
    import torch

    if _LIBRARY or _defined() or _has_compiled_ops():
        return
    library = torch.library.Library("torchvision", "DEF")
    library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.impl("nms", nms_reference, "CompositeExplicitAutograd")
    library.impl("qnms", _qnms, "CompositeExplicitAutograd")
    _LIBRARY.append(library)


def _defined() -> bool:
    """Whether ``torchvision::nms`` exists already (this file loaded once more under another name: a SPEC
    that imports it by path, beside the tests' ``bench.zoo.tvops``)."""
    import torch

    try:
        return torch.ops.torchvision.nms is not None
    except (AttributeError, RuntimeError):
        return False


def _has_compiled_ops() -> bool:
    """Whether torchvision's ``_C`` extension loads here (it defines the ops itself then)."""
    import importlib.util
    from pathlib import Path

    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        for lib in Path(folder).glob("_C*.so"):
            try:
                torch.ops.load_library(str(lib))
                return True
            except (OSError, RuntimeError):
                return False
    return False


def import_torchvision() -> Any:
    """``import torchvision`` with the ops above in place; the module."""
    register_torchvision_ops()
    import torchvision
    import torchvision.ops.boxes

    if not torchvision.extension._has_ops():
        torchvision.ops.boxes._assert_has_ops = lambda: None  # nms runs the kernel defined above
    return torchvision


def ensure_torchvision_importable() -> None:
    """:func:`register_torchvision_ops` where torchvision is installed (nothing, and torch not imported, where it
    is not)."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        register_torchvision_ops()
