"""The good fixture models export clean, static where asked, with relative provenance."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest

import portable.validators as validators
from portable.policy import Policy

GOOD = ["cnn_export", "transformer_export"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", GOOD)
def test_good_model_exports_clean_and_passes_parity(name, request):
    result = request.getfixturevalue(name)
    assert result.path.is_file()
    assert result.report.ok and result.report.counts["error"] == result.report.counts["warning"] == 0
    assert result.parity is not None and result.parity.ok and result.parity.batches == (1, 3)
    assert result.parity.max_abs_diff < 1e-4
    # the file re-validates clean from disk, with the same findings
    again = validators.validate(str(result.path), Policy())
    assert again.ok and [f.rule_id for f in again.findings] == [f.rule_id for f in result.report.findings]


@pytest.mark.parametrize("name", GOOD)
def test_dynamic_batch_is_one_symbol_on_every_input_and_output(name, request):
    proto = onnx.load(str(request.getfixturevalue(name).path))
    for value in (*proto.graph.input, *proto.graph.output):
        dims = value.type.tensor_type.shape.dim
        assert dims[0].dim_param == "batch"
        assert all(d.HasField("dim_value") for d in dims[1:])


@pytest.mark.parametrize("name", GOOD)
def test_value_info_is_static_or_an_expression_of_batch(name, request):
    proto = onnx.load(str(request.getfixturevalue(name).path))
    assert len(proto.graph.value_info) >= len(proto.graph.node) - len(proto.graph.output)
    for value in proto.graph.value_info:
        for dim in value.type.tensor_type.shape.dim:
            assert dim.HasField("dim_value") or "batch" in dim.dim_param, (value.name, dim)


def test_only_the_batch_expand_remains_as_a_runtime_shape(transformer_export, cnn_export):
    shape_findings = [f for f in transformer_export.report.findings if f.rule_id == "PORT007"]
    assert [(f.severity.value, f.location.op_type) for f in shape_findings] == [("info", "Expand")]
    assert not [f for f in cnn_export.report.findings if f.rule_id == "PORT007"]


def test_static_batch_leaves_no_shape_computation(transformer_static):
    proto = onnx.load(str(transformer_static.path))
    assert [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim] == [4, 3, 16, 16]
    assert not any(n.op_type == "Shape" for n in proto.graph.node)
    report = validators.validate(str(transformer_static.path), Policy(batch="static"))
    assert report.ok and not report.findings
    assert transformer_static.parity.batches == (4,)


def _traces(proto: onnx.ModelProto) -> list[str]:
    return [p.value for n in proto.graph.node for p in n.metadata_props if p.key == "pkg.torch.onnx.stack_trace"]


@pytest.mark.parametrize("name", GOOD)
def test_provenance_is_relative_to_the_project(name, request):
    result = request.getfixturevalue(name)
    data = result.path.read_bytes()
    assert str(ROOT).encode() not in data and sys.prefix.encode() not in data
    proto = onnx.load(str(result.path))
    traces = _traces(proto)
    assert len(traces) >= len(proto.graph.node) // 2
    files = {f for t in traces for f in re.findall(r'File "([^"]+)"', t)}
    assert f"fixtures/models/{name.split('_')[0]}.py" in files
    assert not [f for f in files if f.startswith("/")]


def test_torch_records_absolute_paths_that_the_pass_removes(translated_transformer):
    from portable.exporters.passes import RelativeSourcesPass

    model, _, root = translated_transformer
    proto = ir.to_proto(model)
    assert any(str(ROOT) in t for t in _traces(proto))  # what torch writes
    clone = model.clone()
    RelativeSourcesPass(root)(clone)
    assert not any(str(ROOT) in t for t in _traces(ir.to_proto(clone)))


def test_findings_point_at_the_users_source_line(transformer_export):
    (finding,) = [f for f in transformer_export.report.findings if f.rule_id == "PORT007"]
    assert finding.location.source.file == "fixtures/models/transformer.py"
    source = (ROOT / finding.location.source.file).read_text().splitlines()[finding.location.source.line - 1]
    assert "self.cls.expand" in source


@pytest.mark.parametrize("name", GOOD)
def test_metadata_and_manifest_carry_the_fingerprint(name, request):
    result = request.getfixturevalue(name)
    proto = onnx.load(str(result.path))
    props = {p.key: p.value for p in proto.metadata_props}
    assert props["portable.fingerprint"] == result.fingerprint
    # hashed while validation ran and appended to the written bytes: once, last, and what the file holds
    from portable.exporters.fingerprint import fingerprint

    assert [p.key for p in proto.metadata_props][-1] == "portable.fingerprint" and len(props) == len(proto.metadata_props)
    assert fingerprint(proto) == result.fingerprint == result.report.model["fingerprint"]
    assert result.report.model["size_bytes"] == result.path.stat().st_size
    assert json.loads(props["portable.policy"])["opset"] == 18
    manifest = json.loads(result.manifest_path.read_text())
    assert manifest["fingerprint"] == result.fingerprint and manifest["precision"] == "fp32"
    assert set(manifest["versions"]) >= {"torch", "onnx", "onnxscript", "onnxruntime"}
    assert manifest["inputs"][0]["shape"][0] == "batch" and manifest["validation"]["ok"]
    assert set(manifest["timings"]) >= {"load", "torch.export", "translate", "optimize", "validate", "verify", "write"}
    assert {o.domain or "ai.onnx": o.version for o in proto.opset_import}["ai.onnx"] == 18


def test_the_objects_alive_before_an_export_are_frozen_for_it_and_only_then(tmp_path, monkeypatch):
    """The collector's full passes skip the caller's objects during an export (gc.freeze) and see them
    again after it; a caller's own freeze is left as it was."""
    import gc

    import portable.exporters.pipeline as pipeline
    from portable.exporters.spec_export import export_spec

    inside: list[int] = []
    real = pipeline._run

    def spy(*args, **kwargs):
        inside.append(gc.get_freeze_count())
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_run", spy)
    spec = "fixtures/models/cnn.py:build"
    assert gc.get_freeze_count() == 0
    export_spec(spec, tmp_path / "a.onnx", verify=False)
    assert inside[0] > 1000 and gc.get_freeze_count() == 0  # frozen during, not after
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        export_spec(spec, tmp_path / "b.onnx", verify=False)
        # the caller's freeze is still there after (an unfreeze of ours would have emptied it)
        assert 0.9 * frozen < gc.get_freeze_count() <= frozen and inside[1] <= frozen
    finally:
        gc.unfreeze()
