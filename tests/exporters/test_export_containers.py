"""List and dict inputs with a dynamic batch: dynamic_shapes follow the inputs' pytree structure."""

from __future__ import annotations

from pathlib import Path

import onnx
import torch

from portable.exporters.capture import BATCH, dynamic_shapes
from portable.exporters.spec_export import export_spec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "models"


def test_dynamic_shapes_follow_lists_dicts_and_nesting():
    t, scalar = torch.zeros(2, 3), torch.tensor(1.0)
    shapes = dynamic_shapes(([t, (t, scalar)], {"a": t, "b": None}, t, 3), "dynamic")
    dim = shapes[2][0]
    assert str(dim) == BATCH or getattr(dim, "__name__", None) == BATCH
    assert shapes == ([{0: dim}, ({0: dim}, None)], {"a": {0: dim}, "b": None}, {0: dim}, None)
    assert dynamic_shapes(([t],), 4) is None


def test_list_and_dict_inputs_export_with_one_batch_symbol_and_pass_parity(tmp_path):
    result = export_spec(f"{FIXTURES / 'containers'}.py:build", tmp_path / "c.onnx")
    assert result.report.ok and result.parity.ok and result.parity.batches == (1, 3)
    model = onnx.load(str(result.path))
    inputs = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert inputs == {"xs_0": ["batch", 8], "xs_1": ["batch", 8], "extra_mask": ["batch", 1],
                      "extra_scale": ["batch", 8]}
    assert len(model.graph.output) == 2 and not result.parity.warnings
