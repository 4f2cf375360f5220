"""Random weights that give outputs worth comparing and graphs like trained models' ones.

Libraries initialise some parameters to exact zeros (torchvision ViT's head, every bias and
LayerNorm shift in BERT, ConvNeXt's conv biases) and leave BatchNorm's running statistics at
0 and 1. With such weights deep CNNs (MobileNetV3, EfficientNet) shrink their outputs to ~1e-16
and ViT outputs exactly 0, where any runtime's result passes parity; and ``x + 0`` is a node
that onnxsim removes and a trained model does not have. So every all-zero parameter is redrawn
(normal, std 0.02, seeded) and BatchNorm's statistics are set from one train-mode pass over
the example inputs (not for detectors, whose train mode needs targets).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SEED", "live_weights"]

SEED = 0


def live_weights(module: Any, args: tuple[Any, ...], calibrate: bool = True) -> Any:
    """``module`` with no all-zero parameter and (``calibrate``) BatchNorm statistics from ``args``; eval mode."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for param in module.parameters():
            if param.is_floating_point() and param.numel() and not param.any():
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
        norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if calibrate and norms:
            _calibrate(module, norms, args)
    return module.eval()


def _calibrate(module: Any, norms: list[Any], args: tuple[Any, ...]) -> None:
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: one pass gives the example's statistics
    try:
        module.train()(*args)
    finally:
        for m, momentum in zip(norms, saved):
            m.momentum = momentum
