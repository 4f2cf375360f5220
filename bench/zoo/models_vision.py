"""torchvision and timm entries: the libraries' own model code, random weights (seeded), batch-2 images."""

from __future__ import annotations

from functools import partial
from typing import Any

from bench.zoo.registry import Built, Entry

__all__ = ["TIMM", "TORCHVISION", "image"]

SEED = 0


def image(size: int = 224, batch: int = 2, channels: int = 3) -> Any:
    """Normal pixel values, as a normalised image batch is."""
    import torch

    return torch.randn(batch, channels, size, size, generator=torch.Generator().manual_seed(SEED))


def _torchvision(factory: str, size: int = 224, **kwargs: Any) -> Built:
    import torch

    from bench.zoo.tvops import import_torchvision

    models = import_torchvision().models
    torch.manual_seed(SEED)
    module = _lookup(models, factory)(weights=None, **kwargs)
    return Built(module.eval(), (image(size),), ("pixel_values",))


def _lookup(models: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        models = getattr(models, part)
    return models


def _tv_vit() -> Built:
    import torch

    from bench.zoo.tvops import import_torchvision

    vit = import_torchvision().models.vision_transformer
    torch.manual_seed(SEED)
    module = vit.VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=6, hidden_dim=384, mlp_dim=1536)
    return Built(module.eval(), (image(),), ("pixel_values",))


def _faster_rcnn() -> Built:
    import torch

    from bench.zoo.tvops import import_torchvision

    detection = import_torchvision().models.detection
    torch.manual_seed(SEED)
    module = detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None)
    images = [torch.rand(3, 320, 320, generator=torch.Generator().manual_seed(SEED))]
    return Built(module.eval(), (images,), ("images",))


def _timm(name: str, size: int = 224) -> Built:
    import torch

    from bench.zoo.tvops import register_torchvision_ops

    register_torchvision_ops()  # timm imports torchvision
    import timm

    torch.manual_seed(SEED)
    return Built(timm.create_model(name, pretrained=False).eval(), (image(size),), ("pixel_values",))


def _tv(name: str, factory: str, task: str = "classification", **kwargs: Any) -> Entry:
    return Entry(f"tv_{name}", "torchvision", task, partial(_torchvision, factory, **kwargs))


TORCHVISION: tuple[Entry, ...] = (
    _tv("resnet18", "resnet18"),
    _tv("mobilenet_v3_small", "mobilenet_v3_small"),
    _tv("efficientnet_b0", "efficientnet_b0"),
    _tv("regnet_y_400mf", "regnet_y_400mf"),
    _tv("convnext_tiny", "convnext_tiny"),
    Entry("tv_vit", "torchvision", "classification", _tv_vit, note="VisionTransformer, 4 layers, hidden 384"),
    _tv("swin_t", "swin_t"),
    _tv("maxvit_t", "maxvit_t"),
    _tv("densenet121", "densenet121"),
    _tv("squeezenet1_1", "squeezenet1_1"),
    _tv("shufflenet_v2", "shufflenet_v2_x1_0"),
    _tv("deeplabv3_mobilenet", "segmentation.deeplabv3_mobilenet_v3_large", "segmentation", weights_backbone=None),
    Entry("tv_fcn_resnet50", "torchvision", "segmentation",
          partial(_torchvision, "segmentation.fcn_resnet50", weights_backbone=None),
          note="`portable compare --localize` on the `--no-verify` export: ONNX Runtime and PyTorch first part at "
               "`Relu_30` (backbone.layer3.2, after the dilated 3x3 convolutions), by 2.2e-4: fp32 arithmetic in "
               "the convolutions, not a wrong op (the bare export differs as much); `--atol 4e-4` exports it"),
    Entry("tv_fasterrcnn", "torchvision", "detection", _faster_rcnn, expected="refused: PORT106",
          note="NMS and box filtering give data-dependent shapes: export the backbone/heads without post-processing"),
)

TIMM: tuple[Entry, ...] = (
    Entry("timm_convnext_nano", "timm", "classification", partial(_timm, "convnext_nano")),
    Entry("timm_vit_small", "timm", "classification", partial(_timm, "vit_small_patch16_224")),
    Entry("timm_efficientnet_b0", "timm", "classification", partial(_timm, "efficientnet_b0")),
    Entry("timm_mobilevit_xs", "timm", "classification", partial(_timm, "mobilevit_xs", 256)),
    Entry("timm_resnet26d", "timm", "classification", partial(_timm, "resnet26d")),
)
