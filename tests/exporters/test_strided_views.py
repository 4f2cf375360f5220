"""The identity Gather of torchlib's ``as_strided`` (exporters/strided_views.py, issue 33): the one
``functional.adaptive_avg_pool2d(x, 1)`` leaves in every ConvNeXt-style head is removed with its batch-index chain, and an
``as_strided`` that really moves elements keeps its Gather; the export's verify holds both."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
import torch
from torch import nn
from torch.nn import functional

import portable


class PooledHead(nn.Module):
    """Conv -> a channels-last LayerNorm permuted back (ConvNeXt's blocks) -> global average pool -> Linear: the
    pool's input has channels-last strides, so its decomposition ends in an ``as_strided`` to those strides."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.conv(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.head(torch.flatten(functional.adaptive_avg_pool2d(y, 1), 1))


class Transposed(nn.Module):
    """A strided view that is a transpose: its Gather moves elements, and must stay."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2.0
        return torch.as_strided(y, (y.shape[0], 3, 2), (6, 1, 3)) + 1.0


def _ops(path: Path) -> Counter[str]:
    return Counter(n.op_type for n in onnx.load(str(path)).graph.node)


def test_the_pooled_heads_identity_gather_goes_with_its_batch_chain(tmp_path: Path) -> None:
    torch.manual_seed(0)
    path = tmp_path / "pooled.onnx"
    result = portable.export(PooledHead().eval(), (torch.randn(2, 3, 12, 12),), path, batch="dynamic")
    assert result.report.ok and result.parity is not None and result.parity.ok and not result.parity.warnings
    ops = _ops(path)
    assert not {"Gather", "Range", "Shape"} & set(ops), ops  # torchlib wrote Reshape -> Gather over Range indices


def test_a_strided_view_that_moves_elements_keeps_its_gather(tmp_path: Path) -> None:
    path = tmp_path / "transposed.onnx"
    result = portable.export(Transposed().eval(), (torch.randn(2, 2, 3),), path, batch="dynamic")
    assert result.report.ok and result.parity is not None and result.parity.ok and not result.parity.warnings
    assert _ops(path)["Gather"] == 1
