"""SPEC targets and exports for the GPU evidence run (docs/gpu/README.md).

Random initialisation only: nothing can be downloaded on the GPU machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from portable.exporters.api import convert_precision  # what `portable export --precision` does


def resnet50() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision ResNet-50, random init (seed 0), 224x224."""
    from torchvision.models import resnet50 as build

    torch.manual_seed(0)
    return build(weights=None).eval(), (torch.randn(2, 3, 224, 224),)


class BertEncoder(nn.Module):
    """BERT-base from its config (random init); input_ids -> last_hidden_state."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig(attn_implementation="sdpa")
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids).last_hidden_state


def bert_base() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """BERT-base encoder, sequence 128, token ids in [0, 30522)."""
    torch.manual_seed(0)
    ids = torch.randint(0, 30522, (2, 128))
    ids[0, 0], ids[1, 0] = 0, 30521  # the example spans the vocabulary: compare draws ids from its range
    return BertEncoder().eval(), (ids,)


def cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The tiny CNN of tests/runners."""
    return _test_models().cnn()


def encoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The tiny transformer encoder of tests/runners (dynamic sequence axis: give --dim)."""
    return _test_models().encoder()


def convnext_tiny() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision ConvNeXt-T, random init (seed 0), 224x224 (its head is trunc-normal, not zeros). Its layer
    scales are drawn from [0.1, 1) (seed 1): torchvision initialises them to 1e-6, which leaves every block a
    near no-op, so that parity on it would prove nothing about the blocks (timing is the same either way)."""
    from torchvision.models import convnext_tiny as build

    torch.manual_seed(0)
    module = build(weights=None).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if name.endswith("layer_scale"):
                parameter.copy_(0.1 + 0.9 * torch.rand(parameter.shape, generator=generator))
    return module, (torch.randn(2, 3, 224, 224),)


def convnext_tiny_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*convnext_tiny(), "fp16")


def vit_b16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision ViT-B/16, random init (seed 0), 224x224."""
    from torchvision.models import vit_b_16

    torch.manual_seed(0)
    return vit_b_16(weights=None).eval(), (torch.randn(2, 3, 224, 224),)


def vit_b16_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*vit_b16(), "fp16")


def vit_b16_head() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ViT-B/16 whose classification head is re-initialised (normal, std 0.02, seed 1): torchvision
    initialises it to zeros, so every output of the random-init model is 0 and parity on it proves
    nothing (compare flags it degenerate)."""
    module, example = vit_b16()
    head = module.heads.head
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=generator) * 0.02)
        head.bias.copy_(torch.randn(head.bias.shape, generator=generator) * 0.02)
    return module, example


def vit_b16_head_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*vit_b16_head(), "fp16")


def resnet50_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*resnet50(), "fp16")


def bert_base_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*bert_base(), "fp16")


def bert_base_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """bf16 BERT-base: int inputs, so the seeded feeds need no bf16 array (NumPy has none)."""
    return convert_precision(*bert_base(), "bf16")


def _test_models():  # type: ignore[no-untyped-def]
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tests" / "runners" / "runner_models.py"
    spec = importlib.util.spec_from_file_location("portable_gpu_runner_models", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _without_attention_rewrites() -> None:
    """Turn off the exporter's attention clean-ups (exporters/attention_rewrites.py and the
    ``ReshapeTransposeReshape`` rule), as the tests do, for the before/after timing of round 4."""
    import portable.exporters.attention_rewrites as attention_rewrites
    import portable.exporters.rewrites as rewrites

    library = rewrites.portable_rules
    attention_rewrites.attention_rules = lambda: []  # type: ignore[assignment]
    rewrites.portable_rules = lambda: [r for r in library() if r.name != "ReshapeTransposeReshape"]  # type: ignore[assignment]


def export(name: str, path: str, raw: bool = False) -> None:
    """Export SPEC ``name`` with a dynamic batch axis: ``portable export``'s pipeline (the dynamo exporter, opset
    18, portable's passes, one file, no verify here: the compares are the proof), or with ``raw`` torch.onnx's
    own output (what the issue-12 and issue-33 stage A/B rows ran; docs/gpu/ortvc.md compares the two)."""
    module, example = globals()[name]()
    if not raw:
        from portable.exporters.api import export as portable_export

        portable_export(module, example, path, batch="dynamic", verify=False, force=True)
    else:
        shapes = tuple({0: torch.export.Dim("batch", min=1, max=1024)} for _ in example)
        program = torch.onnx.export(module, example, dynamo=True, opset_version=18, external_data=False,
                                    dynamic_shapes=shapes, verbose=False)
        program.save(path)
    print(f"exported {name} -> {path} ({Path(path).stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    if "--without-attention-rewrites" in sys.argv[3:]:
        _without_attention_rewrites()
    export(sys.argv[1], sys.argv[2], raw="--raw" in sys.argv[3:])
