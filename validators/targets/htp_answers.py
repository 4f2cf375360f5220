"""The QNN HTP's own answers, op by op: a source of the ``qnn`` profile that portable measures itself.

    python -m portable.validators.targets.htp_answers [--out FILE] [--per-op N] [--ops Op,Op]

ONNX Runtime's QNN op-builder registry (the profile's table) says which ops the QNN EP has a builder for; it does
not say which the HTP backend then accepts. The HTP says so itself: onnxruntime-qnn's wheel ships Qualcomm's HTP
backend, whose op validation and graph prepare run on x86-64. This script asks it (through the same live check
as ``validate --target qnn --live``, :func:`portable.validators.targets.htp.ask_htp`) about one-node models:

- ONNX's own conformance cases (``onnx.backend.test.case.node``, the onnx wheel's), one node each, every input
  but the first made an initializer with the case's values (as weights, shapes and axes are in real models; the
  QNN EP wants them constant), optional outputs past the first unset, at most ``--per-op`` cases per op and
  element type, those with the fewest attributes first; run on the case's inputs;
- each float32 case once more as a QDQ node unit (uint8 activations, int8 initializers, scales from the case's
  values), as ``portable quantize`` writes it, since the HTP takes several ops in fixed point only (Asin).

An op refused in every probe of a kind is refused for that kind (the profile checks it); one refused in some
probes only (an attribute, a mode) gets a note, not a refusal.

Per op and kind (the element type of input 0, or ``quantized``) it records how many cases the HTP took and
refused, with its reason for the first refusal. The answers are written to
``validators/targets/measured/qnn-htp.json`` (committed: the generator reads it like any pinned source, by its
git blob id, and ``docs/targets.md`` says how to regenerate it). Each case runs in a worker process, so a
crash of the simulator is an answer ("crashed"), not the end of the run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

__all__ = ["ANSWERS", "PROBE", "main", "probes", "qdq_unit"]

ANSWERS = Path(__file__).parent / "measured" / "qnn-htp.json"
FORMAT = 1
PROBE = "probe"  # the probed node's name


def _one_node(case: Any, ops: set[str]) -> Any:
    """The case's one node (Constant nodes aside), when it is of an op in ``ops``; else None."""
    nodes = [n for n in case.model.graph.node if n.op_type != "Constant"]
    if len(nodes) != 1 or nodes[0].op_type not in ops or nodes[0].domain not in ("", "ai.onnx"):
        return None
    return nodes[0]


def _constant_inputs(case: Any) -> tuple[bytes, dict[str, Any]] | None:
    """The case's model with every graph input but the first an initializer of the case's values; the first
    input's value as the run's feed. None for a case without data or with a non-tensor input."""
    import onnx

    if not case.data_sets:
        return None
    import numpy as np

    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph, (inputs, _outputs) = model.graph, case.data_sets[0]
    if not graph.input or len(inputs) != len(graph.input) or not all(v.type.HasField("tensor_type") for v in graph.input) \
            or not all(isinstance(v, np.ndarray) for v in inputs):
        return None  # a case without inputs (EyeLike of a constant...), or with sequences
    for value, data in list(zip(graph.input, inputs, strict=True))[1:]:
        graph.initializer.append(onnx.numpy_helper.from_array(data, value.name))
    first = graph.input[0]
    del graph.input[1:]
    for node in graph.node:
        if node.op_type != "Constant":
            node.name = PROBE
            _drop_optional_outputs(node, graph)
    return model.SerializeToString(), {first.name: inputs[0]}


def _drop_optional_outputs(node: Any, graph: Any) -> None:
    """The node's optional outputs past the first left unset (LayerNormalization's mean and inverse deviation,
    BatchNormalization's running statistics): a model seldom reads them, and the QNN EP refuses a node that
    has them ("QNN LayerNorm only support 1 output"), which says nothing about the op."""
    import onnx

    try:
        schema = onnx.defs.get_schema(node.op_type, 99, node.domain)
    except onnx.defs.SchemaError:
        return
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    dropped = {name for k, name in enumerate(node.output)
               if k > 0 and k < len(schema.outputs) and schema.outputs[k].option == optional}
    if dropped:
        node.output[:] = [o for o in node.output if o not in dropped]
        kept = [v for v in graph.output if v.name not in dropped]
        del graph.output[:]
        graph.output.extend(kept)


def _scale(values: Any) -> float:
    import numpy as np

    peak = float(np.max(np.abs(values))) if values.size else 1.0
    return max(peak, 1e-3) / 127.0


def qdq_unit(model_bytes: bytes, feeds: dict[str, Any], outputs: Sequence[Any]) -> bytes | None:
    """The one-node model as a QDQ node unit: the float input through Q -> DQ (uint8), float initializers as int8
    through DQ, the outputs through Q -> DQ. None when the node has no float input or an output that is not float
    (IsNaN's bool: no QDQ unit then, as ``ModelFacts.kind`` sees it)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load_model_from_string(model_bytes)
    graph = model.graph
    op = next(n for n in graph.node if n.name == PROBE)
    data = _data_inputs(op, model.opset_import[0].version)
    values = {**feeds, **{t.name: numpy_helper.to_array(t) for t in graph.initializer if t.name in data}}
    floats = [name for name, v in values.items() if np.asarray(v).dtype == np.float32]
    if not floats or any(v.type.tensor_type.elem_type != TensorProto.FLOAT for v in graph.output):
        return None  # a QDQ unit quantizes every output
    pre, post, inits = [], [], [t for t in graph.initializer if t.name not in floats]
    for name in floats:
        scale = _scale(np.asarray(values[name]))
        inits.append(numpy_helper.from_array(np.array(scale, np.float32), f"{name}_s"))
        if name in feeds:
            inits.append(numpy_helper.from_array(np.array(128, np.uint8), f"{name}_z"))
            pre += [helper.make_node("QuantizeLinear", [name, f"{name}_s", f"{name}_z"], [f"{name}_q"], name=f"{name}_Q"),
                    helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [f"{name}_dq"])]
        else:
            q = np.clip(np.round(np.asarray(values[name]) / scale), -127, 127).astype(np.int8)
            inits.append(numpy_helper.from_array(q, f"{name}_q"))
            pre.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s"], [f"{name}_dq"]))
    op.input[:] = [f"{i}_dq" if i in floats else i for i in op.input]
    for k, value in enumerate(graph.output):
        if value.type.tensor_type.elem_type != TensorProto.FLOAT or k >= len(outputs):
            continue
        name, scale = value.name, _scale(np.asarray(outputs[k]))
        inits += [numpy_helper.from_array(np.array(scale, np.float32), f"{name}_os"),
                  numpy_helper.from_array(np.array(128, np.uint8), f"{name}_oz")]
        op.output[k] = f"{name}_raw"
        post += [helper.make_node("QuantizeLinear", [f"{name}_raw", f"{name}_os", f"{name}_oz"], [f"{name}_oq"]),
                 helper.make_node("DequantizeLinear", [f"{name}_oq", f"{name}_os", f"{name}_oz"], [name])]
    constants = [n for n in graph.node if n.op_type == "Constant"]
    new = helper.make_graph([*constants, *pre, op, *post], "qdq", list(graph.input), list(graph.output), inits)
    # Q/DQ at opset 21 (int8/uint8 kernels in every ONNX Runtime the plugin takes), the op at the case's version
    out = helper.make_model(new, opset_imports=[helper.make_opsetid("", max(21, min(model.opset_import[0].version, 23)))])
    out.ir_version = max(model.ir_version, 10)
    try:  # the op's output shape declared, as quantize's pre-processing declares it (the EP reads it)
        out = onnx.shape_inference.infer_shapes(out, strict_mode=True, data_prop=True)
    except Exception:  # noqa: BLE001 - an op ONNX cannot infer here: no QDQ probe of it
        return None
    return out.SerializeToString()


def _data_inputs(node: Any, opset: int) -> set[str]:
    """The node's inputs of input 0's type constraint (the data, and weights such as Conv's W): those a quantizer
    puts through Q/DQ; the others (Resize's scales, BatchNormalization's statistics) stay float initializers."""
    import onnx

    try:
        formal = onnx.defs.get_schema(node.op_type, opset, node.domain).inputs
    except onnx.defs.SchemaError:
        return set(node.input[:1])
    kinds = [formal[min(k, len(formal) - 1)].type_str for k in range(len(node.input))] if formal else []
    return {name for name, kind in zip(node.input, kinds, strict=False) if name and kinds and kind == kinds[0]}


def _kind(model: bytes) -> str:
    """The element type of the graph's (first) input, as ONNX names it (``float32``, ``bfloat16``...)."""
    import onnx

    from portable.policy import dtype_name

    return dtype_name(onnx.load_model_from_string(model).graph.input[0].type.tensor_type.elem_type)


def _plainest(case: Any) -> tuple[int, int, str]:
    """Cases with the fewest attributes and inputs first: the op as models mostly use it."""
    node = next(n for n in case.model.graph.node if n.op_type != "Constant")
    return len(node.attribute), len(node.input), case.name


def probes(ops: set[str], per_op: int) -> Iterator[tuple[str, str, str, bytes, dict[str, Any]]]:
    """(op, kind, case name, model bytes, feeds) per probe: at most ``per_op`` conformance cases per op and
    element type of input 0, the plainest first, and each float32 one once more as a QDQ unit."""
    from onnx.backend.test.case.node import collect_testcases

    taken: dict[tuple[str, str], int] = defaultdict(int)
    cases = [c for c in collect_testcases(None) if _one_node(c, ops) is not None]
    for case in sorted(cases, key=_plainest):
        op, built = _one_node(case, ops).op_type, _constant_inputs(case)
        if built is None:
            continue
        model, feeds = built
        kind = _kind(model)
        if taken[op, kind] >= per_op:
            continue
        taken[op, kind] += 1
        yield op, kind, case.name, model, feeds
        expected = case.data_sets[0][1] if case.data_sets else ()  # _constant_inputs took only cases with data
        qdq = qdq_unit(model, feeds, expected) if kind == "float32" else None
        if qdq is not None:
            yield op, "quantized", f"{case.name} (QDQ)", qdq, feeds


# ONNX Runtime's own refusals of a probe (no CPU kernel for a node left to it, its shape inference): they say
# nothing about the HTP, and the probe counts as neither taken nor refused
NOT_THE_HTP = re.compile(r"Could not find an implementation|ShapeInferenceError|INVALID_GRAPH : This is an invalid model")


def _ask(model: bytes, feeds: dict[str, Any]) -> tuple[bool | None, str]:
    """(taken, why not) for the probed node, in this worker process; taken None: the probe says nothing."""
    from portable.validators.targets.htp import ask_htp

    answer = ask_htp(model, (), feeds=lambda _session: feeds)
    node = next((n for n in answer.nodes if n.node == PROBE), None)
    if answer.compiled and NOT_THE_HTP.search(answer.compiled) and (node is None or node.taken):
        return None, f"ONNX Runtime, not the HTP: {answer.compiled}"
    if answer.compiled:
        return False, f"the graph does not compile: {answer.compiled}"
    if node is None:
        return False, "not in the EP's node-support log"
    if not node.taken:
        return False, node.reason
    if answer.ran.startswith("a run fails"):
        return False, answer.ran
    return True, ""


def _answers(found: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    from portable.validators.targets.htp import htp_version

    ops: dict[str, dict[str, Any]] = defaultdict(dict)
    for (op, kind), record in sorted(found.items()):
        ops[op][kind] = record
    return {"format": FORMAT, "generated_by": "python -m portable.validators.targets.htp_answers",
            "runtime": htp_version(), "probes": "ONNX's conformance cases (onnx.backend.test.case.node) of one node, "
            "inputs past the first as initializers; one QDQ unit per op (uint8 activations, int8 initializers)",
            "ops": dict(sorted(ops.items()))}


def _record(found: dict[tuple[str, str], dict[str, Any]], op: str, kind: str, case: str,
            verdict: tuple[bool | None, str]) -> None:
    record = found.setdefault((op, kind), {"taken": 0, "refused": 0})
    if verdict[0] is None:
        record["inconclusive"] = record.get("inconclusive", 0) + 1
    elif verdict[0]:
        record["taken"] += 1
    else:
        record["refused"] += 1
        record.setdefault("reason", verdict[1][:300])
        record.setdefault("case", case)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ANSWERS)
    parser.add_argument("--per-op", type=int, default=4, help="conformance cases per op and element type (default 4)")
    parser.add_argument("--ops", default="", help="only these ops (comma-separated; default: the qnn profile's); "
                                                  "the other ops' answers in --out are kept")
    args = parser.parse_args(argv)
    from portable.validators.targets.profile import load_profile

    ops = set(args.ops.split(",")) if args.ops else {k.split(":", 1)[1] for k in load_profile("qnn").ops}
    found: dict[tuple[str, str], dict[str, Any]] = {}
    if args.ops and args.out.is_file():  # asked again about some ops: the others' answers kept
        kept = json.loads(args.out.read_text(encoding="utf-8"))["ops"]
        found = {(op, kind): r for op, kinds in kept.items() if op not in ops for kind, r in kinds.items()}
    pool = ProcessPoolExecutor(max_workers=1, max_tasks_per_child=200)
    for count, (op, kind, case, model, feeds) in enumerate(probes(ops, args.per_op), 1):
        try:
            verdict = pool.submit(_ask, model, feeds).result(timeout=300)
        except BrokenProcessPool:
            pool = ProcessPoolExecutor(max_workers=1, max_tasks_per_child=200)
            verdict = (False, "the HTP simulator crashed")
        except TimeoutError:
            verdict = (False, "no answer in 300 s")
        _record(found, op, kind, case, verdict)
        said = "taken" if verdict[0] else "inconclusive" if verdict[0] is None else "refused"
        print(f"{count:4d} {op} {kind} {case}: {said} {verdict[1][:120]}", file=sys.stderr)
    pool.shutdown()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(_answers(found), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
