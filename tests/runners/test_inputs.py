"""Per-input integer ranges: each integer input drawn from its example's own range, or given by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from portable.errors import UsageError
from portable.runners.inputs import (
    InputSpec,
    int_ranges_from_examples,
    make_feeds,
    parse_int_ranges,
    tensor_leaves,
)

SPECS = [InputSpec("ids", "int64", ("batch", 6)), InputSpec("mask", "int64", ("batch", 6)),
         InputSpec("x", "float32", ("batch", 3)), InputSpec("flags", "bool", ("batch", 2))]
EXAMPLES = (torch.randint(5, 50, (2, 6)), torch.ones(2, 6, dtype=torch.int64), torch.randn(2, 3),
            torch.zeros(2, 2, dtype=torch.bool))


def test_each_integer_input_keeps_its_examples_range() -> None:
    ranges = int_ranges_from_examples(SPECS, EXAMPLES)
    assert ranges == {"ids": (int(EXAMPLES[0].min()), int(EXAMPLES[0].max()) + 1), "mask": (1, 2)}
    feeds = make_feeds(SPECS, 4, seed=0, int_ranges=ranges)
    assert (feeds["mask"] == 1).all()  # an all-ones attention mask stays a mask
    assert feeds["ids"].min() >= ranges["ids"][0] and feeds["ids"].max() < ranges["ids"][1]
    assert len(np.unique(feeds["ids"])) > 1


def test_one_shared_range_would_break_the_mask() -> None:
    """What compare did before: every integer input from one range; the mask is no longer all ones."""
    feeds = make_feeds(SPECS, 4, seed=0, int_range=(1, 50))
    assert not (feeds["mask"] == 1).all()


def test_examples_in_lists_and_dicts_map_to_graph_inputs_in_order() -> None:
    a, b, c = torch.zeros(1), torch.ones(2), torch.full((3,), 7)
    assert [t.shape[0] for t in tensor_leaves(([a, b], {"c": c}, 3))] == [1, 2, 3]
    specs = [InputSpec(n, "int64", (1,)) for n in ("xs_0", "xs_1", "extra_c")]
    assert int_ranges_from_examples(specs, ([a.long(), b.long()], {"c": c})) == {
        "xs_0": (0, 1), "xs_1": (1, 2), "extra_c": (7, 8)}


def test_parse_int_ranges_per_input_and_shared() -> None:
    assert parse_int_ranges(["attention_mask=0:2", "5:100", "ids=0:30522"]) == (
        (5, 100), {"attention_mask": (0, 2), "ids": (0, 30522)})
    assert parse_int_ranges([]) == (None, {})
    for bad in ("=0:2", "mask=3:3", "mask=a:b", "mask"):
        with pytest.raises(UsageError, match="--int-range"):
            parse_int_ranges([bad])


def test_compare_draws_each_integer_input_from_its_own_example_and_given_ranges_win() -> None:
    """An all-ones attention mask stays all ones beside token ids in [0, 1000) (one range for both
    would feed the mask values in [0, 1000)); ``--int-range`` (for all, or NAME=) overrides."""
    from portable.runners.api import IntRanges

    specs = [InputSpec("ids", "int64", ("batch", 8)), InputSpec("mask", "int64", ("batch", 8))]
    ids = torch.randint(0, 1000, (2, 8), generator=torch.Generator().manual_seed(0))
    examples = (ids, torch.ones(2, 8, dtype=torch.int64))
    ranges = IntRanges.of(specs, examples, None, None)
    assert ranges.observed == {"ids": (int(ids.min()), int(ids.max()) + 1), "mask": (1, 2)} and not ranges.per_input
    feeds = make_feeds(specs, 3, seed=0, int_range=ranges.default, int_ranges=ranges.per_input,
                       observed=ranges.observed)
    assert (feeds["mask"] == 1).all() and feeds["ids"].max() > 100
    given = IntRanges.of(specs, examples, (0, 5), {"mask": (0, 2)})
    assert given.per_input == {"mask": (0, 2)} and not given.observed
    assert parse_int_ranges(["0:5", "mask=0:2"]) == ((0, 5), {"mask": (0, 2)})


# Every tensor type: seeded feeds in the declared dtype, and ONNX Runtime fed and read through OrtValues.

EXTENDED = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn",
            "int4", "uint4", "int2", "uint2", "bfloat16"]


def test_a_0d_bool_input_is_an_array() -> None:
    feeds = make_feeds([InputSpec("flag", "bool", ()), InputSpec("x", "float32", ())], 1, seed=0)
    assert all(isinstance(a, np.ndarray) and a.shape == () for a in feeds.values())
    assert feeds["flag"].dtype == np.bool_


def test_strings_are_seeded_words_of_letters_and_digits() -> None:
    spec = InputSpec("text", "string", ("batch", 5))
    first, again, other = (make_feeds([spec], 3, seed=s)["text"] for s in (0, 0, 1))
    assert first.dtype == object and first.shape == (3, 5)
    assert (first == again).all() and not (first == other).all()
    assert all(1 <= len(w) <= 8 and w.isalnum() for w in first.ravel())
    assert len(set(first.ravel())) > 10  # words, not one repeated value


@pytest.mark.parametrize("name", EXTENDED)
def test_types_numpy_lacks_come_in_their_ml_dtypes_type(name: str) -> None:
    from portable.runners.inputs import as_declared, numpy_dtype

    spec = InputSpec("x", name, ("batch", 64))
    feeds = as_declared([spec], make_feeds([spec], 2, seed=0, int_range=(-100, 100)))
    array = feeds["x"]
    assert array.dtype == numpy_dtype(name) and array.shape == (2, 64)
    values = array.astype(np.float32)
    assert np.isfinite(values).all() and len(np.unique(values)) > 1
    if name.startswith(("int", "uint")):  # the range is cut to what the type holds (int2: -2..1)
        import ml_dtypes

        info = ml_dtypes.iinfo(array.dtype)
        assert values.min() >= info.min and values.max() <= info.max


@pytest.mark.parametrize("name", ["bfloat16", "int4", "float8_e4m3fn", "float32", "int64"])
def test_device_values_hold_a_copy_of_any_type_and_come_back_whole(name: str) -> None:
    """``device_value``/``host_array`` carry the I/O-bound feeds of GPU runners (on the CPU device here;
    on CUDA in tests/runners/test_gpu.py): the element type is kept and the array is copied, not borrowed."""
    from portable.runners.inputs import as_declared, device_value, host_array, numpy_dtype

    spec = InputSpec("x", name, ("batch", 16))
    array = as_declared([spec], make_feeds([spec], 2, seed=0, int_range=(-7, 7)))["x"]
    value = device_value(array, "cpu")
    expected = array.astype(np.float32)
    array[...] = array[0, 0] if name == "int4" else 0  # the value must not see later writes to the array
    back = host_array(value)
    assert back.dtype == numpy_dtype(name) and back.shape == (2, 16)
    np.testing.assert_array_equal(back.astype(np.float32), expected)
    assert len(np.unique(expected)) > 1


def test_an_int_range_outside_the_type_is_cut_to_it() -> None:
    ints = make_feeds([InputSpec("u", "uint8", (1000,))], 1, seed=0, int_range=(-5, 3))["u"]
    assert ints.min() == 0 and ints.max() == 2  # before: -5..-1 wrapped round to 251..255


def test_graph_io_declares_strings_and_float8_only_when_every_type_is_asked(tmp_path) -> None:
    import onnx

    from portable.errors import InputError
    from portable.runners.inputs import graph_io

    path = tmp_path / "m.onnx"
    onnx.save(onnx.parser.parse_model("""<ir_version: 9, opset_import: ["" : 21]>
g (string[2] s, float8e5m2[2] f, int4[2] i) => (string[2] t) { t = Identity(s) }"""), path)
    inputs, outputs = graph_io(path, every_type=True)
    assert [s.dtype for s in inputs] == ["string", "float8_e5m2", "int4"] and outputs[0].dtype == "string"
    with pytest.raises(InputError, match="'s' has an unsupported element type 8"):
        graph_io(path)  # compare's runners feed PyTorch too: refused up front, as before


def test_a_sequence_input_is_named_as_such(tmp_path) -> None:
    import onnx

    from portable.errors import InputError
    from portable.runners.inputs import graph_io

    path = tmp_path / "m.onnx"
    onnx.save(onnx.parser.parse_model("""<ir_version: 9, opset_import: ["" : 18]>
g (seq(float[2]) s) => (seq(float[2]) t) { t = Identity(s) }"""), path)
    with pytest.raises(InputError, match="value 's' is a sequence, not a tensor"):
        graph_io(path, every_type=True)


def _identity(elem_type: int, opset: int, op: str = "Identity") -> bytes:
    from onnx import TensorProto, helper

    out_type = TensorProto.FLOAT if op == "Cast" else elem_type
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **({"to": out_type} if op == "Cast" else {}))],
                              "g", [helper.make_tensor_value_info("x", elem_type, [3, 5])],
                              [helper.make_tensor_value_info("y", out_type, [3, 5])])
    return _model(graph, opset)


def _model(graph, opset: int) -> bytes:  # type: ignore[no-untyped-def]
    """The model at the lowest IR version its opset needs: helper.make_model stamps the installed onnx's
    newest, which an older ONNX Runtime refuses (onnx 1.23: IR 14; onnxruntime-gpu 1.31 on the H200 reads up to 13)."""
    from onnx import helper

    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets,
                             ir_version=helper.find_min_ir_version_for(opsets)).SerializeToString()


# element type, opset, op: Identity where ONNX Runtime 1.32 has a kernel for the type, Cast to float otherwise
ORT_CASES = {"string": (8, 18, "Identity"), "float8_e4m3fn": (17, 21, "Identity"),
             "float8_e4m3fnuz": (18, 21, "Identity"), "float8_e5m2": (19, 21, "Identity"),
             "float8_e5m2fnuz": (20, 21, "Identity"), "bfloat16": (16, 21, "Identity"),
             "int4": (22, 21, "Cast"), "uint4": (21, 21, "Cast"), "int2": (26, 25, "Cast"), "uint2": (25, 25, "Cast"),
             "float8_e8m0fnu": (24, 24, "Cast"), "bool": (9, 18, "Identity")}


@pytest.mark.parametrize("name", sorted(ORT_CASES))
def test_onnx_runtime_takes_and_gives_every_type(name: str) -> None:
    import onnxruntime as ort

    from portable.runners.inputs import as_declared, run_onnxruntime

    elem_type, opset, op = ORT_CASES[name]
    session = ort.InferenceSession(_identity(elem_type, opset, op), providers=["CPUExecutionProvider"])
    spec = InputSpec("x", name, (3, 5))
    feeds = as_declared([spec], make_feeds([spec], 3, seed=0, int_range=(-8, 8)))
    (out,) = run_onnxruntime(session, feeds)
    if op == "Cast":  # 4- and 2-bit values packed right: each element comes back as itself
        assert out.dtype == np.float32 and np.array_equal(out, feeds["x"].astype(np.float32))
    else:  # the same bytes back, in the declared type (not float8e4m3fn as uint8)
        assert out.dtype == feeds["x"].dtype and np.array_equal(out, feeds["x"])


@pytest.mark.parametrize("name", ["int4", "uint2"])
def test_sub_byte_outputs_are_unpacked(name: str) -> None:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from portable.runners.inputs import numpy_dtype, run_onnxruntime

    elem_type, opset = ORT_CASES[name][:2]
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=elem_type)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
                              [helper.make_tensor_value_info("y", elem_type, [5])])
    model = _model(graph, opset)
    values = np.array([0, 1, -1, 1, 0] if name == "int4" else [0, 1, 2, 3, 1], dtype=np.float32)
    (out,) = run_onnxruntime(ort.InferenceSession(model, providers=["CPUExecutionProvider"]), {"x": values})
    assert out.dtype == numpy_dtype(name) and out.astype(np.float32).tolist() == values.tolist()


def test_npz_inputs_of_strings_and_float8_are_cast_to_the_declared_types(tmp_path) -> None:
    from portable.errors import InputError
    from portable.runners.inputs import load_npz, numpy_dtype

    specs = [InputSpec("s", "string", (2,)), InputSpec("f", "float8_e4m3fn", (2,))]
    path = tmp_path / "in.npz"
    np.savez(path, s=np.array(["ab", "c"]), f=np.array([1.5, -0.25], dtype=np.float32))
    feeds = load_npz(path, specs)
    assert feeds["s"].dtype == object and feeds["s"].tolist() == ["ab", "c"]
    assert feeds["f"].dtype == numpy_dtype("float8_e4m3fn") and feeds["f"].astype(np.float32).tolist() == [1.5, -0.25]
    np.savez(path, s=np.array([1, 2]), f=np.array(["x", "y"]))
    with pytest.raises(InputError, match="input 's' has dtype int64, the model expects string"):
        load_npz(path, specs)
    np.savez(path, s=np.array(["a", "b"]), f=np.array(["x", "y"]))
    with pytest.raises(InputError, match="input 'f' has dtype <U1, the model expects float8_e4m3fn"):
        load_npz(path, specs)
