"""Target profiles: each table parser on small tables written in its upstream format, the generator
against the committed profiles (the wheel's NNAPI and CoreML tables always; the others where the
source cache is here), the node verdicts and the partition estimate against ONNX Runtime's own
usability checker."""

from __future__ import annotations

import json
import random
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from portable.validators.targets import TARGETS, load_profile, parsers
from portable.validators.targets import generate as gen
from portable.validators.targets.facts import ModelFacts
from portable.validators.targets.partition import partition
from portable.validators.targets.profile import OpEntry, Profile, VersionRange, profile_from_dict
from portable.validators.targets.sources import Pinned, SourceMissing, blob_id, read
from portable.validators.targets.support import judge

# -- the parsers, on tables written here in each upstream format ----------------------------

KERNELS = """## Supported Operators and Data Types

<a name="cpuexecutionprovider"/>

## Operators implemented by CPUExecutionProvider

| Op Name | Parameters | OpSet Version | Types Supported |
|---------|------------|---------------|-----------------|
|**Operator Domain:** *ai.onnx*||||
|Widen|*in* X:**T**<br> *out* Y:**T**|14+|**T** = tensor(double), tensor(float)|
|||[7, 13]|**T** = tensor(float)|
|Pick|*in* data:**T**<br> *in* idx:**Tind**|11|**T** = tensor(bool), tensor(int64)<br/> **Tind** = tensor(int32), seq(tensor(float16))|
|**Operator Domain:** *com.example*||||
|Fused|*in* X:**T**|1+|**T** = tensor(float)|

<a name="cudaexecutionprovider"/>

## Operators implemented by CUDAExecutionProvider

| Op Name | Parameters | OpSet Version | Types Supported |
|---------|------------|---------------|-----------------|
|**Operator Domain:** *ai.onnx*||||
|Widen|*in* X:**T**|[9, 12]|**T** = tensor(float16)|
"""


def test_kernel_table_gives_ranges_and_types_per_constraint():
    cpu = parsers.ort_kernels(KERNELS, "CPUExecutionProvider").ops
    assert sorted(cpu) == ["ai.onnx:Pick", "ai.onnx:Widen", "com.example:Fused"]
    widen = cpu["ai.onnx:Widen"].versions
    assert widen == (VersionRange(14, None, (("T", ("float64", "float32")),)), VersionRange(7, 13, (("T", ("float32",)),)))
    assert cpu["ai.onnx:Pick"].versions == (VersionRange(11, 11, (("T", ("bool", "int64")), ("Tind", ("int32", "seq(float16)")))),)
    cuda = parsers.ort_kernels(KERNELS, "CUDAExecutionProvider").ops
    assert list(cuda) == ["ai.onnx:Widen"] and cuda["ai.onnx:Widen"].versions == (VersionRange(9, 12, (("T", ("float16",)),)),)
    with pytest.raises(ValueError, match="DmlExecutionProvider"):
        parsers.ort_kernels(KERNELS, "DmlExecutionProvider")


MOBILE = """<!--
a comment
-->
|Operator|Note|
|--------|------|
|ai.onnx:Widen||
|ai.onnx:Pick|Only 2D is supported.<br/>Indices should be constant.|
|com.example:Fused|All scales constant.|
|not-an-op|ignored|
|ai.onnx:TooMany|a|b|
"""


def test_mobile_table_reads_as_the_usability_checker_reads_it(tmp_path):
    from onnxruntime.tools.mobile_helpers.usability_checker import _SupportedOpsChecker

    ops = parsers.mobile_ops(MOBILE).ops
    assert ops["ai.onnx:Pick"].notes == "Only 2D is supported. Indices should be constant."
    assert sorted(ops) == ["ai.onnx:Pick", "ai.onnx:Widen", "com.example:Fused"]
    (tmp_path / "ops.md").write_text(MOBILE)
    theirs = _SupportedOpsChecker(str(tmp_path / "ops.md"))._ops
    assert set(theirs) == set(ops) and all(theirs[k].strip() == ops[k].notes for k in ops)


@pytest.mark.parametrize("name", ["nnapi_supported_ops.md", "coreml_supported_mlprogram_ops.md"])
def test_the_wheels_mobile_tables_parse_as_the_checker_parses_them(name):
    from onnxruntime.tools.mobile_helpers.usability_checker import _SupportedOpsChecker

    from portable.validators.targets.sources import wheel_file

    path = wheel_file(f"tools/mobile_helpers/{name}")
    assert set(_SupportedOpsChecker(str(path))._ops) == set(parsers.mobile_ops(path.read_text()).ops)


CHECKER = '''
def check_coreml_partitions(model, require_fixed_input_sizes, config_filename):
    max_rank = 4
    return None

def checker(model_path, logger):
    def check_ep(ep_name, checker_func):
        require_fixed_input_sizes = True
        require_fixed_input_sizes = False
'''


def test_usability_settings_come_from_the_checkers_code():
    assert parsers.usability_settings(CHECKER) == {"fixed_sizes": True, "coreml_max_rank": 4}
    with pytest.raises(ValueError, match="check_ep"):
        parsers.usability_settings("def other():\n    pass\n")


TENSORRT = """# Supported ONNX Operators

TensorRT 11.0 supports operators in the inclusive range of opset 7 to opset 21.

TensorRT supports the following ONNX data types: DOUBLE, FLOAT32, FLOAT16, INT64, and BOOL

> Note: TensorRT will attempt to cast DOUBLE down to FLOAT, if it must.

| Operator                  | Supported  | Supported Types | Restrictions |
|---------------------------|------------|-----------------|--------------|
| Widen                     | Y          | FP32, FP16, INT64 | `axis` must be an initializer<br />and positive |
| Pick                      | N          |
| Odd                       | Y          | FP32, INF64 |
"""


def test_tensorrt_matrix_and_its_type_notes():
    parsed = parsers.tensorrt_ops(TENSORRT)
    assert parsed.ops["ai.onnx:Widen"] == OpEntry(True, None, ("float32", "float16", "int64"),
                                                  "`axis` must be an initializer and positive")
    assert parsed.ops["ai.onnx:Pick"] == OpEntry(supported=False)
    assert parsed.ops["ai.onnx:Odd"].data_types == ("float32",)
    assert any("'INF64'" in note for note in parsed.notes)  # a typo in the table is said, not guessed
    assert parsed.element_types == ("float64", "float32", "float16", "int64", "bool")
    assert parsed.prefer == (("float64", "float32"),) and parsed.opset_range == (7, 21)


OPENVINO = """# ONNX Operations Supported by OpenVINO ONNX Frontend

| Domain                 | Operation Name | Supported Version      | Defined Version | Limitation |
|------------------------|----------------|------------------------|-----------------|------------|
|                        |Widen           |13, 6, 1                |13, 6, 1         |            |
|                        |Pick            |                        |22, 11           |            |
|com.example             |Fused           |1                       |1                |Supported only in some patterns|
"""


def test_openvino_table_turns_registered_versions_into_ranges():
    ops = parsers.openvino_ops(OPENVINO).ops
    assert ops["ai.onnx:Widen"].versions == (VersionRange(1, 5), VersionRange(6, 12), VersionRange(13, None))
    assert ops["ai.onnx:Pick"] == OpEntry(supported=False)
    assert ops["com.example:Fused"].notes == "Supported only in some patterns"
    assert "ai.onnx:Operation" not in ops


QNN_FACTORY = """OpBuilderRegistrations::OpBuilderRegistrations() {
  {
    CreateSimpleOpBuilder("Widen", *this);
    CreateSimpleOpBuilder( "Pick", *this);
  }
  { CreateSoftmaxOpBuilder("Soft", *this); }
}"""
QNN_UTILS = """bool OnnxDataTypeToQnnDataType(...) {
  const std::unordered_map<ONNXTensorElementDataType, Qnn_DataType_t> onnx_to_qnn_data_type = {
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, QNN_DATATYPE_INT_8},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, QNN_DATATYPE_FLOAT_32},
  };
  const std::unordered_map<ONNXTensorElementDataType, Qnn_DataType_t> onnx_to_qnn_data_type_quantized = {
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4, QNN_DATATYPE_SFIXED_POINT_8},
  };
}"""
TRACT = """pub fn register_all_ops(reg: &mut OnnxOpRegister) {
    reg.insert("Widen", widen);
    reg.insert(
        "Pick",
        pick::pick,
    );
    other.insert("NotThis", x);
}"""


def test_qnn_registry_and_type_map():
    assert sorted(parsers.qnn_builders(QNN_FACTORY).ops) == ["*:Pick", "*:Soft", "*:Widen"]
    assert parsers.qnn_element_types(QNN_UTILS) == ("int8", "float32")  # not the quantized map's int4
    with pytest.raises(ValueError):
        parsers.qnn_element_types("nothing here")


def test_tract_registry_reads_every_insert():
    assert sorted(parsers.tract_registry([TRACT, 'reg.insert("Third", t);']).ops) == ["*:Pick", "*:Third", "*:Widen"]


# -- the generator and the committed profiles -------------------------------------------------


@pytest.mark.parametrize("name", TARGETS)
def test_each_profile_is_what_its_generator_makes_of_its_sources(name):
    try:
        made = gen.generate(name)
    except SourceMissing as exc:  # only nnapi and coreml (the wheel) are always here
        assert name not in ("nnapi", "coreml"), exc
        pytest.skip(f"{name}'s source is not cached here: {exc}")
    committed = (Path(gen.__file__).parent / "profiles" / f"{name}.json").read_text()
    assert made.to_json() == committed, f"regenerate: python -m portable.validators.targets.generate {name}"


def test_the_check_fails_when_a_profile_and_its_sources_disagree(tmp_path, monkeypatch, capsys):
    from portable.validators.targets import profile

    text = profile.profile_path("nnapi").read_text()
    tampered = json.loads(text)
    tampered["ops"].pop("ai.onnx:Relu")
    monkeypatch.setattr(profile, "PROFILES", tmp_path)
    (tmp_path / "nnapi.json").write_text(text)
    assert gen.main(["nnapi", "--check"]) == 0
    (tmp_path / "nnapi.json").write_text(json.dumps(tampered))
    assert gen.main(["nnapi", "--check"]) == 1
    assert "nnapi: DIFFERS from its sources" in capsys.readouterr().err


def test_a_cached_source_must_be_the_pinned_blob(tmp_path, monkeypatch):
    data = b"|ai.onnx:Relu||\n"
    pin = Pinned("owner/repo", "docs/ops.md", "0" * 40, blob_id(data))
    monkeypatch.setenv("PORTABLE_TARGET_SOURCES", str(tmp_path))
    with pytest.raises(SourceMissing, match="owner/repo/docs/ops.md"):
        read(pin)
    pin.cached(tmp_path).parent.mkdir(parents=True)
    pin.cached(tmp_path).write_bytes(data)
    text, source = read(pin)
    assert text == data.decode() and source.blob == pin.blob and source.url.endswith(f"{'0' * 40}/docs/ops.md")
    pin.cached(tmp_path).write_bytes(data + b"|ai.onnx:Extra||\n")
    with pytest.raises(ValueError, match="is not the pinned"):
        read(pin)


def test_blob_id_is_gits():
    assert blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object of "hello\n"


@pytest.mark.parametrize("name", TARGETS)
def test_every_profile_says_where_it_comes_from_and_what_it_lacks(name):
    profile = load_profile(name)
    assert profile.name == name and profile.ops and profile.holds and profile.lacks
    for source in profile.sources:
        assert source.repository.count("/") == 1 and len(source.blob) == 40 and source.commit
        assert source.url.startswith(f"https://github.com/{source.repository}/blob/")
    assert profile_from_dict(profile.to_dict()) == profile


# -- node verdicts ---------------------------------------------------------------------------


def _model(nodes, inputs, outputs, opset=18, value_info=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _facts(model) -> ModelFacts:
    return ModelFacts.of(model, ())


def _erf(elem: int) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", elem, [2, 3])
    y = helper.make_tensor_value_info("y", elem, [2, 3])
    return _model([helper.make_node("Erf", ["x"], ["y"], name="erf")], [x], [y])


def test_a_node_is_judged_on_op_version_and_type():
    floats, doubles = _facts(_erf(TensorProto.FLOAT)), _facts(_erf(TensorProto.DOUBLE))
    assert judge(load_profile("ort-cpu"), floats, 0).supported
    bad = judge(load_profile("ort-cpu"), doubles, 0)  # the CPU provider's Erf kernel is float only
    assert (bad.supported, bad.reason, bad.wanted) == (False, "dtype", ("float32",))
    assert "input 0 'x' is float64" in bad.detail
    assert judge(load_profile("ort-cuda"), doubles, 0).supported  # CUDA's takes double
    assert judge(load_profile("qnn"), floats, 0).reason == "op"  # no Erf builder
    assert judge(load_profile("qnn"), doubles, 0).reason == "op"
    assert judge(load_profile("tensorrt"), doubles, 0).reason == "dtype"  # its Erf row lists FP32, FP16, BF16


def _profile(**entries: OpEntry) -> Profile:
    return Profile(name="toy", title="toy", runtime="toy", fallback="CPU", sources=(), holds=("ops",), lacks=(),
                   ops={f"ai.onnx:{k}": v for k, v in entries.items()})


def test_an_op_version_outside_the_registered_ranges_is_refused():
    model = _facts(_erf(TensorProto.FLOAT))  # Erf-13 at opset 18
    assert judge(_profile(Erf=OpEntry(versions=(VersionRange(13),))), model, 0).supported
    old = judge(_profile(Erf=OpEntry(versions=(VersionRange(9, 12),))), model, 0)
    assert (old.reason, old.supported) == ("opset", False) and "Erf-13" in old.detail and "[9, 12]" in old.detail
    assert judge(_profile(Erf=OpEntry()), model, 0).supported  # no versions in the table: any version
    assert judge(_profile(Erf=OpEntry(supported=False)), model, 0).reason == "op"


def test_tensorrt_data_types_accept_input_0_or_output_0():
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))
    model = _facts(_model([node], [shape], [out]))
    assert judge(_profile(ConstantOfShape=OpEntry(data_types=("float32",))), model, 0).supported
    assert judge(_profile(ConstantOfShape=OpEntry(data_types=("int32",))), model, 0).reason == "dtype"


def test_types_are_inferred_when_the_file_declares_none():
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Erf", ["h"], ["y"])]
    facts = ModelFacts.of(_model(nodes, [x], [y]), ("batch",))
    assert facts.types["h"] == TensorProto.DOUBLE and facts.dims["h"] == ("batch", 3)
    assert not facts.fixed("h", batch_fixed=False) and facts.fixed("h", batch_fixed=True)
    assert judge(load_profile("ort-cpu"), facts, 1).reason == "dtype"


def test_a_linear_batch_dim_counts_as_fixed_once_the_batch_is():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    infos = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [d, 4]) for n, d in (("a", "2*batch"), ("b", "other"))]
    facts = ModelFacts.of(_model([], [x], [], value_info=infos), ("batch",))
    assert facts.fixed("a", batch_fixed=True) and not facts.fixed("a", batch_fixed=False)
    assert not facts.fixed("b", batch_fixed=True)  # a symbol that is not the batch stays dynamic


# -- the partition estimate against ONNX Runtime's usability checker ---------------------------

OPS = ("Relu", "Tanh", "Erf", "Sigmoid")
UNSUPPORTED = {"Erf"}


def random_model(seed: int, count: int = 40) -> onnx.ModelProto:
    """A random DAG of unary and binary ops over the values made so far (residual-like branches)."""
    rng = random.Random(seed)
    values, nodes = ["x"], []
    for i in range(count):
        if rng.random() < 0.3 and len(values) > 1:
            a, b = rng.sample(values[-6:], 2)
            nodes.append(helper.make_node("Add", [a, b], [f"v{i}"], name=f"n{i}"))
        else:
            nodes.append(helper.make_node(rng.choice(OPS), [rng.choice(values[-4:])], [f"v{i}"], name=f"n{i}"))
        values.append(f"v{i}")
    used = {i for n in nodes for i in n.input}
    outs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [2, 3]) for v in values[1:] if v not in used]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], outs)


class _ByOpType:
    """The checker's supported-ops interface: support by op type alone."""

    def is_op_supported(self, node: onnx.NodeProto) -> bool:
        return node.op_type not in UNSUPPORTED

    def get_caveats(self) -> list[str]:
        return []


@pytest.mark.parametrize("seed", range(12))
def test_the_estimate_matches_the_usability_checkers(seed):
    from onnxruntime.tools.mobile_helpers.usability_checker import check_partitioning

    model = random_model(seed)
    facts = _facts(model)
    ours = partition(len(facts.nodes), facts.producers, facts.consumers,
                     lambda i: facts.nodes[i].op_type not in UNSUPPORTED)
    saved = onnx.NodeProto.__hash__
    try:
        theirs = check_partitioning(model.graph, _ByOpType(), require_fixed_input_sizes=False)
    finally:
        onnx.NodeProto.__hash__ = saved  # the checker makes every NodeProto hashable by id()
    assert (ours.partitions, ours.supported) == (theirs.num_partitions, theirs.num_supported_nodes)
    assert sorted(len(g) for g in ours.groups) == sorted(len(g) for g in theirs.supported_groups)


def test_an_unsupported_node_between_two_supported_ones_splits_the_graph():
    chain = [helper.make_node(op, [i], [o]) for op, i, o in (("Relu", "x", "a"), ("Erf", "a", "b"), ("Relu", "b", "y"))]
    model = _model(chain, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    facts = _facts(model)
    split = partition(3, facts.producers, facts.consumers, lambda i: facts.nodes[i].op_type != "Erf")
    assert (split.partitions, split.supported, split.unsupported) == (2, 2, (1,))
    whole = partition(3, facts.producers, facts.consumers, lambda i: True)
    assert (whole.partitions, whole.supported, whole.unsupported) == (1, 3, ())


def test_an_op_without_a_kernel_is_judged_by_its_function_body():
    """ONNX Runtime has no HardSwish kernel and inlines its ONNX function (HardSigmoid, Mul): the CPU
    provider runs it (ONNX Runtime's own assignment says 2 nodes), NNAPI lacks HardSigmoid, tract has
    no such expansion and takes HardSwish itself."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    facts = _facts(_model([helper.make_node("HardSwish", ["x"], ["y"])], [x], [y]))
    assert load_profile("ort-cpu").entry("", "HardSwish") is None  # the table has no kernel for it
    cpu = judge(load_profile("ort-cpu"), facts, 0)
    assert cpu.supported and "inlines HardSwish's function body (HardSigmoid, Mul)" in cpu.detail
    nnapi = judge(load_profile("nnapi"), facts, 0)
    assert (nnapi.supported, nnapi.reason) == (False, "op") and "whose HardSigmoid nnapi lacks" in nnapi.detail
    toy = _profile(HardSigmoid=OpEntry(), Mul=OpEntry())
    assert not judge(toy, facts, 0).supported  # a runtime that does not expand functions needs the op itself


def test_the_cpu_provider_session_agrees_on_hardswish():
    import onnxruntime as ort

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    model = _model([helper.make_node("HardSwish", ["x"], ["y"])], [x], [y])
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])  # loads: no NOT_IMPLEMENTED
