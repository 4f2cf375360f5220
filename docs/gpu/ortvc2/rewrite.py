"""Default-domain (ai.onnx, opset 18) rewrites of a `portable export` file, one lever at a time (issue 33).

    python3 docs/gpu/ortvc2/rewrite.py IN.onnx OUT.onnx LEVER[+LEVER...]
    python3 docs/gpu/ortvc2/rewrite.py --parity ORIG.onnx NEW.onnx [--batch 2]   # ORT CPU, seeded inputs
    python3 docs/gpu/ortvc2/rewrite.py --ops FILE.onnx [--ep cpu|cuda]          # op counts before/after ORT's passes

Levers (applied left to right; `layerscale` first when combined):
- ``gemm``: MatMul(x[..., K], W[K, N] constant) [+ Add(b[N] constant)] -> Reshape(x, [-1, K]),
  Gemm(x2, W^T[N, K], b, transB=1), Reshape back to [-1, ...]. Same products, same sums; the GEMM kernel
  (and its summation order) may differ, so within fp32 rounding.
- ``gemm-nobias``: the same Gemm without C; the bias Add stays (so ORT's BiasGelu fusion stays).
- ``gemm-keepgelu``: ``gemm``, except where the bias Add feeds the exact GELU (ORT fuses Add+Gelu into BiasGelu):
  there the Gemm takes no C.
- ``layerscale``: MatMul(x, W) + b [-> Transpose] -> Mul(gamma per channel) becomes MatMul(x, W*gamma) + b*gamma
  (ConvNeXt's layer scale; one rounding of W*gamma instead of one of the product: fp32 rounding level).
- ``scalarfold``: the same for a scalar Mul behind Reshape/Transpose of a Split output of MatMul+Add (BERT's
  sdpa scale 64**-0.25 on q and on k).
- ``idgather``: ConvNeXt's head's identity Gather (Range/Mul/Unsqueeze/Add indices into the flattened pooled
  tensor) removed: exact. Lets ORT's NHWC layout (prefer_nhwc=1) keep every node on CUDA, so CUDA graphs work.
"""

from __future__ import annotations

import argparse
import collections
import sys

import numpy as np
import onnx_ir as ir

GELU_OPS = ("Div", "Erf", "Gelu")


def _const(value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    tensor = ir.convenience.get_const_tensor(value)
    return None if tensor is None else tensor.numpy()


def _initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    base, k = name, 0
    while name in graph.initializers:
        k += 1
        name = f"{base}_{k}"
    value = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                     const_value=ir.tensor(array, name=name))
    graph.register_initializer(value)
    return value


def _only_use(value: ir.Value) -> ir.Node | None:
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return None
    return uses[0][0]


def _bias_add(y: ir.Value, n: int) -> tuple[ir.Node, np.ndarray] | None:
    user = _only_use(y)
    if user is None or user.op_type != "Add" or user.domain not in ("", "ai.onnx"):
        return None
    other = user.inputs[1] if user.inputs[0] is y else user.inputs[0]
    b = _const(other)
    if b is None or b.size != n or (b.ndim > 1 and b.shape[-1] != n):
        return None
    return user, b.reshape(n)


def _feeds_gelu(value: ir.Value) -> bool:
    return any(use[0].op_type in GELU_OPS for use in value.uses())


def _drop_unused_initializers(graph: ir.Graph) -> None:
    for name in [n for n, v in graph.initializers.items() if not v.uses() and not v.is_graph_output()]:
        del graph.initializers[name]


def gemm(model: ir.Model, bias: str) -> int:
    """bias: 'into' (Gemm's C), 'keep' (separate Add), 'keepgelu' (separate where the Add feeds GELU)."""
    graph, count = model.graph, 0
    for node in list(graph):
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx"):
            continue
        x, w = node.inputs
        weight = _const(w)
        if weight is None or weight.ndim != 2 or weight.dtype != np.float32 or x.shape is None or len(x.shape) < 2:
            continue
        k, n = weight.shape
        y = node.outputs[0]
        found = _bias_add(y, n) if bias != "keep" else None
        if found is not None and bias == "keepgelu" and _feeds_gelu(found[0].outputs[0]):
            found = None
        last = found[0].outputs[0] if found else y
        rank = len(x.shape)
        if last.shape is None or any(not isinstance(d, int) for d in list(last.shape)[1:]):
            continue
        new_nodes: list[ir.Node] = []
        if rank > 2:
            to2d = ir.node("Reshape", [x, _initializer(graph, f"{node.name}_2d", np.array([-1, k], np.int64))])
            new_nodes.append(to2d)
            a = to2d.outputs[0]
        else:
            a = x
        inputs = [a, _initializer(graph, f"{w.name}_t", np.ascontiguousarray(weight.T))]
        if found:
            inputs.append(_initializer(graph, f"{node.name}_bias", found[1]))
        g = ir.node("Gemm", inputs, attributes={"transB": 1}, name=f"{node.name}_gemm")
        new_nodes.append(g)
        out = g.outputs[0]
        if rank > 2:
            back = ir.node("Reshape", [out, _initializer(graph, f"{node.name}_nd",
                                                         np.array([-1, *list(last.shape)[1:]], np.int64))])
            new_nodes.append(back)
            out = back.outputs[0]
        out.shape, out.type = last.shape, last.type
        old = [node, found[0]] if found else [node]
        ir.convenience.replace_nodes_and_values(graph, node, old, new_nodes, [last], [out])
        count += 1
    _drop_unused_initializers(graph)
    return count


def layerscale(model: ir.Model) -> int:
    """MatMul(x, W) -> Add(b) [-> Transpose(perm)] -> Mul(gamma): fold gamma into W and b."""
    graph, count = model.graph, 0
    for mul in list(graph):
        if mul.op_type != "Mul":
            continue
        for i in (0, 1):
            gamma, v = _const(mul.inputs[i]), mul.inputs[1 - i]
            if gamma is not None and v is not None and v.producer() is not None:
                break
        else:
            continue
        src = v.producer()
        axis_map = None
        if src.op_type == "Transpose" and _only_use(v) is mul:
            perm = list(src.attributes["perm"].value)
            add_out = src.inputs[0]
            add = add_out.producer()
            axis_map = perm
        else:
            add, add_out = src, v
        if add is None or add.op_type != "Add" or _only_use(add_out) is not (src if axis_map else mul):
            continue
        mm_out = next((t for t in add.inputs if t.producer() is not None and t.producer().op_type == "MatMul"), None)
        if mm_out is None or _only_use(mm_out) is not add:
            continue
        mm = mm_out.producer()
        weight, b_val = _const(mm.inputs[1]), next(t for t in add.inputs if t is not mm_out)
        bias = _const(b_val)
        if weight is None or bias is None or weight.ndim != 2 or v.shape is None:
            continue
        n, rank = weight.shape[1], len(v.shape)
        if bias.size != n or gamma.ndim > rank:
            continue
        dims = (1,) * (rank - gamma.ndim) + gamma.shape
        channel_axis = (axis_map.index(rank - 1) if axis_map else rank - 1)
        if any(d != 1 for a, d in enumerate(dims) if a != channel_axis) or dims[channel_axis] not in (1, n):
            continue
        factors = np.broadcast_to(gamma.reshape(-1), (n,)).astype(np.float32)
        mm.replace_input_with(1, _initializer(graph, f"{mm.inputs[1].name}_ls", weight * factors[None, :]))
        add.replace_input_with(list(add.inputs).index(b_val),
                               _initializer(graph, f"{b_val.name}_ls", (bias.reshape(n) * factors).astype(np.float32)))
        out = mul.outputs[0]
        ir.convenience.replace_nodes_and_values(graph, mul, [mul], [], [out], [v])
        count += 1
    _drop_unused_initializers(graph)
    return count


SHAPE_OPS = ("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten")


def scalarfold(model: ir.Model) -> int:
    """Mul(s scalar constant) after shape-only ops (Reshape/Transpose) of [Split output of] Add(b) of MatMul(x, W):
    fold s into W's columns and b's entries of that output (BERT's sdpa scale on q and k)."""
    graph, count = model.graph, 0
    for mul in list(graph):
        if mul.op_type != "Mul":
            continue
        for i in (0, 1):
            s, v = _const(mul.inputs[i]), mul.inputs[1 - i]
            if s is not None and s.size == 1 and s.dtype == np.float32 and v is not None and v.producer() is not None:
                break
        else:
            continue
        cur, user, ok = v, mul, True
        while cur.producer() is not None and cur.producer().op_type in SHAPE_OPS:
            if _only_use(cur) is not user:
                ok = False
                break
            user, cur = cur.producer(), cur.producer().inputs[0]
        if not ok or _only_use(cur) is not user or cur.producer() is None:
            continue
        lo = hi = None
        node = cur.producer()
        if node.op_type == "Split":
            sizes = _const(node.inputs[1]) if len(node.inputs) > 1 else None
            axis = node.attributes["axis"].value if "axis" in node.attributes else 0
            if sizes is None or node.inputs[0].shape is None or axis not in (-1, len(node.inputs[0].shape) - 1):
                continue
            index = list(node.outputs).index(cur)
            lo, hi = int(sizes[:index].sum()), int(sizes[: index + 1].sum())
            cur = node.inputs[0]
            if _only_use(cur) is not node:
                continue
            node = cur.producer()
        if node is None or node.op_type != "Add":
            continue
        add = node
        mm_out = next((t for t in add.inputs if t.producer() is not None and t.producer().op_type == "MatMul"), None)
        if mm_out is None or _only_use(mm_out) is not add:
            continue
        mm = mm_out.producer()
        b_val = next(t for t in add.inputs if t is not mm_out)
        weight, bias = _const(mm.inputs[1]), _const(b_val)
        if weight is None or bias is None or weight.ndim != 2 or bias.size != weight.shape[1]:
            continue
        lo, hi = (0, weight.shape[1]) if lo is None else (lo, hi)
        weight, bias = weight.copy(), bias.reshape(-1).copy()
        factor = np.float32(s.reshape(-1)[0])
        weight[:, lo:hi] *= factor
        bias[lo:hi] *= factor
        mm.replace_input_with(1, _initializer(graph, f"{mm.inputs[1].name}_sf", weight))
        add.replace_input_with(list(add.inputs).index(b_val), _initializer(graph, f"{b_val.name}_sf", bias))
        ir.convenience.replace_nodes_and_values(graph, mul, [mul], [], [mul.outputs[0]], [v])
        count += 1
    _drop_unused_initializers(graph)
    return count


def _dce(graph: ir.Graph) -> None:
    changed = True
    while changed:
        changed = False
        for node in reversed(list(graph)):
            if all(not o.uses() and not o.is_graph_output() for o in node.outputs):
                graph.remove(node, safe=True)
                changed = True


def idgather(model: ir.Model) -> int:
    """Gather(Reshape(X[B, C, 1, 1], [-1]), Unsqueeze(Range(0, B, 1) * C) + arange(C)[1, C, 1, 1]) is X itself
    (what torch.export makes of adaptive_avg_pool2d's output in ConvNeXt's head): replaced by X (exact)."""
    graph, count = model.graph, 0
    for gather in list(graph):
        if gather.op_type != "Gather" or gather.attributes.get_int("axis", 0) != 0:
            continue
        flat, index = gather.inputs
        reshape, add = flat.producer(), index.producer()
        if reshape is None or reshape.op_type != "Reshape" or add is None or add.op_type != "Add":
            continue
        x = reshape.inputs[0]
        if x.shape is None or len(x.shape) != 4 or list(x.shape)[2:] != [1, 1] or not isinstance(x.shape[1], int):
            continue
        c = x.shape[1]
        target = _const(reshape.inputs[1])
        offsets = next((_const(t) for t in add.inputs if _const(t) is not None), None)
        unsq = next((t.producer() for t in add.inputs if _const(t) is None and t.producer() is not None), None)
        if target is None or list(target.reshape(-1)) != [-1] or offsets is None or unsq is None:
            continue
        if unsq.op_type != "Unsqueeze" or list(_const(unsq.inputs[1]).reshape(-1)) != [1, 2, 3]:
            continue
        mul = unsq.inputs[0].producer()
        if mul is None or mul.op_type != "Mul":
            continue
        factor = next((_const(t) for t in mul.inputs if _const(t) is not None), None)
        rng = next((t.producer() for t in mul.inputs if _const(t) is None and t.producer() is not None), None)
        if factor is None or factor.size != 1 or int(factor.reshape(-1)[0]) != c or rng is None or rng.op_type != "Range":
            continue
        start, delta = _const(rng.inputs[0]), _const(rng.inputs[2])
        if start is None or delta is None or int(start) != 0 or int(delta) != 1:
            continue
        if offsets.size != c or list(offsets.reshape(-1)) != list(range(c)):
            continue
        ir.convenience.replace_nodes_and_values(graph, gather, [gather], [], [gather.outputs[0]], [x])
        count += 1
    _dce(graph)
    _drop_unused_initializers(graph)
    return count


LEVERS = {"idgather": idgather, "scalarfold": scalarfold, "gemm": lambda m: gemm(m, "into"), "gemm-nobias": lambda m: gemm(m, "keep"),
          "gemm-keepgelu": lambda m: gemm(m, "keepgelu"), "layerscale": layerscale}


def rewrite(src: str, dst: str, levers: str) -> dict[str, int]:
    model = ir.load(src)
    done = {}
    for lever in sorted(levers.split("+"), key=lambda s: s not in ("layerscale", "scalarfold", "idgather")):
        done[lever] = LEVERS[lever](model)
    ir.save(model, dst)
    return done


def _feeds(path: str, batch: int) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in session.get_inputs():
        shape = [batch if not isinstance(d, int) else d for d in i.shape]
        feeds[i.name] = (rng.integers(0, 30000, shape).astype(np.int64) if "int64" in i.type
                         else rng.standard_normal(shape).astype(np.float32))
    return feeds


def parity(a: str, b: str, batch: int) -> dict[str, float]:
    import onnxruntime as ort

    feeds = _feeds(a, batch)
    outs = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, feeds)[0] for p in (a, b)]
    diff = np.abs(outs[0].astype(np.float64) - outs[1])
    return {"max_abs": float(diff.max()), "ref_max_abs": float(np.abs(outs[0]).max()),
            "ref_rms": float(np.sqrt(np.mean(outs[0].astype(np.float64) ** 2)))}


def ops(path: str, ep: str) -> dict[str, dict[str, int]]:
    import os
    import tempfile

    import onnx
    import onnxruntime as ort

    before = collections.Counter(n.op_type for n in onnx.load(path, load_external_data=False).graph.node)
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.optimized_model_filepath = os.path.join(folder, "opt.onnx")
        providers = (["CUDAExecutionProvider", "CPUExecutionProvider"] if ep == "cuda" else ["CPUExecutionProvider"])
        ort.InferenceSession(path, options, providers=providers)
        after = collections.Counter(f"{n.domain + ':' if n.domain else ''}{n.op_type}"
                                    for n in onnx.load(options.optimized_model_filepath).graph.node)
    return {"file": dict(before.most_common()), f"ort_{ep}_optimized": dict(after.most_common())}


def main() -> int:
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--parity", action="store_true")
    parser.add_argument("--ops", action="store_true")
    parser.add_argument("--ep", default="cpu")
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    if args.parity:
        result = parity(args.paths[0], args.paths[1], args.batch)
    elif args.ops:
        result = ops(args.paths[0], args.ep)
    else:
        result = rewrite(*args.paths)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
