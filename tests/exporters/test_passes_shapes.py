"""The exporter's shape passes share one analysis with the validators, run it once, and keep batch-only masks."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
from support import rule_fixtures

import portable.validators as validators
from portable.exporters import probe as probe_module
from portable.exporters.passes import BATCH, portable_passes
from portable.policy import Policy


def _mask_pool():
    """An arange-over-batch mask (transformers 5) and a permute + global average pool (ConvNeXt, Swin)."""
    import torch
    from torch import nn

    class MaskPool(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.norm = nn.LayerNorm(8)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.head = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.norm(self.conv(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            feats = self.pool(y).flatten(1)
            rows = torch.arange(x.shape[0])
            mask = (rows[:, None] == rows[None, :]).to(feats.dtype)
            return self.head(mask @ feats + feats)

    torch.manual_seed(0)
    return MaskPool(), (torch.randn(2, 3, 6, 6),)


@pytest.fixture(scope="module")
def mask_pool_export(tmp_path_factory):
    import portable

    module, args = _mask_pool()
    return portable.export(module, args, tmp_path_factory.mktemp("shapes") / "mask_pool.onnx", batch="dynamic")


def test_batch_mask_and_permuted_pool_export_with_a_dynamic_batch(mask_pool_export):
    result = mask_pool_export
    assert result.report.ok and result.report.exit_code == 0
    assert {(f.rule_id, f.severity.value) for f in result.report.findings} == {("PORT007", "info")}
    assert result.parity is not None and result.parity.ok and result.parity.batches == (1, 3)
    assert result.parity.max_abs_diff < 1e-4
    proto = onnx.load(str(result.path))
    assert not any(n.op_type == "Identity" for n in proto.graph.node)
    again = validators.validate(str(result.path), Policy())
    assert again.ok and {f.severity.value for f in again.findings} == {"info"}


def test_the_probe_runs_once_per_export(translated_transformer, monkeypatch):
    calls = []
    real = probe_module.probes
    monkeypatch.setattr(probe_module, "probes", lambda model, symbol: calls.append(symbol) or real(model, symbol))
    model, symbol, root = translated_transformer
    portable_passes(symbol, root)(model.clone())
    assert calls == [BATCH]


@pytest.mark.parametrize("rule,kind", [("PORT009", "range_mask"), ("PORT009", "permute_pool"),
                                       ("PORT007", "resize_chain")])
def test_passes_write_batch_expressions_and_leave_batch_only_work(rule, kind, tmp_path):
    model = ir.from_proto(rule_fixtures.load(rule, kind))
    portable_passes(BATCH, tmp_path)(model)
    proto = ir.to_proto(model)
    report = validators.validate_proto(proto, "t.onnx", Policy())
    assert report.ok and {f.severity.value for f in report.findings} <= {"info"}
    shapes = {str(d) for n in model.graph for v in n.outputs if v.shape for d in v.shape}
    assert "batch" in shapes and not any(s.startswith("unk") for s in shapes)
    assert all(v.shape is not None for n in model.graph for v in n.outputs)


def _optimized(text: str, **weights) -> list[str]:
    import numpy as np

    from portable.exporters.passes import OptimizePass

    proto = onnx.parser.parse_model(text)
    for name, array in weights.items():
        proto.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(array), name))
    model = ir.from_proto(proto)
    OptimizePass()(model)
    return [n.op_type for n in model.graph]


def test_constant_only_nodes_fold_whatever_their_input_size():
    """An embedding row gathered with constant positions is a weight; the folder's default skips inputs > 8192."""
    import numpy as np

    ops = _optimized("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 4, 40] x) => (float[batch, 4, 40] y) {
      pos = Constant <value = int64[4] {0, 1, 2, 3}> ()
      rows = Gather <axis = 0> (table, pos)
      y = Add(x, rows)
    }""", table=np.arange(300 * 40, dtype=np.float32).reshape(300, 40))
    assert ops == ["Add"]


def test_mask_built_on_constant_of_shape_folds_but_quantized_weights_stay():
    """Like Swin's shifted-window mask: ScatterND on zeros with updates computed from the same zeros."""
    import numpy as np

    ops = _optimized("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 4, 4] x, float[batch, 8] v) => (float[batch, 4, 4] y, float[batch, 8] z) {
      size = Constant <value = int64[2] {4, 4}> ()
      zeros = ConstantOfShape <value = float[1] {0}> (size)
      where = Constant <value = int64[2, 2] {0, 1, 2, 3}> ()
      flat = Constant <value = int64[1] {16}> ()
      line = Reshape(zeros, flat)
      first = Constant <value = int64[1] {0}> ()
      two = Constant <value = int64[1] {2}> ()
      part = Slice(line, first, two)
      one = Constant <value = float {1}> ()
      ones = Add(part, one)
      mask = ScatterND(zeros, where, ones)
      y = Add(x, mask)
      scale = Constant <value = float {0.5}> ()
      w = DequantizeLinear(q, scale)
      z = Add(v, w)
    }""", q=np.ones(8, dtype=np.int8))
    assert sorted(ops) == ["Add", "Add", "DequantizeLinear"]


@pytest.mark.parametrize("seen,data,outs,want", [
    # [batch, 32] from [batch, 4, 8]: the batch dim copies dim 0 (a literal 1 at batch 1 would not)
    ([[1, 32], [2, 32], [3, 32]], [(1, 4, 8), (2, 4, 8), (3, 4, 8)], [(1, 32), (2, 32), (3, 32)], [0, 32]),
    # [4*batch, 8]: grows with the batch but copies nothing
    ([[4, 8], [8, 8], [12, 8]], [(1, 4, 8), (2, 4, 8), (3, 4, 8)], [(4, 8), (8, 8), (12, 8)], [-1, 8]),
    # [1, batch*32]: the leading 1 is a literal at every batch
    ([[1, 32], [1, 64], [1, 96]], [(1, 4, 8), (2, 4, 8), (3, 4, 8)], [(1, 32), (1, 64), (1, 96)], [1, -1]),
    # two dims vary and neither copies: no single constant shape
    ([[1, 32], [2, 64], [3, 96]], [(1, 32), (4, 32), (9, 32)], [(1, 32), (2, 64), (3, 96)], None),
])
def test_batch_reshape_at_three_batches(seen, data, outs, want):
    import numpy as np

    from portable.exporters.passes import _batch_reshape

    got = _batch_reshape([np.array(s) for s in seen], data, outs, allowzero=False)
    assert (None if got is None else got.tolist()) == want


def test_zero_pads_are_removed_and_real_ones_kept():
    from portable.exporters.passes import NoOpPadPass

    model = ir.from_proto(onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, 4, 4] x) => (float[batch, 4, 6] y) {
      none = Constant <value = int64[6] {0, 0, 0, 0, 0, 0}> ()
      same = Pad(x, none)
      act = Relu(same)
      some = Constant <value = int64[6] {0, 0, 1, 0, 0, 1}> ()
      y = Pad(act, some)
    }"""))
    NoOpPadPass()(model)
    assert [n.op_type for n in model.graph] == ["Constant", "Relu", "Constant", "Pad"]
    assert next(n for n in model.graph if n.op_type == "Relu").inputs[0].name == "x"
