"""The WebGPU and MIGraphX profiles: each parser on a small file in its upstream format (the WebGPU EP's
kernel registration tables, MIGraphX's RST grid table), their pinned sources, and what a model meets
there: an op without a kernel falls back to the CPU EP (a warning, on both), a typed WebGPU kernel
(Range: float and int32 only) refuses int64, MIGraphX's ❌ rows and its element types, a MIGraphX
limitation stated on the node it restricts, and the cast hint naming the nearest type."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import TensorProto, helper
from support import save

from portable.policy import Policy
from portable.validators import validate
from portable.validators.targets import TARGETS, load_profile, parsers
from portable.validators.targets import generate as gen
from portable.validators.targets.profile import ANY_DOMAIN, OpEntry, VersionRange

# -- the parsers, on files written here in each upstream format -----------------------------------

WEBGPU = """#include "core/providers/webgpu/webgpu_execution_provider.h"

#define KERNEL_CREATE_INFO_VERSIONED(Start, End, Op) \\
  BuildKernelCreateInfo<                             \\
      ONNX_OPERATOR_VERSIONED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, Start, End, Op)>

class ONNX_OPERATOR_VERSIONED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 6, 12, Widen);
class ONNX_OPERATOR_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 13, Widen);
class ONNX_OPERATOR_TYPED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 11, float, Count);
class ONNX_OPERATOR_TYPED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 11, int32_t, Count);
class ONNX_OPERATOR_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kMSInternalNHWCDomain, 11, Shrink);
class ONNX_OPERATOR_VERSIONED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 6, 8, Turn);
class ONNX_OPERATOR_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 9, Turn);

std::unique_ptr<KernelRegistry> RegisterKernels(bool enable_graph_capture = false) {
  static const BuildKernelCreateInfoFn function_table[] = {
      BuildKernelCreateInfo<void>,
      KERNEL_CREATE_INFO_VERSIONED(6, 12, Widen),
      KERNEL_CREATE_INFO(13, Widen),
      BuildKernelCreateInfo<ONNX_OPERATOR_TYPED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 11, float, Count)>,
      BuildKernelCreateInfo<ONNX_OPERATOR_TYPED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kOnnxDomain, 11, int32_t, Count)>,
      // BuildKernelCreateInfo<ONNX_OPERATOR_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kMSInternalNHWCDomain, 11, Shrink)>,
  };
  ORT_THROW_IF_ERROR(kernel_registry->Register(CreateTurnKernelInfo<6, 8>(enable_graph_capture)));
  ORT_THROW_IF_ERROR(kernel_registry->Register(CreateTurnKernelInfo<9>(enable_graph_capture)));
}
"""

CONTRIB = """class ONNX_OPERATOR_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kMSDomain, 1, Fused);
Status RegisterWebGpuContribKernels(KernelRegistry& kernel_registry, bool enable_graph_capture) {
  static const BuildKernelCreateInfoFn function_table[] = {
      BuildKernelCreateInfo<void>,
      BuildKernelCreateInfo<ONNX_OPERATOR_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kMSDomain, 1, Fused)>};
}
"""


def test_the_webgpu_registrations_give_ranges_per_domain_and_the_typed_kernels_types():
    ops = parsers.webgpu_kernels([WEBGPU, CONTRIB]).ops
    assert sorted(ops) == ["ai.onnx:Count", "ai.onnx:Turn", "ai.onnx:Widen", "com.microsoft:Fused"]  # Shrink: commented out
    assert ops["ai.onnx:Widen"] == OpEntry(versions=(VersionRange(6, 12), VersionRange(13)))
    assert ops["ai.onnx:Count"].versions == (VersionRange(11, None, (("T", ("float32", "int32")),)),)
    assert ops["ai.onnx:Turn"].versions == (VersionRange(6, 8), VersionRange(9))  # Create<Op>KernelInfo: its declarations
    assert ops["com.microsoft:Fused"].versions == (VersionRange(1),)


UNKNOWN_TYPE = """Status RegisterWebGpuContribKernels(KernelRegistry& kernel_registry) {
  static const BuildKernelCreateInfoFn function_table[] = {
      BuildKernelCreateInfo<ONNX_OPERATOR_TYPED_KERNEL_CLASS_NAME(kWebGpuExecutionProvider, kMSDomain, 1, Int4x2, Fused)>};
}
"""


@pytest.mark.parametrize(("text", "match"), [
    ("class X;", "function_table"),
    (CONTRIB.replace("kMSDomain, 1, Fused)>", "kOtherDomain, 1, Fused)>"), "kOtherDomain"),
    (UNKNOWN_TYPE, "Int4x2"),
])
def test_what_the_webgpu_parser_cannot_read_is_an_error_not_a_guess(text, match):
    with pytest.raises(ValueError, match=match):
        parsers.webgpu_kernels([text])


MIGRAPHX = """Supported ONNX Operators
========================

MIGraphX supports operators up to Opset 19.

MIGraphX supports the following ONNX data types: BOOL, INT64, FLOAT8, FLOAT16, FLOAT32, and DOUBLE

   .. Note::

      FP8 support is only for E4M3FNUZ, see the ONNX documentation.

+--------------------------+-----------+-----------------+------------------------------+
| Operator                 | Supported | Supported Types | Limitations                  |
+==========================+===========+=================+==============================+
| Widen                    | ✅        | FP16,           |                              |
|                          |           | FP32            |                              |
+--------------------------+-----------+-----------------+------------------------------+
| Pick                     | ✅        | INT64           | ``axes`` must                |
|                          |           |                 | be constant, `issue <https:  |
|                          |           |                 | //github.com/o/r/ issues/1>` |
+--------------------------+-----------+-----------------+------------------------------+
| Shift                    | ❌        |                 |                              |
+--------------------------+-----------+-----------------+------------------------------+
| Scatter (deprecated)     | ✅        | Any             |                              |
+--------------------------+-----------+-----------------+------------------------------+
"""


def test_the_migraphx_grid_table_joins_each_cell_and_states_the_types():
    parsed = parsers.migraphx_ops(MIGRAPHX)
    assert sorted(parsed.ops) == [f"{ANY_DOMAIN}:{op}" for op in ("Pick", "Scatter", "Shift", "Widen")]
    assert parsed.ops["*:Widen"] == OpEntry() and parsed.ops["*:Shift"] == OpEntry(supported=False)
    assert parsed.ops["*:Pick"].notes == "``axes`` must be constant, `issue <https://github.com/o/r/issues/1>`"
    assert parsed.element_types == ("bool", "int64", "float8e4m3fnuz", "float16", "float32", "float64")
    assert parsed.notes == ("FP8 support is only for E4M3FNUZ, see the ONNX documentation.",)
    bare = parsers.migraphx_ops(MIGRAPHX.replace("FP8 support is only for E4M3FNUZ", "FP8 is partial"))
    assert "float8e4m3fnuz" not in (bare.element_types or ()) and any("'FLOAT8'" in n for n in bare.notes)


# -- the committed profiles ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "pins", "count", "supported"), [
    ("webgpu", (gen.WEBGPU, gen.WEBGPU_CONTRIB), 119, 119),
    ("migraphx", (gen.MIGRAPHX,), 197, 161),
])
def test_the_new_profiles_carry_their_pinned_sources(name, pins, count, supported):
    profile = load_profile(name)
    assert name in TARGETS and gen.SPECS[name].pins == pins
    assert [(s.repository, s.path, s.commit, s.blob) for s in profile.sources] == \
           [(p.repository, p.path, p.commit, p.blob) for p in pins]
    assert profile.fallback == "CPUExecutionProvider" and profile.runtime == "onnxruntime"
    assert len(profile.ops) == count and sum(e.supported for e in profile.ops.values()) == supported


def test_webgpu_is_pinned_beside_the_other_onnx_runtime_tables():
    assert gen.WEBGPU.commit == gen.WEBGPU_CONTRIB.commit == gen.KERNELS.commit == gen.WEBNN.commit
    assert gen.WEBGPU.repository == "microsoft/onnxruntime" and gen.MIGRAPHX.repository == "ROCm/AMDMIGraphX"


# -- what a model meets there --------------------------------------------------------------------------


def _one(op: str, elem: int, tmp_path: Path, ins: int = 1, shape: list | None = None, out: list | None = None) -> Path:
    shape = [2, 3] if shape is None else shape
    names = ["a", "b", "c"][:ins]
    graph = helper.make_graph([helper.make_node(op, names, ["y"], name=op.lower())], "m",
                              [helper.make_tensor_value_info(n, elem, shape) for n in names],
                              [helper.make_tensor_value_info("y", elem, shape if out is None else out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return save(model, tmp_path / f"{op}_{elem}.onnx")


def test_an_op_without_a_kernel_falls_back_on_both(cli, tmp_path):
    result = cli("validate", "--target", "webgpu,migraphx", str(_one("Det", TensorProto.FLOAT, tmp_path, shape=[3, 3], out=[])))
    assert result.exit_code == 0, result.output  # a fallback is a warning
    assert "webgpu: Det is not in webgpu's table; it falls back to CPUExecutionProvider" in result.output
    assert "migraphx: migraphx's table lists Det as not supported; it falls back to CPUExecutionProvider" in result.output
    assert "  target   webgpu: does not run there as it is: 0/1 nodes, 0 partitions, fallback: Det x1" in result.output


def test_the_typed_webgpu_range_takes_float_and_int32_not_int64(tmp_path):
    policy = Policy(targets=("webgpu", "ort-cpu"))
    (float_gpu, float_cpu) = validate(_one("Range", TensorProto.FLOAT, tmp_path, ins=3, shape=[], out=[4]), policy).targets
    (long_gpu, long_cpu) = validate(_one("Range", TensorProto.INT64, tmp_path, ins=3, shape=[], out=[4]), policy).targets
    assert (float_gpu.supported, long_gpu.supported, dict(long_gpu.fallback)) == (1, 0, {"Range": 1})
    assert float_cpu.loads and long_cpu.loads  # the CPU EP has int64 Range: where the node goes


def test_the_cast_hint_names_the_nearest_type(cli, tmp_path):
    """int64 Range on webgpu: cast to int32 (listed after float32); bfloat16 on migraphx: to float32, not
    to the first type its list states (bool)."""
    long_range = cli("validate", "--target", "webgpu", str(_one("Range", TensorProto.INT64, tmp_path, ins=3, shape=[], out=[4])))
    assert "webgpu takes float32, int32 there" in long_range.output
    assert "fix: cast to int32 in the PyTorch model before this op (tensor.to(torch.int32))" in long_range.output
    bf16 = cli("validate", "--target", "migraphx", str(_one("Relu", TensorProto.BFLOAT16, tmp_path)))
    assert bf16.exit_code == 0, bf16.output
    assert "migraphx: input 0 'a' is bfloat16; migraphx takes bool, " in bf16.output
    assert "fix: cast to float32 in the PyTorch model before this op (tensor.to(torch.float32))" in bf16.output


def test_a_migraphx_limitation_is_stated_on_the_node_it_restricts(cli, tmp_path):
    pads = helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 1])
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="edge")
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], initializer=[pads])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    result = cli("validate", "--target", "migraphx,webgpu", "--select", "PORT201,PORT204", str(save(model, tmp_path / "pad.onnx")))
    assert result.exit_code == 0, result.output
    assert "PORT204 [target-restrictions] main, node 'pad' (Pad): migraphx: 1 Pad node; its table states: ``edge``, " \
           "``warp`` padding not supported, ``pads`` must be constant (not checked)" in result.output
    assert "webgpu: 1 Pad node" not in result.output  # the registrations state no restrictions
