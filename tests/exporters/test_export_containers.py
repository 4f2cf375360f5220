"""List and dict inputs with a dynamic batch: dynamic_shapes follow the inputs' pytree structure."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
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
    assert [o.name for o in model.graph.output] == ["mixed", "scaled"]  # named after the dict's keys
    assert not result.parity.warnings


class _Out(torch.nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def forward(self, x: torch.Tensor):
        if self.kind == "tuple":
            return x, x * 2
        if self.kind == "nested":
            return {"boxes": [x, x + 1], "scores": x.sum(-1)}
        return x * 3


def test_output_names_follow_dict_keys_and_leave_tensors_and_tuples_alone():
    from portable.exporters.translate import output_names

    def names(kind: str):
        return output_names(torch.export.export(_Out(kind), (torch.randn(2, 4),), strict=False))

    assert names("nested") == ["boxes_0", "boxes_1", "scores"]
    assert names("tuple") is None and names("tensor") is None


def test_an_image_list_names_the_nested_input_and_exports_with_a_static_batch(tmp_path):
    from portable.exporters import ExportFailed

    spec = f"{FIXTURES / 'image_list'}.py:build"
    with pytest.raises(ExportFailed) as failed:
        export_spec(spec, tmp_path / "dyn.onnx")
    [finding] = failed.value.report.findings
    assert finding.rule_id == "PORT103" and "'images_0'" in finding.message and "--batch N" in finding.hint
    result = export_spec(spec, tmp_path / "b1.onnx", batch=1)  # the list is traced as given: 3 channels kept
    assert result.report.ok and result.parity.ok and result.parity.batches == (1,)
