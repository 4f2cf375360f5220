"""--localize on portable's own exports, whose values carry canonical names, not PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import portable
from portable.runners.inputs import graph_io, make_feeds
from portable.runners.localize import localize_divergence
from portable.runners.tolerances import ToleranceTable


class Tagger(nn.Module):
    """Token ids -> embedding -> linear -> tanh -> linear: a divergence in the embedding shows everywhere after."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.hidden = nn.Linear(16, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(self.embed(ids))))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    torch.manual_seed(0)
    module = Tagger().eval()
    path = tmp_path_factory.mktemp("localize") / "tagger.onnx"
    portable.export(module, (torch.randint(0, 50, (2, 7)),), path, verify=False)
    return module, path


def _feeds(path):
    specs, _ = graph_io(path)
    return make_feeds(specs, 2, int_range=(0, 50))


def _changed(module: Tagger, change) -> Tagger:
    copy = Tagger().eval()
    copy.load_state_dict(module.state_dict())
    with torch.no_grad():
        change(copy)
    return copy


def test_a_changed_embedding_is_found_at_the_gather(exported) -> None:
    module, path = exported
    changed = _changed(module, lambda m: m.embed.weight.mul_(1.5))
    loc = localize_divergence(path, changed, _feeds(path), ToleranceTable())
    assert loc.error is None and loc.op_type == "Gather", loc
    assert loc.compared == 1 and loc.candidates >= 4  # the first value compared is the one that diverges
    assert "embedding" in (loc.fx_node or "")


def test_a_changed_last_layer_is_found_after_every_earlier_value_matched(exported) -> None:
    module, path = exported
    changed = _changed(module, lambda m: m.out.bias.add_(0.5))
    loc = localize_divergence(path, changed, _feeds(path), ToleranceTable())
    assert loc.node is not None and loc.compared >= 4 and loc.op_type in ("Gemm", "Add", "MatMul"), loc
    unchanged = localize_divergence(path, module, _feeds(path), ToleranceTable())
    assert unchanged.node is None and unchanged.compared == unchanged.candidates >= 4
    assert np.isfinite(loc.max_abs) and loc.max_abs == pytest.approx(0.5, rel=1e-3)
