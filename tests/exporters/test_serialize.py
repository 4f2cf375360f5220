"""The export's bytes without copying its weights: the same bytes as protobuf's own serialization."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch

from portable.exporters.serialize import payload_view, serialize
from portable.validators.lean import LEAN_MIN_ELEMENTS
from portable.validators.wire import splice_payloads


def _torch(tensor: torch.Tensor) -> ir.TensorProtocol:
    from torch.onnx._internal.exporter._core import TorchTensor

    return TorchTensor(tensor)


def _kinds() -> dict[str, tuple[ir.TensorProtocol, bool]]:
    """name -> (tensor, whether its bytes can be had without a copy)."""
    import ml_dtypes

    grid = np.arange(12_000, dtype=np.float32).reshape(120, 100)  # above LEAN_MIN_ELEMENTS
    return {
        "numpy float32": (ir.Tensor(grid), True),
        "numpy transposed": (ir.Tensor(grid.T), False),  # the folded Transpose of a weight: strided
        "numpy bfloat16": (ir.Tensor(grid.astype(ml_dtypes.bfloat16)), True),
        "numpy bool": (ir.Tensor(grid > 5000), True),
        "numpy int4": (ir.Tensor(grid.astype(np.int8) % 7, dtype=ir.DataType.INT4), False),  # packed by onnx-ir
        "numpy int64": (ir.Tensor(grid.astype(np.int64)), True),
        "torch float32": (_torch(torch.randn(120, 100)), True),
        "torch parameter": (_torch(torch.nn.Parameter(torch.randn(120, 100))), True),
        "torch transposed": (_torch(torch.randn(120, 100).T), False),
        "torch bfloat16": (_torch(torch.randn(12_000).bfloat16()), True),
        "torch float8": (_torch(torch.randn(12_000).to(torch.float8_e4m3fn)), True),
    }


@pytest.mark.parametrize("name", sorted(_kinds()))
def test_payload_view_is_tobytes_without_a_copy_where_it_can(name):
    tensor, zero_copy = _kinds()[name]
    view = payload_view(tensor)
    assert (view.format, view.ndim) == ("B", 1)
    assert bytes(view) == tensor.tobytes()
    assert _shares(view, tensor.raw) is zero_copy


def _shares(view: memoryview, raw: np.ndarray | torch.Tensor) -> bool:
    seen = np.frombuffer(view, np.uint8)
    if isinstance(raw, torch.Tensor):
        return seen.ctypes.data == raw.data_ptr()
    return bool(np.shares_memory(seen, raw))


def _model() -> ir.Model:
    """Every kind above as an initializer, beside ones the file keeps whole (small, strings)."""
    small = ir.Tensor(np.arange(LEAN_MIN_ELEMENTS, dtype=np.float32))
    tensors = {**{name.replace(" ", "_"): t for name, (t, _) in _kinds().items()}, "small": small,
               "words": ir.StringTensor(np.array([b"a", b"b"] * LEAN_MIN_ELEMENTS, dtype=object))}
    graph = ir.Graph([], [], nodes=[], name="g", opset_imports={"": 18})
    for name, tensor in tensors.items():
        value = ir.Value(name=name, type=ir.TensorType(tensor.dtype), shape=tensor.shape, const_value=tensor)
        graph.register_initializer(value)
        graph.outputs.append(value)
    graph.initializers["numpy_float32"].const_value.doc_string = "kept"  # type: ignore[union-attr]
    graph.initializers["torch_float32"].const_value.metadata_props["k"] = "v"  # type: ignore[union-attr]
    return ir.Model(graph, ir_version=10)


def _stamp(proto: onnx.ModelProto) -> None:
    proto.metadata_props.add(key="portable.test", value="1")


@pytest.fixture(scope="module")
def exported() -> ir.Model:
    """A model as the export pipeline serializes it: torch's translation, then portable's passes."""
    from portable.exporters.job import capture_or_fail, make_job
    from portable.exporters.passes import portable_passes
    from portable.exporters.pipeline import translate

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8)).eval()
    job = make_job(module, (torch.randn(2, 256),), "unused.onnx", "dynamic", "fp32", None, None, None, None)
    captured = capture_or_fail(job)
    model = translate(captured.program, job)
    portable_passes(captured.batch_symbol, job.root)(model)
    return model


@pytest.mark.parametrize("which", ["built", "exported"])
def test_the_pieces_are_protobufs_own_serialization(which, request):
    model = _model() if which == "built" else request.getfixturevalue("exported")
    before = {name: v.const_value for name, v in model.graph.initializers.items()}
    expected = ir.to_proto(model)
    _stamp(expected)
    held = serialize(model, _stamp)
    assert held.tobytes() == expected.SerializeToString(deterministic=True)
    assert held.size == expected.ByteSize()
    large = {i for i, t in enumerate(expected.graph.initializer)
             if t.HasField("raw_data") and np.prod(t.dims) > LEAN_MIN_ELEMENTS}
    assert set(held.payloads) == large and len(large) >= (10 if which == "built" else 1)
    for index, tensor in enumerate(held.proto.graph.initializer):  # the proto is the file's lean parse
        assert tensor.HasField("raw_data") is (index not in large and expected.graph.initializer[index].HasField("raw_data"))
        assert bytes(held.payloads.get(index, b"")) == (expected.graph.initializer[index].raw_data if index in large else b"")
    assert {name: v.const_value for name, v in model.graph.initializers.items()} == before  # restored


def test_the_model_is_restored_when_serialization_fails(monkeypatch):
    model = _model()
    before = {name: v.const_value for name, v in model.graph.initializers.items()}

    def broken(_: ir.Model) -> onnx.ModelProto:
        raise ValueError("no")
    monkeypatch.setattr(ir, "to_proto", broken)
    with pytest.raises(ValueError, match="no"):
        serialize(model)
    assert all(model.graph.initializers[name].const_value is t for name, t in before.items())


def test_splicing_refuses_what_it_cannot_place():
    tensor = onnx.numpy_helper.from_array(np.ones(200, np.float32), "w")
    graph = onnx.helper.make_graph([], "g", [], [], [tensor])
    data = onnx.helper.make_model(graph).SerializeToString()
    with pytest.raises(ValueError, match="already has raw_data"):
        splice_payloads(data, {0: memoryview(b"x")})
    with pytest.raises(ValueError, match=r"no initializer at index\(es\) \[1\]"):
        splice_payloads(data, {1: memoryview(b"x")})


def test_a_weight_read_from_a_file_keeps_its_metadata_once(tmp_path):
    """onnx-ir 1.1 writes a TensorProtoTensor's metadata_props twice; ``portable fix`` of its own
    output then doubled them again."""
    import portable

    weight = onnx.numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    weight.metadata_props.add(key="k", value="v")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])], [weight])
    source = tmp_path / "m.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)], ir_version=10), source)
    model = ir.from_proto(onnx.load(source))
    # the library duplicates them; once this fails, onnx-ir is fixed and serialize._metadata_once can go
    assert len(ir.to_proto(model).graph.initializer[0].metadata_props) == 2
    assert serialize(model).proto.graph.initializer[0].metadata_props == weight.metadata_props
    once, twice = tmp_path / "once.onnx", tmp_path / "twice.onnx"
    portable.fix(source, once)
    portable.fix(once, twice)
    assert onnx.load(twice).graph.initializer[0].metadata_props == weight.metadata_props
