"""The second round (``StaticSimplifyPass``): what is a no-op or a chain once shapes are static goes, the
numbers stay bit for bit, and a Reshape that carries the batch stays."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from portable.exporters.passes import FoldPass, StaticSimplifyPass

INT_MAX = 9223372036854775807
HEADER = '<ir_version: 8, opset_import: ["" : 18]>'


def _simplified(text: str, **initializers: np.ndarray) -> tuple[ir.Model, ir.Model]:
    """The model before and after the second round."""
    proto = onnx.parser.parse_model(f"{HEADER}\n{text}")
    proto.graph.initializer.extend(onnx.numpy_helper.from_array(a, name) for name, a in initializers.items())
    before, after = ir.from_proto(proto), ir.from_proto(proto)
    StaticSimplifyPass()(after)
    return before, after


def _ops(model: ir.Model) -> list[str]:
    return [n.op_type for n in model.graph]


def _run(model: ir.Model, batch: int) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the graph as written
    session = ort.InferenceSession(ir.to_proto(model).SerializeToString(), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(batch)
    feeds = {}
    for value in session.get_inputs():
        shape = [d if isinstance(d, int) else batch for d in value.shape]
        if value.type == "tensor(float)":
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            feeds[value.name] = rng.integers(-5, 5, shape).astype(np.int64)
    return session.run(None, feeds)


def _assert_exact(before: ir.Model, after: ir.Model, batches: tuple[int, ...] = (1, 3)) -> None:
    for batch in batches:
        for want, got in zip(_run(before, batch), _run(after, batch)):
            assert want.shape == got.shape and np.array_equal(want, got, equal_nan=True)


@pytest.mark.parametrize("dim,target,out,kept,batches", [
    ("batch", "0, 4, -1", "batch, 4, 8", False, (1, 3)),  # copies the batch, infers the rest
    ("batch", "-1, 4, 8", "batch, 4, 8", False, (1, 3)),  # infers the batch
    ("batch", "1, 4, 8", "1, 4, 8", True, (1,)),  # the batch written as the number 1: not a no-op at batch 3
    ("1", "1, 4, 8", "1, 4, 8", False, (1,)),  # ... but it is when the batch is fixed to 1
    ("batch", "-1, 32", "batch, 32", True, (1, 3)),  # a real reshape
])
def test_a_reshape_that_keeps_its_input_shape_goes_a_batch_carrying_one_stays(dim, target, out, kept, batches):
    before, after = _simplified(f"""g (float[{dim}, 4, 8] x) => (float[{out}] y) {{
      shape = Constant <value = int64[{len(target.split(','))}] {{{target}}}> ()
      r = Reshape(x, shape)
      y = Relu(r)
    }}""")
    assert ("Reshape" in _ops(after)) is kept
    _assert_exact(before, after, batches)


@pytest.mark.parametrize("dims,first,second,out,axes", [
    ("batch", "1, 2", "3", "batch, 1, 1, 1", [1, 2, 3]),  # transformers' attention mask
    ("batch, 4", "-1", "0", "1, batch, 4, 1", [0, 3]),  # a negative axis, then one before it
    ("batch, 4", "1", "1", "batch, 1, 1, 4", [1, 2]),  # the second goes before the first's
])
def test_an_unsqueeze_of_an_unsqueeze_is_one_unsqueeze(dims, first, second, out, axes):
    before, after = _simplified(f"""g (float[{dims}] x) => (float[{out}] y) {{
      a1 = Constant <value = int64[{len(first.split(','))}] {{{first}}}> ()
      u = Unsqueeze(x, a1)
      a2 = Constant <value = int64[1] {{{second}}}> ()
      y = Unsqueeze(u, a2)
    }}""")
    assert _ops(after) == ["Unsqueeze"]
    merged = ir.convenience.get_const_tensor(next(iter(after.graph)).inputs[1])
    assert merged is not None and merged.numpy().tolist() == axes
    _assert_exact(before, after)


@pytest.mark.parametrize("axis,out,want", [
    ("1", "batch, 1, 3, 4", ["Reshape"]),  # the copying 0 stays at its place
    ("0", "1, batch, 3, 4", ["Reshape", "Unsqueeze"]),  # the 0 would move and copy the wrong dim
])
def test_an_unsqueeze_after_a_reshape_joins_it_unless_a_copying_zero_moves(axis, out, want):
    before, after = _simplified(f"""g (float[batch, 12] x) => (float[{out}] y) {{
      shape = Constant <value = int64[3] {{0, 3, 4}}> ()
      r = Reshape(x, shape)
      a = Constant <value = int64[1] {{{axis}}}> ()
      y = Unsqueeze(r, a)
    }}""")
    assert _ops(after) == want
    _assert_exact(before, after)


def test_slices_of_a_slice_on_other_axes_are_single_slices_and_same_axis_chains_stay():
    """Swin's patch merging: rows 0::2 then columns 0::2 and 1::2; the row slice had two users."""
    before, after = _simplified(f"""g (float[batch, 4, 6, 3] x) => (float[batch, 2, 3, 3] y0, float[batch, 2, 3, 3] y1,
                                     float[batch, 1, 6, 3] z) {{
      zero = Constant <value = int64[1] {{0}}> ()
      one = Constant <value = int64[1] {{1}}> ()
      two = Constant <value = int64[1] {{2}}> ()
      three = Constant <value = int64[1] {{3}}> ()
      end = Constant <value = int64[1] {{{INT_MAX}}}> ()
      rows = Slice(x, zero, end, one, two)
      y0 = Slice(rows, zero, end, two, two)
      y1 = Slice(rows, one, end, two, two)
      head = Slice(x, zero, three, one, one)
      z = Slice(head, one, two, one, one)
    }}""")
    assert _ops(after) == ["Slice"] * 4  # from 5: the shared row slice went, the same-axis pair stayed
    _assert_exact(before, after)


def test_mul_by_ones_and_add_of_exact_zeros_go_near_ones_and_broadcasting_ones_stay():
    ones = np.ones(4, np.float32)
    before, after = _simplified("""g (float[batch, 3, 4] x, float[batch, 1, 4] w, int64[batch, 4] i)
        => (float[batch, 3, 4] a, float[batch, 3, 4] b, float[batch, 3, 4] c, float[batch, 3, 4] d,
            int64[batch, 4] e, float[batch, 3, 4] f, float[batch, 3, 4] g) {
      a0 = Mul(x, ones)
      a = Neg(a0)
      b0 = Mul(ones, x)
      b = Neg(b0)
      c0 = Mul(x, near)
      c = Neg(c0)
      d0 = Mul(w, grid)
      d = Neg(d0)
      e0 = Add(i, izeros)
      e = Neg(e0)
      f0 = Add(x, pzeros)
      f = Neg(f0)
      g0 = Add(x, nzeros)
      g = Neg(g0)
    }""", ones=ones, near=np.array([1, 1, 1, 1.000001], np.float32), grid=np.ones((3, 4), np.float32),
        izeros=np.zeros((1, 1), np.int64), pzeros=np.zeros(4, np.float32), nzeros=np.full(4, -0.0, np.float32))
    kept = sorted(n.inputs[1].name for n in after.graph if n.op_type in ("Mul", "Add"))
    # near ones (onnxscript's scalar rule takes 1.000001 for 1), ones that broadcast w, +0.0 (-0.0 + 0.0 is +0.0)
    assert kept == ["grid", "near", "pzeros"]
    _assert_exact(before, after)


def test_gather_elements_of_constants_folds_where_onnxscripts_folder_fails():
    """BERT-style position ids: a [1, 512] buffer gathered at [1, 64] positions (past np.choose's 32 choices)."""
    text = """g (int64[batch, 64] ids) => (int64[batch, 64] y) {
      pos = GatherElements <axis = 1> (buffer, index)
      y = Add(ids, pos)
    }"""
    arrays = {"buffer": np.arange(512, dtype=np.int64)[None] * 3, "index": np.arange(64, dtype=np.int64)[None]}
    folded_once = ir.from_proto(onnx.parser.parse_model(f"{HEADER}\n{text}"))
    for name, array in arrays.items():
        folded_once.graph.register_initializer(ir.Value(name=name, const_value=ir.tensor(array, name=name)))
    FoldPass()(folded_once)
    assert "GatherElements" in _ops(folded_once)  # onnx's reference GatherElements fails on it
    before, after = _simplified(text, **arrays)
    assert _ops(after) == ["Add"]
    _assert_exact(before, after)


@pytest.mark.parametrize("middle,kept", [
    ("t = Tanh(r)\n half = Constant <value = float {0.5}> ()\n m = Mul(t, half)\n s = Add(m, r)", False),
    ("t = Tanh(r)\n m = Softmax <axis = -1> (t)\n s = Add(m, r)", True),  # Softmax's rows depend on the shape
])
def test_a_reshape_pair_around_elementwise_work_goes(middle, kept):
    """GPT-2's MLP: Gemm in 2-D, GELU in 3-D, Gemm in 2-D again."""
    before, after = _simplified(f"""g (float[batch, 2, 16] x) => (float[batch, 2, 16] y)
        <float[rows, 16] r, float[rows, 16] t, float[rows, 16] m, float[rows, 16] s,
         float[batch, 2, 16] back> {{
      flat = Constant <value = int64[2] {{-1, 16}}> ()
      r = Reshape(x, flat)
      {middle}
      shape = Constant <value = int64[3] {{-1, 2, 16}}> ()
      back = Reshape(s, shape)
      y = Relu(back)
    }}""")
    assert ("Reshape" in _ops(after)) is kept
    _assert_exact(before, after)


def test_export_drops_a_view_to_the_same_shape_and_keeps_the_batch_reshape(tmp_path):
    import torch
    from torch import nn

    import portable

    class Embed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = nn.Embedding(50, 8)
            self.head = nn.Linear(32, 4)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            rows = self.table(ids.view(-1, ids.shape[-1]))  # GPT-2's view: [batch, 4] again, at every batch
            return self.head(rows.reshape(rows.shape[0], -1))  # [batch, 4, 8] -> [batch, 32]: carries the batch

    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 4))
    result = portable.export(Embed(), (ids,), tmp_path / "embed.onnx", batch="dynamic")
    model = onnx.load(str(result.path))
    assert [n.op_type for n in model.graph.node].count("Reshape") == 1  # and verify passed at batch 1 and 3
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


@pytest.mark.parametrize("eps", [1e-12, 1e-6])
def test_export_keeps_a_tiny_epsilon_that_guards_a_division(tmp_path, eps):
    """A hand-written norm: ``x / sqrt(mean(x²) + eps)``. onnxscript's own no-op rule takes ``+ 1e-12`` for
    ``+ 0`` (its constants match within abs_tol 1e-8) and drops it, and a zero row then gives NaN. The
    exporter's exact rule keeps it: the Add is in the file and ONNX Runtime's output is finite."""
    import onnxruntime as ort
    import torch
    from torch import nn

    import portable

    class Norm(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)

    x = torch.randn(2, 16)
    result = portable.export(Norm(), (x,), tmp_path / "norm.onnx")
    model = onnx.load(str(result.path))
    assert "Add" in [n.op_type for n in model.graph.node]
    session = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    rows = np.zeros((3, 16), np.float32)
    rows[1] = np.arange(16)
    out = session.run(None, {session.get_inputs()[0].name: rows})[0]
    assert np.isfinite(out).all() and (out[0] == 0).all() and np.allclose(out[1], Norm()(torch.from_numpy(rows[1:2]))[0])


def test_sub_of_positive_zeros_and_div_by_exact_ones_go_and_the_rest_stays():
    before, after = _simplified("""g (float[batch, 4] x) => (float[batch, 4] a, float[batch, 4] b, float[batch, 4] c,
                                                        float[batch, 4] d) {
      a0 = Sub(x, pzeros)
      a = Neg(a0)
      b0 = Sub(x, nzeros)
      b = Neg(b0)
      c0 = Div(x, ones)
      c = Neg(c0)
      d0 = Div(x, near)
      d = Neg(d0)
    }""", pzeros=np.zeros(4, np.float32), nzeros=np.full(4, -0.0, np.float32), ones=np.ones(4, np.float32),
        near=np.array([1, 1, 1, 1.000001], np.float32))
    kept = sorted(n.inputs[1].name for n in after.graph if n.op_type in ("Sub", "Div"))
    assert kept == ["near", "nzeros"]  # x - -0.0 turns -0.0 into +0.0; 1.000001 is not 1
    _assert_exact(before, after)
