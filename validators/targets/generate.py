"""Regenerate the target profiles from the runtimes' own tables.

    python -m portable.validators.targets.generate [NAME ...] [--source FILE] [--check]

Each target is a :class:`Spec`: its pinned upstream files (:mod:`.sources`), the parser that reads
them (:mod:`.parsers`) and what portable states about how the target runs (which runtime, where
a node it cannot run goes). The profile it writes is ``validators/targets/profiles/NAME.json``.
``--check`` writes nothing and exits 1 when a committed profile differs from what its sources give.
``--source FILE`` reads FILE instead of a target's (single) pinned file, e.g. a newer checkout's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from portable.validators.targets import parsers
from portable.validators.targets.parsers import Parsed
from portable.validators.targets.profile import OpEntry, Profile, Source, profile_path
from portable.validators.targets.sources import Pinned, SourceMissing, read

__all__ = ["SPECS", "Spec", "generate", "main"]

ORT = "microsoft/onnxruntime"
QNN = "onnxruntime/onnxruntime-qnn"
QNN_COMMIT = "cee6c0d91e583d43f5ecef6391e93c19b4042c0f"
TRACT = "sonos/tract"
TRACT_COMMIT = "38b383fbd8ee33873fd0b58fcc23480011554c0c"

KERNELS = Pinned(ORT, "docs/OperatorKernels.md", "1817f4a81072c49dea2984853edca412674d66fb",
                 "7cc57a636362fe3ece449ec2bb839211e78d6a29",
                 via=f"the history of {QNN}@{QNN_COMMIT[:12]}, a copy of {ORT}'s: this commit is the last that changed the file")
WEBNN = Pinned(ORT, "js/web/docs/webnn-operators.md", KERNELS.commit, "ea88f291e55978f6949cc0642905c6e37a7d3715",
               via=f"the history of {QNN}@{QNN_COMMIT[:12]}, a copy of {ORT}'s: the file as of this commit, "
                   "last changed by ac7f4b7763289bfb82fc3f5165d82895d6adde42 (2025-10-11)")
WEBGPU = Pinned(ORT, "onnxruntime/core/providers/webgpu/webgpu_execution_provider.cc", KERNELS.commit,
                "ee6b7707384e2b25169ba1fab1575a45d8fb3d6e",
                via=f"the history of {QNN}@{QNN_COMMIT[:12]}, a copy of {ORT}'s: the file as of this commit, "
                    "last changed by 63b5cefc8e341ede481c4ddff0ae8bc746945027 (2026-01-06)")
WEBGPU_CONTRIB = Pinned(ORT, "onnxruntime/contrib_ops/webgpu/webgpu_contrib_kernels.cc", KERNELS.commit,
                        "357eebee714d5183c08f807a83e8a0a6ffeacf8d",
                        via=f"the history of {QNN}@{QNN_COMMIT[:12]}, a copy of {ORT}'s: the file as of this commit, "
                            "last changed by 683e78c3e4e11e4c14347a983f9cd3eba1a06c98 (2025-11-15)")
MIGRAPHX = Pinned("ROCm/AMDMIGraphX", "docs/dev/onnx_operators.rst", "f729a52fafa209a094eb8c6df3433e94423577fe",
                  "a24fbac6a801cc1d8ee75855b03cfe7dcdf58563",
                  via="branch develop (2026-05-29); the file last changed by ac44f968e1365be5f444a830667f00493e43a703")
ONNX2TF = "PINTO0309/onnx2tf"
ONNX2TF_COMMIT = "2c0cb019b77bb7464828123eb3b708e05b4737a7"  # main, 2026-07-20
ONNX2TF_REGISTRY = Pinned(ONNX2TF, "onnx2tf/tflite_builder/op_registry.py", ONNX2TF_COMMIT,
                          "32f94b5b945079fe2e9d62a08b18b5132d0f3c8b",
                          via="main; the file last changed by 5b0a098b60010e9065e1c1956a376b94fa571bf2 (2026-07-12)")
ONNX2TF_README = Pinned(ONNX2TF, "README.md", ONNX2TF_COMMIT, "fc88700b11216d641e172876a19b4e46e8708d91",
                        via="main; the file last changed by 79251fac2be6845966b737dc9b233de7b08c3a68 (2026-07-20)")
ONNX2TF_TYPES = Pinned(ONNX2TF, "onnx2tf/tflite_builder/core/onnx_analysis.py", ONNX2TF_COMMIT,
                       "02d90c9aa8d181539b0b67d60c9cb5c094988627",
                       via="main; the file last changed by c3c5ff75bf080009bcf3c96e99f50a87856be2d6 (2026-07-12)")
TENSORRT = Pinned("onnx/onnx-tensorrt", "docs/operators.md", "96e781103cfc4adf4a6bb557e94bac8e693f6f4c",
                  "f32b1da71687773afb6ad032677c9c08f778caa6", via="tag release/10.1-GA")
OPENVINO = Pinned("openvinotoolkit/openvino", "src/frontends/onnx/docs/supported_ops.md",
                  "0ae60f0ffec990b581cf29cae47563090e5deca0", "0243dafeb6f773bbdfefe82b20d97505983402a9",
                  via="the code index's text of the file at this commit (the repository is too large to fetch here), "
                      "laid out in the file's column widths: the same 58,710 characters")
QNN_BUILDERS = Pinned(QNN, "onnxruntime/core/providers/qnn/builder/op_builder_factory.cc", QNN_COMMIT,
                      "5597fab8a5178da9beab5642ca15aba3520b48e4")
QNN_TYPES = Pinned(QNN, "onnxruntime/core/providers/qnn/builder/qnn_utils.cc", QNN_COMMIT,
                   "ba614f093ed7a3c344c09b7ebb4f2a24b29680c9")
# The HTP's own answers, measured here on onnxruntime-qnn 2.7.0's wheel (its libQnnHtp.so, QAIRT 2.51.0):
# `python -m portable.validators.targets.htp_answers` rewrites the file; then its blob here, then regenerate.
QNN_HTP = Pinned(QNN, "release v2.7.0 (PyPI onnxruntime-qnn==2.7.0): libQnnHtp.so, QAIRT 2.51.0", "v2.7.0",
                 "fec86dd932d04d02c7af7710f8262d8f84292dc3", local="measured/qnn-htp.json",
                 via="the HTP backend's answers on one-node probes, measured by python -m "
                     "portable.validators.targets.htp_answers (validators/targets/measured/qnn-htp.json)")
NNAPI = Pinned(ORT, "tools/ci_build/github/android/nnapi_supported_ops.md", "", None,
               wheel="tools/mobile_helpers/nnapi_supported_ops.md")
COREML = Pinned(ORT, "tools/ci_build/github/apple/coreml_supported_mlprogram_ops.md", "", None,
                wheel="tools/mobile_helpers/coreml_supported_mlprogram_ops.md")
CHECKER = Pinned(ORT, "tools/python/util/mobile_helpers/usability_checker.py", "", None,
                 wheel="tools/mobile_helpers/usability_checker.py")
_TRACT_BLOBS = {
    "array/mod.rs": "64990bc6ffe4c02a04fb326677a2fbd6fa412f87", "cast.rs": "7ad2471f732ae3f17f28b75501960d7ea4e51c8d",
    "cumsum.rs": "6a5bf1eb75895b7401bb9bef5e6bf15d409563d6", "d2s.rs": "1e7f61653f8b442fef84a964ed96ba45f56eb843",
    "fft.rs": "0f04ae1fcb7579ba07380a04752a05b58c9e537f", "logic.rs": "5f5b8e3f6c783d63d84a3d02a530929f8c438952",
    "math.rs": "76ba0413271ba4015e94694089767e0fe54eefc1", "ml/category_mapper.rs": "cef6dd62c18f5d0ac0753f854ab16ad24d9172f6",
    "ml/linear_classifier.rs": "c69de68ed490da641898b70ec30cb0257376db85",
    "ml/linear_regressor.rs": "00a0d226bd0fa13714836ad9344f19dece2fa3d6",
    "ml/normalizer.rs": "fbdfe370309bf059d6c39195edb1ed25fe35c552",
    "ml/tree_ensemble_classifier.rs": "bd8c80f68c8c3404083672fb1cf7c1ccac0cfd0d", "mod.rs": "1698716ef5100d46c8dc05734c799cb2f02f2cc2",
    "nn/mod.rs": "db808553ff7a3174d9bf8cf448230088f0f60a68", "quant.rs": "afd6f8b12de8f72deee0b47e29323a2b1a8c4a53",
    "random.rs": "601ef95ba92ac8306bb82072436b31c353044116", "rec.rs": "5ffb4697e9ac272c3149d39cf5b3637020757a84",
    "s2d.rs": "a0796b4c4800f3f92cbf63c240d31e45921d871c",
}
TRACT_FILES = tuple(Pinned(TRACT, f"onnx/src/ops/{name}", TRACT_COMMIT, blob) for name, blob in _TRACT_BLOBS.items())

# Per runtime, the ops it turns into data before any op table is asked (the profile's ``folded``):
# - ONNX Runtime turns every Constant node (by op type, any domain) into an initializer when it builds the
#   graph (onnxruntime/core/graph/graph.cc, Graph::Graph, "Process 'Constant' nodes", at KERNELS.commit):
#   no kernel table lists Constant, and every target it hosts takes the value.
# - onnx2tf's flatbuffer_direct lowering makes each Constant node a constant tensor before it dispatches
#   the others (onnx2tf/tflite_builder/lower_from_onnx2tf.py, lower_constant_node, at ONNX2TF_COMMIT).
FOLDED = {"onnxruntime": ("*:Constant",), "onnx2tf": ("*:Constant",)}

# The casts portable would apply where a target lacks a type but has its narrower sibling.
NARROWER = (("float64", "float32"), ("int64", "int32"))


@dataclass(frozen=True)
class Built:
    """A parser's result plus what the estimate needs from the usability checker."""

    parsed: Parsed
    fixed_sizes: bool = False
    max_rank: int | None = None


@dataclass(frozen=True)
class Spec:
    """One target: how it runs (portable's modelling) and where its support data comes from."""

    name: str
    title: str
    runtime: str
    fallback: str | None  # where an unsupported node runs; None: the model does not load
    pins: tuple[Pinned, ...]
    build: Callable[[Sequence[str]], Built]
    holds: tuple[str, ...]
    lacks: tuple[str, ...]
    notes: tuple[str, ...] = ()


def _kernels(provider: str) -> Callable[[Sequence[str]], Built]:
    return lambda texts: Built(parsers.ort_kernels(texts[0], provider))


def _mobile(texts: Sequence[str], coreml: bool) -> Built:
    settings = parsers.usability_settings(texts[1])
    rank = settings["coreml_max_rank"] if coreml else None
    return Built(parsers.mobile_ops(texts[0]), fixed_sizes=bool(settings["fixed_sizes"]),
                 max_rank=rank if isinstance(rank, int) else None)


def _qnn(texts: Sequence[str]) -> Built:
    """The EP's builders and type map, with the HTP's measured answers: the kinds of node it refused in every
    probe (checked), the ones it refused in some (notes), and fixed sizes (on a symbolic dim every node fails
    'Cannot get shape')."""
    refused, notes, runtime, taken = parsers.htp_answers(texts[2])
    builders = dict(parsers.qnn_builders(texts[0]).ops)
    newer = sorted(op for op in taken if f"*:{op}" not in builders)  # builders newer than the table's commit
    builders |= {f"*:{op}": OpEntry() for op in newer}
    ops = {key: replace(entry, refused=refused.get(key.split(":", 1)[1], ()), partial=notes.get(key.split(":", 1)[1], ()))
           for key, entry in builders.items()}
    why: tuple[str, ...] = (f"QNN needs every dim fixed, the batch too: on a symbolic one the HTP ({runtime}) refuses "
                            "every node ('Cannot get shape'); a file with a symbolic batch is estimated as it is and "
                            "with the batch fixed",)
    if newer:
        why += (f"Ops the registry's table (at its commit) lacks and the HTP ({runtime}) took in its probes, so "
                f"added: {', '.join(newer)}",)
    return Built(Parsed(ops=ops, element_types=parsers.qnn_element_types(texts[1]), notes=why), fixed_sizes=True)


def _litert(texts: Sequence[str]) -> Built:
    constraints = parsers.onnx2tf_constraints(texts[1])
    ops = {key: OpEntry(notes=constraints.get(key.split(":", 1)[1], "")) for key in parsers.onnx2tf_registry(texts[0]).ops}
    return Built(Parsed(ops=ops, element_types=parsers.onnx2tf_element_types(texts[2])))


_NO_RESTRICTIONS = "restrictions: the table states none (attribute and shape limits live in the kernels' code)"
_CAVEATS = "restrictions: the table's caveats are kept as notes and reported, not checked"

SPECS: dict[str, Spec] = {s.name: s for s in (
    Spec("ort-cpu", "ONNX Runtime, CPU execution provider", "onnxruntime", None, (KERNELS,), _kernels("CPUExecutionProvider"),
         ("ops", "opsets (kernel version ranges)", "types (per type constraint)"), (_NO_RESTRICTIONS,),
         ("The CPU EP is the last resort: a node it has no kernel for fails the session (NOT_IMPLEMENTED).",)),
    Spec("ort-cuda", "ONNX Runtime, CUDA execution provider", "onnxruntime", "CPUExecutionProvider", (KERNELS,),
         _kernels("CUDAExecutionProvider"), ("ops", "opsets (kernel version ranges)", "types (per type constraint)"),
         (_NO_RESTRICTIONS,)),
    Spec("directml", "DirectML (ONNX Runtime's DirectML execution provider)", "onnxruntime", "CPUExecutionProvider",
         (KERNELS,), _kernels("DmlExecutionProvider"),
         ("ops", "opsets (kernel version ranges)", "types (per type constraint)"), (_NO_RESTRICTIONS,),
         ("The DirectML section states every kernel's versions open-ended (13+, then 6+): an op version is taken "
          "from the lowest registered one up, with the types of the first listed range that covers it.",)),
    Spec("webnn", "WebNN (ONNX Runtime Web's WebNN EP)", "onnxruntime", None, (WEBNN,),
         lambda texts: Built(parsers.webnn_ops(texts[0])),
         ("ops", "op versions (ranges per domain)", "constraints (free text)"),
         ("types: the table states none (the browser's WebNN backend decides, per device)", _CAVEATS),
         ("No fallback: the WebNN compiler process has CPU fallback disabled (microsoft/onnxruntime#32625, "
          "#29756), so a node the WebNN EP does not take fails the session.",
          "The table's own words: operator support may vary across platforms "
          "(https://webmachinelearning.github.io/webnn-status/).")),
    Spec("webgpu", "WebGPU (ONNX Runtime's native WebGPU EP, as in ONNX Runtime Web)", "onnxruntime",
         "CPUExecutionProvider", (WEBGPU, WEBGPU_CONTRIB), lambda texts: Built(parsers.webgpu_kernels(texts)),
         ("ops (registered kernels, by domain)", "opsets (kernel version ranges)",
          "types of the typed kernels (Clip, Range: per T)"),
         ("types: the other kernels' type constraints are in each kernel's own file (not read)",
          "restrictions: GetCapability's own checks (com.microsoft Attention with mask_index, past or "
          "past_seq_len inputs or a present output goes to the CPU) and the kernels' are in code"),
         ("A node without a WebGPU kernel falls back to the CPU EP (in ONNX Runtime Web: the WebAssembly "
          "one), a warning; ONNX Runtime also keeps small shape computations on the CPU (GetCpuPreferredNodes), "
          "which the estimate counts on the device.",
          "Not the JSEP table (js/web/docs/webgpu-operators.md): that describes the older JavaScript EP.")),
    Spec("migraphx", "AMD MIGraphX (ONNX Runtime's MIGraphX EP, MIGraphX's ONNX parser)", "onnxruntime",
         "CPUExecutionProvider", (MIGRAPHX,), lambda texts: Built(parsers.migraphx_ops(texts[0])),
         ("ops (supported or not, by op type)", "limitations (free text)", "element types (the data-type sentence)"),
         ("opsets: the table says 'operators up to Opset 19' as a whole, no versions per op (not checked)",
          "per-op types: taken from the ONNX specification, 'an operator might support other additional "
          "datatypes' (the table's note): not checked", _CAVEATS),
         ("ONNX Runtime's MIGraphX EP hands a node it does not take to the CPU EP (a warning); standalone "
          "MIGraphX (migraphx.parse_onnx) has no fallback: an unsupported op fails the parse.",
          "ONNX Runtime's MIGraphX EP also keeps an op list of its own (mgx_supported_ops in "
          "onnxruntime/core/providers/migraphx/migraphx_execution_provider.cc); this profile is MIGraphX's table.")),
    Spec("tensorrt", "TensorRT (ONNX Runtime's TensorRT EP, onnx-tensorrt parser)", "onnxruntime", "CUDAExecutionProvider",
         (TENSORRT,), lambda texts: Built(parsers.tensorrt_ops(texts[0])),
         ("ops (Y/N)", "types of the data input", "restrictions (free text)", "element types", "casts it applies",
          "model opset range"),
         ("opsets per op: one row per op for the whole opset range", _CAVEATS),
         ("Standalone TensorRT (trtexec) has no fallback: an unsupported node fails the build.",)),
    Spec("openvino", "OpenVINO (its ONNX frontend)", "openvino", None, (OPENVINO,),
         lambda texts: Built(parsers.openvino_ops(texts[0])),
         ("ops", "op versions (the versions a translator is registered for)", "limitations (free text)"),
         ("types: the table states no element types (device plugins decide)", _CAVEATS),
         ("An op the frontend does not translate fails read_model: there is no fallback.",)),
    Spec("qnn", "Qualcomm QNN (ONNX Runtime's QNN EP, HTP backend)", "onnxruntime", "CPUExecutionProvider",
         (QNN_BUILDERS, QNN_TYPES, QNN_HTP), _qnn,
         ("ops (registered op builders, by op type)", "element types (the EP's ONNX -> QNN type map)",
          "the HTP's own refusals per kind of node (input 0's element type, or a QDQ unit), measured on one-node "
          "probes (checked; partial refusals as notes)", "fixed sizes (measured: the HTP refuses symbolic dims)"),
         ("opsets: the registry states none",
          "restrictions: each builder checks attributes and asks the QNN backend in code, at session creation; the "
          "probes are ONNX's conformance cases, not every attribute a model may use (--live asks the HTP itself)"),
         ("The HTP's answers are those of onnxruntime-qnn's x86-64 wheel (the HTP simulator and Qualcomm's op "
          "definitions); a device's SoC and QAIRT version decide on the phone.",)),
    Spec("nnapi", "Android NNAPI (ONNX Runtime's NNAPI EP)", "onnxruntime", "CPUExecutionProvider", (NNAPI, CHECKER),
         lambda texts: _mobile(texts, coreml=False), ("ops", "caveats (free text)", "the usability checker's settings"),
         ("opsets and types: the table states none", _CAVEATS)),
    Spec("coreml", "Apple CoreML, ML Program (ONNX Runtime's CoreML EP)", "onnxruntime", "CPUExecutionProvider",
         (COREML, CHECKER), lambda texts: _mobile(texts, coreml=True),
         ("ops", "caveats (free text)", "the usability checker's settings (rank limit)"),
         ("opsets and types: the table states none", _CAVEATS),
         ("The NeuralNetwork format has its own table (coreml_supported_neuralnetwork_ops.md): not profiled.",)),
    Spec("litert", "LiteRT (TFLite), converted by onnx2tf's flatbuffer_direct backend", "onnx2tf", None,
         (ONNX2TF_REGISTRY, ONNX2TF_README, ONNX2TF_TYPES), _litert,
         ("ops (the converter's dispatch registry, by op type)", "key constraints (free text, the README's builtin table)",
          "element types (the converter's ONNX -> TFLite type map)"),
         ("opsets: the registry states none",
          "restrictions: each entry's ValidationSpec and validator check ranks and attributes in code; the README's "
          "constraints are reported, not checked",
          "the ops the converter's preprocessing rewrites before dispatch are judged as the file has them",
          "custom-op candidates (--flatbuffer_direct_allow_custom_ops, opt-in) are not profiled"),
         ("No fallback: 'If direct export fails, conversion stops with an explicit error' (the README): a node "
          "the registry lacks fails the conversion.",
          "This is what the converter produces; the LiteRT interpreter's delegates (GPU, NNAPI, XNNPACK) are not profiled.")),
    Spec("tract", "tract (Sonos), its ONNX loader", "tract", None, TRACT_FILES,
         lambda texts: Built(parsers.tract_registry(texts)),
         ("ops (registered by op type)",), ("opsets, types and restrictions: the registry states none",),
         ("An op tract has no builder for fails the load: there is no fallback.",)),
)}


def _preferred(parsed: Parsed) -> tuple[tuple[str, str], ...]:
    """The casts the sources state, then those their element type list implies (a type absent, its
    narrower sibling present)."""
    found = dict(parsed.prefer)
    types = set(parsed.element_types or ())
    for wide, narrow in NARROWER:
        if parsed.element_types is not None and wide not in types and narrow in types:
            found.setdefault(wide, narrow)
    return tuple(sorted(found.items()))


def generate(name: str, override: Path | None = None) -> Profile:
    """The profile of target ``name`` from its sources (``SourceMissing`` when one is not here)."""
    spec = SPECS[name]
    if override is not None and len(spec.pins) != 1:
        raise SourceMissing(f"{name} has {len(spec.pins)} source files: --source takes a target with one")
    read_in = [read(pin, override) for pin in spec.pins]
    built = spec.build([text for text, _ in read_in])
    parsed = built.parsed
    sources: tuple[Source, ...] = tuple(source for _, source in read_in)
    return Profile(name=spec.name, title=spec.title, runtime=spec.runtime, fallback=spec.fallback, sources=sources,
                   holds=spec.holds, lacks=spec.lacks, notes=spec.notes + parsed.notes, opset_range=parsed.opset_range,
                   element_types=parsed.element_types, prefer=_preferred(parsed), fixed_sizes=built.fixed_sizes,
                   max_rank=built.max_rank, expands_functions=spec.runtime == "onnxruntime", ops=dict(parsed.ops),
                   folded=FOLDED.get(spec.runtime, ()))


def _one(name: str, override: Path | None, check: bool) -> int:
    try:
        text = generate(name, override).to_json()
    except SourceMissing as exc:
        print(f"{name}: skipped: {exc}", file=sys.stderr)
        return 0
    path = profile_path(name)
    if check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print(f"{name}: {'up to date' if same else 'DIFFERS from its sources'}", file=sys.stderr)
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    print(f"{name}: wrote {path}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"targets (default: all): {', '.join(SPECS)}")
    parser.add_argument("--source", type=Path, default=None, help="read this file instead of the pinned one")
    parser.add_argument("--check", action="store_true", help="compare with the committed profiles; write nothing")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in SPECS]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)} (known: {', '.join(SPECS)})")
    return max((_one(name, args.source, args.check) for name in args.names or SPECS), default=0)


if __name__ == "__main__":
    sys.exit(main())
