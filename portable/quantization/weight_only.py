"""Weight-only int8 for a text-generation pair (``portable quantize NAME.textgen.json -o NAME-w8 --weight-only``).

A portable pair carries every weight inline under 2 GiB, so a float32 pair stops at about 500M parameters.
Weight-only int8 keeps the graphs' arithmetic float and stores the large weights as int8 behind a
per-channel ``DequantizeLinear`` (opset 18, default domain; ONNX Runtime folds it into a float initializer
when it loads the graph, so the file is 4x smaller and the step's speed is the float pair's): a MatMul's
``B`` ``[K, N]`` per output column (axis 1), a Gather's table ``[V, D]`` per row (axis 0), and a table that
a Transpose hands to a MatMul (tied embeddings: the head is the embedding transposed) per row as well, so one
int8 copy serves both. Scales are symmetric: ``max |w| / 127`` per channel, zero point 0. What a portable file
cannot express: int4 (``MatMulNBits`` is com.microsoft; blocked int4 ``DequantizeLinear`` needs opset 21).

The pair is judged against the float model by budgets, not by identity (``compare --task text-generation
--text FILE``: teacher-forced top-1 agreement and perplexity ratio); the manifest says it is weight-only and
carries the float pair's weights fingerprint beside its own. The tokenizer the float pair recorded
(``NAME.hf/``, written by an export from a model folder) is copied beside the int8 pair as its own
``NAME-w8.hf/``, moved with it all or nothing, so the int8 pair travels with its tokenizer as the float one does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from portable.errors import FindingsError, InputError, UsageError

if TYPE_CHECKING:
    from portable.hf.assets import Recorded

__all__ = ["MIN_ELEMENTS", "WeightOnlyInt8Pass", "WeightOnlyResult", "quantize_pair"]

MIN_ELEMENTS = 4096  # smaller weights (norms, biases, rotary tables) stay float: they cost nothing
_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16})


def _axis(value: ir.Value) -> int | None:
    """The channel axis every consumer of ``value`` agrees on, or None (leave it float)."""
    axes = set()
    for node, index in value.uses():
        if node.op_type == "MatMul" and index == 1:
            axes.add(1)
        elif node.op_type == "Gather" and index == 0 and node.attributes.get_int("axis", 0) == 0:
            axes.add(0)
        elif node.op_type == "Transpose" and _feeds_matmul_b(node):
            axes.add(0)
        else:
            return None
    return axes.pop() if len(axes) == 1 else None


def _feeds_matmul_b(node: ir.Node) -> bool:
    perm = node.attributes.get_ints("perm", None)
    return list(perm or []) == [1, 0] and all(n.op_type == "MatMul" and i == 1 for n, i in node.outputs[0].uses())


class WeightOnlyInt8Pass(ir.passes.InPlacePass):
    """Each large 2-D float initializer that MatMul (``B``) or Gather (its table) reads: int8, per channel."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        chosen = [(v, _axis(v)) for v in list(graph.initializers.values()) if self._eligible(v)]
        for value, axis in chosen:
            if axis is not None:
                self._quantize(graph, value, axis)
        return ir.passes.PassResult(model, modified=any(axis is not None for _, axis in chosen))

    @staticmethod
    def _eligible(value: ir.Value) -> bool:
        tensor = value.const_value
        return (tensor is not None and tensor.dtype in _FLOATS and len(tensor.shape) == 2
                and tensor.size >= MIN_ELEMENTS and not value.is_graph_input())

    @staticmethod
    def _quantize(graph: ir.Graph, value: ir.Value, axis: int) -> None:
        assert value.const_value is not None and value.name is not None
        weights = value.const_value.numpy().astype(np.float32)
        peak = np.abs(weights).max(axis=1 - axis)
        # float32 scales whatever the weights' type: opset 18's DequantizeLinear outputs float32 only (a float16
        # scale needs opset 19, PORT011), so a float16 weight is the float32 dequantized one Cast to float16
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        shape = (1, -1) if axis == 1 else (-1, 1)
        q = np.clip(np.rint(weights / scale.reshape(shape)), -127, 127).astype(np.int8)
        name, dtype = value.name, value.const_value.dtype
        q_value = ir.Value(name=f"{name}_int8", const_value=ir.tensor(q, name=f"{name}_int8"))
        s_value = ir.Value(name=f"{name}_scale", const_value=ir.tensor(scale, name=f"{name}_scale"))
        nodes = [ir.node("DequantizeLinear", [q_value, s_value], attributes={"axis": axis}, name=f"{name}_dequantize")]
        if dtype != ir.DataType.FLOAT:
            nodes.append(ir.node("Cast", [nodes[0].outputs[0]], attributes={"to": dtype}, name=f"{name}_cast"))
            nodes[0].outputs[0].name, nodes[0].outputs[0].dtype = f"{name}_dequantized", ir.DataType.FLOAT
        graph.register_initializer(q_value)
        graph.register_initializer(s_value)
        for node in reversed(nodes):
            graph.insert_before(graph.node(0), node)
        ir.convenience.replace_all_uses_with(value, nodes[-1].outputs[0])
        graph.initializers.pop(name)
        nodes[-1].outputs[0].name = name
        nodes[-1].outputs[0].dtype, nodes[-1].outputs[0].shape = dtype, ir.Shape(weights.shape)


@dataclass(frozen=True)
class WeightOnlyResult:
    """The written pair: its files, sizes before and after, what became int8."""

    manifest: Path
    files: tuple[Path, Path]
    bytes_before: int
    bytes_after: int
    quantized: int  # initializers per graph stored as int8
    weights_fingerprint: str
    source_fingerprint: str

    def to_dict(self) -> dict[str, Any]:
        return {"manifest": str(self.manifest), "files": [str(f) for f in self.files], "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "quantized_initializers": self.quantized,
                "weights_fingerprint": self.weights_fingerprint, "source_weights_fingerprint": self.source_fingerprint}


def _graph(path: Path, staged: Path) -> int:
    """One graph through the pass into ``staged``; how many initializers became int8."""
    model = ir.load(path)
    before = len(model.graph.initializers)
    WeightOnlyInt8Pass()(model)
    ir.save(model, staged)
    return len(model.graph.initializers) - before  # each weight: one int8 and one scale in, one float out


def quantize_pair(manifest: str | Path, output: str | Path, *, force: bool = False) -> WeightOnlyResult:
    """The weight-only int8 pair of the float pair ``manifest`` (``NAME.textgen.json``) at ``output``
    (``NAME-w8``), validated like every export (each graph's rules and the pair rules); all or nothing."""
    from portable.exporters.textgen_write import PairTargets, staging, write_pair
    from portable.hf.assets import copy_recorded
    from portable.runners.generation import PairFiles

    source = Path(manifest)
    if not source.name.endswith(".textgen.json"):
        raise UsageError(f"{source}: --weight-only takes a text-generation pair's manifest (NAME.textgen.json)")
    files, content = PairFiles.find(source), json.loads(source.read_text())
    if content.get("quantization"):
        raise UsageError(f"{source}: this pair is quantized already ({content['quantization'].get('weights')})")
    targets = PairTargets.of(output)
    targets.check(force)
    tokenizer = _recorded_tokenizer(source, content)
    beside = targets.tokenizer(force) if tokenizer is not None else None
    with staging(targets) as folder:
        staged = (folder / targets.prefill.name, folder / targets.decode.name)
        counts = {_graph(src, dst) for src, dst in zip((files.prefill, files.decode), staged)}
        fingerprint = _validated(staged, content)
        written = _manifest(content, targets, fingerprint, source)
        moves = list(zip(staged, (targets.prefill, targets.decode)))
        if tokenizer is not None and beside is not None:
            (folder / "tokenizer").mkdir()
            written["preprocessing"] = copy_recorded(tokenizer, folder / "tokenizer", beside.name)
            moves.append((folder / "tokenizer", beside))
        write_pair(moves, targets.manifest, written, force)
    return WeightOnlyResult(targets.manifest, (targets.prefill, targets.decode),
                            sum(f.stat().st_size for f in (files.prefill, files.decode)),
                            sum(f.stat().st_size for f in (targets.prefill, targets.decode)),
                            max(counts), fingerprint, str(content.get("weights_fingerprint")))


def _recorded_tokenizer(source: Path, content: dict[str, Any]) -> Recorded | None:
    """The float pair's tokenizer folder its manifest records (None: it records none); refused when gone."""
    from portable.hf.assets import Recorded

    record = content.get("preprocessing")
    if not isinstance(record, dict) or not record.get("folder"):
        return None
    folder = source.parent / str(record["folder"])
    if not folder.is_dir():
        raise InputError(f"the manifest records the tokenizer in {folder.name}/, which is not there: put it back "
                         "beside the pair, or export the pair again", path=str(source))
    return Recorded(folder, record, source)


def _validated(staged: tuple[Path, Path], content: dict[str, Any]) -> str:
    """Each graph's rules and the pair rules on the staged files (an error finding refuses the pair); the
    shared weights' fingerprint."""
    from portable.policy import Policy
    from portable.validators import validate
    from portable.validators.pairs import PAIR_RULES
    from portable.validators.pairs.engine import validate_pair

    policy = Policy()
    reports = [validate(str(path), policy) for path in staged]
    pair = validate_pair(staged[0], staged[1], policy.with_(select=tuple(r.id for r in PAIR_RULES)),
                         context=content.get("context"))
    for report in (*reports, *pair):
        if not report.ok:
            raise FindingsError(f"the weight-only pair fails {report.failing()[0].rule_id}: {report.failing()[0].message}",
                                path=report.path)
    return str(pair[0].model["weights_fingerprint"])


def _manifest(content: dict[str, Any], targets: Any, fingerprint: str, source: Path) -> dict[str, Any]:
    graphs = {role: {**entry, "file": getattr(targets, role).name} for role, entry in content["graphs"].items()}
    return {**content, "graphs": graphs, "weights_fingerprint": fingerprint, "proof": None,
            "quantization": {"weights": "int8", "per_channel": True, "symmetric": True, "activations": "float",
                             "min_elements": MIN_ELEMENTS, "source": str(source),
                             "source_weights_fingerprint": content.get("weights_fingerprint"),
                             "judge": "portable compare NAME.textgen.json --reference SPEC --task text-generation "
                                      "--text FILE (teacher-forced budgets)"}}
