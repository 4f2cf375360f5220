"""Tiny models for the runner tests; also SPEC targets (``tests/runners/runner_models.py:cnn``)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the usual spelling

from portable.exporters.api import convert_precision


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv(x)))
        y = F.leaky_relu(self.conv2(y), 0.1)
        return self.fc(y.mean(dim=(2, 3)))


class TinyEncoder(nn.Module):
    """Embedding + one pre-LN transformer encoder block, hand-written (no fast paths)."""

    def __init__(self, vocab: int = 50, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, 2 * dim)
        self.ff2 = nn.Linear(2 * dim, dim)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed(ids)
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        x = x + self.ff2(F.gelu(self.ff1(self.norm2(x))))
        return x, x.mean(dim=1)


def cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return TinyCNN().eval(), (torch.randn(2, 3, 16, 16),)


def encoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return TinyEncoder().eval(), (torch.randint(0, 50, (2, 8)),)


def cnn_nan() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The CNN with one NaN weight: NaN reaches the output on every runner."""
    module, example = cnn()
    with torch.no_grad():
        module.fc.bias[3] = float("nan")
    return module, example


def encoder_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*encoder(), "fp16")


def encoder_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*encoder(), "bf16")


class _Widened(nn.Module):
    """bfloat16 in and out, float32 inside: ONNX Runtime's CPU provider has the Cast kernels it needs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.tanh(x.float()) * 3).to(torch.bfloat16)


def widened_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return _Widened().eval(), (torch.randn(2, 16).to(torch.bfloat16),)


def cnn_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return convert_precision(*cnn(), "fp16")


def export(module: nn.Module, example: tuple[torch.Tensor, ...], path: str, dynamic: list[dict[int, str]]) -> str:
    """Export with the dynamo exporter, opset 18, weights inside the file."""
    shapes = tuple({axis: torch.export.Dim(name) for axis, name in d.items()} for d in dynamic)
    program = torch.onnx.export(module, example, dynamo=True, opset_version=18, external_data=False,
                                dynamic_shapes=shapes, verbose=False)
    program.save(path)
    return path
