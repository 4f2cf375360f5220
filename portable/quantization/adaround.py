"""Learned rounding (AdaRound) of Conv, Gemm and MatMul weights, before ONNX Runtime's quantizer.

Why: round-to-nearest makes each weight's error as small as it can be, not each layer's output error. Nagel
et al., "Up or Down? Adaptive Rounding for Post-Training Quantization" (ICML 2020), choose for every weight
whether it rounds up or down so that the layer's output on real data moves least: a continuous relaxation
``W~ = s * (floor(W / s) + h(V))`` with the rectified sigmoid ``h(V) = clip(sigmoid(V) * (zeta - gamma) +
gamma, 0, 1)`` (zeta 1.1, gamma -0.1), learned with Adam against the layer's output reconstruction error
plus a regulariser ``lambda * sum(1 - |2 h(V) - 1| ** beta)`` whose ``beta`` is annealed from 20 to 2 (after a
warm start of 20 % of the iterations without it), which drives every ``h`` to 0 or 1; the learned integers are
then ``floor(W / s) + (V >= 0)``.

What was read and followed: quic/aimet's ONNX implementation, ``TrainingExtensions/onnx/src/python/aimet_onnx/
adaround/`` (``adaround_weight.py``, ``adaround_optimizer.py``, ``adaround_loss.py``,
``adaround_tensor_quantizer.py``, ``activation_sampler.py``) at commit c51b284b785fc9d3adb7d00895147567796f3f9f:
layers in graph order; each layer's *input* from the model whose earlier layers already carry their learned
weights (activations float), its *target* the float model's output of that layer, both passed through the
activation that follows the layer (Relu, or Clip as ReLU6) before the loss; the loss ``mean over positions of
the squared norm over output channels``; AIMET's defaults ``lambda = 0.01``, ``beta`` 20 -> 2, warm start 0.2,
``V`` initialised so that ``h(V)`` equals the fractional part. What differs, to keep it minutes on 2 cores
rather than AIMET's 10,000 iterations of 32 whole feature maps per layer: ``ITERATIONS`` iterations a layer,
each on ``BATCH_ROWS`` output positions drawn from a pool sampled once per layer (``POOL_FLOATS`` floats of
input patches, from at most ``SAMPLES`` calibration samples), with Adam's step raised to match
(``LEARNING_RATE``); and the layers' inputs are gathered ``CHUNK`` layers per ONNX Runtime pass (a layer sees
the learned weights of the layers in earlier chunks). A convolution is computed on sampled patches (an
im2col of the drawn positions), so a layer costs its weights times the rows drawn, not its feature map.

The learned integers are written as float weights that ONNX Runtime's quantizer maps back onto exactly those
integers (:mod:`portable.quantization.grid`), read back with its own ``quantize_data`` after writing: a layer
whose read-back differs keeps its float weights and is counted as ``unverified``. Hand-written: ONNX Runtime
has no learned rounding, and AIMET's (a library of its own with a QuantSim of its own) cannot drive ONNX
Runtime's quantizer.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from portable.quantization.data import Samples
from portable.quantization.grid import Grid, grid_of, ort_integers, weight_axis, written_weight
from portable.quantization.settings import Settings

__all__ = ["ITERATIONS", "AdaRound", "adaround"]

LOG = logging.getLogger(__name__)

ITERATIONS = 400  # per layer (AIMET: 10,000)
LEARNING_RATE = 1e-2  # Adam's step (AIMET: 1e-3 over 25x the iterations)
BATCH_ROWS = 512  # output positions per iteration
POOL_FLOATS = 4_000_000  # input-patch floats sampled per layer (16 MB), at least MIN_ROWS and at most MAX_ROWS rows
MIN_ROWS, MAX_ROWS = 256, 4096
SAMPLES = 64  # calibration samples the pools are drawn from
CHUNK = 8  # layers whose inputs one ONNX Runtime pass gathers
REG, BETA, WARM = 0.01, (20.0, 2.0), 0.2  # AIMET's lambda, beta range, warm start
ZETA, GAMMA = 1.1, -0.1  # the rectified sigmoid's stretch (AdaRound, section 3.3)
CLIP_MARGIN = 256.0  # how much finer than the whole range an input's scale may be (MSE ranges clip)
SMALL_LAYER = 20_000_000  # weights x batch rows under which one torch thread is faster than two


@dataclass(frozen=True)
class AdaRound:
    """What the pass did: layers learned, skipped and unverified, weights rounded away from nearest, the output
    error of the layers' learned weights against round-to-nearest on their pools, the time taken."""

    layers: int
    skipped: int
    unverified: int
    nearest: int  # layers whose learned rounding did no better than nearest on their pool: left to ONNX Runtime
    flipped: float  # share of learned weights whose integer is not the nearest one
    error_ratio: float  # sum of the learned layers' pool errors / the same with round-to-nearest
    iterations: int
    seconds: float
    originals: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)  # name -> float values
    integers: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)  # weight name -> learned
    left: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)  # weight -> channels left to ORT

    def to_dict(self) -> dict[str, Any]:
        return {"layers": self.layers, "skipped_layers": self.skipped, "unverified_layers": self.unverified,
                "nearest_layers": self.nearest, "channels_left_to_onnxruntime": int(sum(m.sum() for m in self.left.values())),
                "flipped_share": round(self.flipped, 4), "error_vs_nearest": round(self.error_ratio, 4),
                "iterations_per_layer": self.iterations, "seconds": round(self.seconds, 1)}


@dataclass(frozen=True)
class _Layer:
    """One weight layer: its node, weight and bias names, kind, clamp of the activation after it, conv geometry."""

    node: onnx.NodeProto
    weight: str
    bias: str | None
    clamp: tuple[float, float] | None
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilations: tuple[int, int] = (1, 1)
    group: int = 1


def _attr(node: onnx.NodeProto, name: str, default: Any) -> Any:
    found = next((a for a in node.attribute if a.name == name), None)
    return default if found is None else onnx.helper.get_attribute_value(found)


def _clamp(node: onnx.NodeProto, readers: dict[str, list[onnx.NodeProto]],
           constants: dict[str, np.ndarray]) -> tuple[float, float] | None:
    """The range a lone Relu or Clip (constant bounds) reading ``node``'s output clamps to."""
    found = readers.get(node.output[0], [])
    if len(found) != 1 or found[0].op_type not in ("Relu", "Clip"):
        return None
    act = found[0]
    if act.op_type == "Relu":
        return (0.0, math.inf)
    bounds = [constants.get(name) if name else None for name in list(act.input[1:3]) + [""] * (3 - len(act.input))]
    if any(name and name not in constants for name in act.input[1:]):
        return None
    return (float(bounds[0]) if bounds[0] is not None else -math.inf,
            float(bounds[1]) if bounds[1] is not None else math.inf)


def _conv(node: onnx.NodeProto, weight: str, bias: str | None, clamp: tuple[float, float] | None) -> _Layer | None:
    if _attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    return _Layer(node, weight, bias, clamp, tuple(_attr(node, "strides", [1, 1])),
                  tuple(_attr(node, "pads", [0, 0, 0, 0])), tuple(_attr(node, "dilations", [1, 1])),
                  int(_attr(node, "group", 1)))


def _layer(node: onnx.NodeProto, single: dict[str, np.ndarray], readers: dict[str, list[onnx.NodeProto]],
           constants: dict[str, np.ndarray]) -> _Layer | None:
    if node.op_type not in ("Conv", "Gemm", "MatMul") or len(node.input) < 2 or node.input[1] not in single:
        return None
    weight, bias = node.input[1], node.input[2] if len(node.input) > 2 and node.input[2] else None
    if (bias is not None and bias not in single) or node.input[0] in constants:
        return None
    clamp = _clamp(node, readers, constants)
    rank = single[weight].ndim
    if node.op_type == "Conv":
        return _conv(node, weight, bias, clamp) if rank == 4 else None
    if node.op_type == "Gemm" and (_attr(node, "transA", 0) or _attr(node, "alpha", 1.0) != 1.0
                                   or _attr(node, "beta", 1.0) != 1.0 or rank != 2):
        return None
    return _Layer(node, weight, bias if node.op_type == "Gemm" else None,
                  clamp if node.op_type == "Gemm" else None) if rank == 2 else None


def layers_of(proto: onnx.ModelProto, skip: set[str]) -> tuple[list[_Layer], int]:
    """The graph's learnable weight layers in graph order (weight an initializer no other node reads), and how
    many other Conv/Gemm/MatMul nodes there are; nodes named in ``skip`` (kept float) are left out."""
    uses = Counter(name for n in proto.graph.node for name in n.input)
    constants = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    single = {k: v for k, v in constants.items() if uses[k] == 1 and v.dtype == np.float32}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in proto.graph.node:
        for name in dict.fromkeys(n.input):
            readers.setdefault(name, []).append(n)
    candidates = [n for n in proto.graph.node if n.op_type in ("Conv", "Gemm", "MatMul") and n.name not in skip]
    found = [layer for layer in (_layer(n, single, readers, constants) for n in candidates) if layer is not None]
    return found, len(candidates) - len(found)


# --- sampling: the same output positions for the float model's targets and the current model's inputs ---------

def _positions(layer_index: int, batch_index: int, shape: Sequence[int], rows: int) -> np.ndarray:
    """``rows`` positions (flat indices over every axis of the output but the channel one) of one batch."""
    total = int(np.prod(shape))
    rng = np.random.default_rng([layer_index, batch_index, 20200])
    return np.sort(rng.choice(total, size=min(rows, total), replace=False))


def _out_rows(layer: _Layer, value: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The output's channel vectors at the drawn positions: ``[rows, channels]``."""
    channels_last = np.moveaxis(value, 1, -1) if layer.node.op_type == "Conv" else value
    return np.asarray(channels_last.reshape(-1, channels_last.shape[-1])[where], np.float32)


def _out_shape(layer: _Layer, value: np.ndarray) -> tuple[int, ...]:
    """The shape the positions index: ``[n, h, w]`` of a convolution's output, else every axis but the last."""
    if layer.node.op_type == "Conv":
        return (value.shape[0], *value.shape[2:])
    return tuple(value.shape[:-1])


def _patches(layer: _Layer, x: np.ndarray, where: np.ndarray, out_hw: tuple[int, ...]) -> np.ndarray:
    """A convolution's input windows at the drawn output positions (``out_hw``: the output's height and width, the
    kernel's): ``[rows, channels, kh, kw]``."""
    kh, kw = out_hw[2:] if len(out_hw) > 2 else (1, 1)
    top, left, bottom, right = layer.pads
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, i, j = np.unravel_index(where, (x.shape[0], out_hw[0], out_hw[1]))
    rows = i[:, None] * layer.strides[0] + np.arange(kh)[None, :] * layer.dilations[0]
    cols = j[:, None] * layer.strides[1] + np.arange(kw)[None, :] * layer.dilations[1]
    return np.asarray(padded[n[:, None, None, None], np.arange(x.shape[1])[None, :, None, None], rows[:, None, :, None],
                             cols[:, None, None, :]], np.float32)


def _in_rows(layer: _Layer, x: np.ndarray, where: np.ndarray, out_shape: tuple[int, ...],
             kernel: tuple[int, int]) -> np.ndarray:
    if layer.node.op_type == "Conv":
        return _patches(layer, x, where, (*out_shape[1:3], *kernel))
    return np.asarray(x.reshape(-1, x.shape[-1])[where], np.float32)


def _row_budget(layer: _Layer, weight: np.ndarray, samples: int) -> int:
    """Rows of one sample drawn for a layer: ``POOL_FLOATS`` floats of input rows over the samples."""
    if layer.node.op_type == "Conv":
        per_row = int(weight.shape[1] * layer.group * weight.shape[2] * weight.shape[3])
    else:
        per_row = int(weight.shape[1] if layer.node.op_type == "Gemm" and _attr(layer.node, "transB", 0) else weight.shape[0])
    rows = min(max(POOL_FLOATS // max(per_row, 1), MIN_ROWS), MAX_ROWS)
    return max(1, -(-rows // samples))


@dataclass
class _Pool:
    """One layer's sampled rows: the positions drawn per batch, the float model's outputs there, the inputs."""

    where: list[np.ndarray] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    targets: list[np.ndarray] = field(default_factory=list)
    inputs: list[np.ndarray] = field(default_factory=list)


def _targets(proto: onnx.ModelProto, layers: list[_Layer], weights: dict[str, np.ndarray],
             calibration: Samples) -> list[_Pool]:
    """The float model's outputs of every layer at positions drawn per batch (one ONNX Runtime pass)."""
    from portable.quantization.activations import calibration_outputs

    pools = [_Pool() for _ in layers]
    names = [layer.node.output[0] for layer in layers]
    for b, batch in enumerate(calibration_outputs(proto, calibration, names)):
        for k, layer in enumerate(layers):
            value = batch[layer.node.output[0]]
            shape = _out_shape(layer, value)
            rows = _row_budget(layer, weights[layer.weight], calibration.count) * value.shape[0]
            where = _positions(k, b, shape, rows)
            pools[k].where.append(where)
            pools[k].shapes.append(shape)
            pools[k].targets.append(_out_rows(layer, value, where))
    return pools


def _gather_inputs(proto: onnx.ModelProto, chunk: list[tuple[int, _Layer]], pools: list[_Pool],
                   weights: dict[str, np.ndarray], calibration: Samples) -> None:
    """The current model's inputs of the chunk's layers at their drawn positions (one ONNX Runtime pass)."""
    from portable.quantization.activations import calibration_outputs

    names = list(dict.fromkeys(layer.node.input[0] for _, layer in chunk))
    for b, batch in enumerate(calibration_outputs(proto, calibration, names, "the model being rounded")):
        for k, layer in chunk:
            kernel = tuple(weights[layer.weight].shape[2:4]) if layer.node.op_type == "Conv" else (1, 1)
            pools[k].inputs.append(_in_rows(layer, batch[layer.node.input[0]], pools[k].where[b], pools[k].shapes[b],
                                            kernel))


# --- the optimisation -------------------------------------------------------------------------------------------

def _forward(layer: _Layer, weight: np.ndarray) -> Callable[[Any, Any], Any]:
    """``(rows, weight) -> [rows, out channels]`` in torch for this layer's kind."""
    import torch

    if layer.node.op_type == "Conv" and layer.group == weight.shape[0] and weight.shape[1] == 1:  # depthwise
        channels = weight.shape[0]
        return lambda x, w: (x.reshape(x.shape[0], channels, -1) * w.reshape(channels, -1)).sum(-1)
    if layer.node.op_type == "Conv":
        groups, out_channels = layer.group, weight.shape[0]

        def conv(x: Any, w: Any) -> Any:
            xg = x.reshape(x.shape[0], groups, -1)
            wg = w.reshape(groups, out_channels // groups, -1)
            return torch.einsum("pgk,gok->pgo", xg, wg).reshape(x.shape[0], out_channels)
        return conv
    if layer.node.op_type == "Gemm" and _attr(layer.node, "transB", 0):
        return lambda x, w: x @ w.T
    return lambda x, w: x @ w


def _rectified(v: Any) -> Any:
    import torch

    return torch.clamp(torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def _beta(step: int, iterations: int) -> float:
    """AIMET's cosine annealing of beta from 20 to 2 after the warm start."""
    start = WARM * iterations
    rel = (step - start) / max(iterations - start, 1)
    return BETA[1] + 0.5 * (BETA[0] - BETA[1]) * (1 + math.cos(rel * math.pi))


@dataclass(frozen=True)
class _Learned:
    integers: np.ndarray
    nearest: np.ndarray
    error: float
    nearest_error: float


def _steps(v: Any, optimizer: Any, iterations: int, fixed: Any, residual: Callable[[Any, Any], Any], floor: Any,
           rows: int) -> None:
    """Adam on ``v``: the reconstruction error of a batch of rows, plus the annealed regulariser after the warm
    start (AIMET's ``AdaroundLoss``)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    free = (~fixed).float()
    for step in range(iterations):
        pick = torch.randint(0, rows, (min(BATCH_ROWS, rows),), generator=generator)
        h = _rectified(v)
        loss = (residual(floor + h, pick) ** 2).sum(-1).mean()
        if step >= WARM * iterations:
            loss = loss + REG * ((1 - (2 * h - 1).abs().pow(_beta(step, iterations))) * free).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _learn(layer: _Layer, weight: np.ndarray, bias: np.ndarray | None, grid: Grid, nearest: np.ndarray,
           pool: _Pool, iterations: int) -> _Learned:
    """The layer's integers learned on its pool (the module docstring)."""
    import torch

    x = torch.from_numpy(np.concatenate(pool.inputs).reshape(sum(len(i) for i in pool.inputs), -1))
    target = torch.from_numpy(np.concatenate(pool.targets))
    forward = _forward(layer, weight)
    scale = torch.from_numpy(grid.broadcast(grid.scale, weight.ndim).astype(np.float32))
    zero = torch.from_numpy(grid.broadcast(grid.zero, weight.ndim).astype(np.float32))
    scaled = weight.astype(np.float64) / grid.broadcast(grid.scale, weight.ndim).astype(np.float64)
    floor = torch.from_numpy((np.floor(scaled) + grid.broadcast(grid.zero, weight.ndim)).astype(np.float32))
    rest = np.clip(scaled - np.floor(scaled), 0.0, 1.0)
    fixed = torch.from_numpy(grid.extremes)
    near_q = torch.from_numpy(nearest.astype(np.float32))
    v = torch.nn.Parameter(torch.from_numpy((-np.log((ZETA - GAMMA) / (rest - GAMMA) - 1)).astype(np.float32)))
    b = torch.from_numpy(bias.astype(np.float32)) if bias is not None else None
    low, high = layer.clamp if layer.clamp is not None else (-math.inf, math.inf)

    def output(q: Any, rows: Any) -> Any:
        w = (torch.where(fixed, near_q, torch.clamp(q, grid.qmin, grid.qmax)) - zero) * scale
        out = forward(rows, w) + (b if b is not None else 0.0)
        return torch.clamp(out, low, high)

    clamped_target = torch.clamp(target, low, high)
    optimizer = torch.optim.Adam([v], lr=LEARNING_RATE)
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if weight.size * min(BATCH_ROWS, x.shape[0]) < SMALL_LAYER else threads)
    try:
        _steps(v, optimizer, iterations, fixed, lambda q, pick: output(q, x[pick]) - clamped_target[pick], floor,
               x.shape[0])
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        learned = torch.where(fixed, near_q, torch.clamp(floor + (v >= 0).float(), grid.qmin, grid.qmax))
        error = float(((output(learned, x) - clamped_target) ** 2).sum(-1).mean())
        nearest_error = float(((output(near_q, x) - clamped_target) ** 2).sum(-1).mean())
    return _Learned(learned.numpy().astype(np.int64), nearest.astype(np.int64), error, nearest_error)



def _samples(calibration: Samples) -> Samples:
    """At most ``SAMPLES`` calibration samples (whole batches of a static-batch model)."""
    count = min(calibration.count, SAMPLES)
    if calibration.static:
        count = max(calibration.batch, count - count % calibration.batch)
    return calibration.take(0, count)


@dataclass
class _Tally:
    learned: int = 0
    nearest: int = 0
    unverified: int = 0
    flipped: int = 0
    weights: int = 0
    error: float = 0.0
    nearest_error: float = 0.0
    integers: dict[str, np.ndarray] = field(default_factory=dict)
    left: dict[str, np.ndarray] = field(default_factory=dict)


def _left_to_ort(bias: np.ndarray | None, grid: Grid, pool: _Pool) -> np.ndarray:
    """The channels whose scale ONNX Runtime's QDQ quantizer may widen to fit the int32 bias (its
    ``_adjust_weight_scale_for_int32_bias``: when ``input_scale * weight_scale < 2 |bias| / (2^32 - 2)``, in
    practice a dead channel, weights near 0 and a BatchNorm bias): a widened scale would not read back the learned
    integers, so such a channel keeps its float weights and ONNX Runtime rounds it. The input's scale is not known
    yet (the activation ranges come last): taken as ``CLIP_MARGIN`` times finer than the pool's whole range gives."""
    if bias is None:
        return np.zeros(grid.scale.size, bool)
    rows = np.concatenate(pool.inputs)
    whole = (max(float(rows.max()), 0.0) - min(float(rows.min()), 0.0)) / 255.0
    largest = np.abs(bias.astype(np.float64)).reshape(grid.scale.size, -1).max(axis=1)
    return np.asarray(whole / CLIP_MARGIN * grid.scale.astype(np.float64) < 2.0002 * largest / (2.0**32 - 2))


def _one(layer: _Layer, tables: dict[str, onnx.TensorProto], settings: Settings, pool: _Pool,
         iterations: int, tally: _Tally) -> None:
    """Learn one layer's rounding and write it into its weight (left as it was when the read-back differs); its
    bias stays the float model's: the learning fitted the layer's output after its activation, mean included, and
    bias correction skips the layer (shifting the mean on top cost Lite0 3.8 dB, docs/quantize.md)."""
    table = tables[layer.weight]
    bias = numpy_helper.to_array(tables[layer.bias]) if layer.bias else None
    weight = numpy_helper.to_array(table)
    axis = weight_axis(layer.node, settings)
    grid = grid_of(weight, settings, axis)
    left = _left_to_ort(bias, grid, pool)
    if left.any():
        grid = replace(grid, extremes=grid.extremes | np.broadcast_to(grid.broadcast(left, weight.ndim), weight.shape))
    nearest = ort_integers(weight, settings, axis)
    began = time.perf_counter()
    learned = _learn(layer, weight, bias, grid, nearest, pool, iterations)
    LOG.debug("%s %s rows %d: error %.3g of nearest's, %.1f s", layer.node.name, weight.shape,
              sum(len(i) for i in pool.inputs), learned.error / max(learned.nearest_error, 1e-30),
              time.perf_counter() - began)
    tally.error += min(learned.error, learned.nearest_error)
    tally.nearest_error += learned.nearest_error
    if learned.error >= learned.nearest_error:  # no better than round-to-nearest on its pool: ONNX Runtime's own
        tally.nearest += 1
        return
    written, integers = written_weight(weight, learned.integers, grid)
    back = ort_integers(written, settings, axis)
    if not (np.array_equal(back, integers) and np.array_equal(grid_of(written, settings, axis).scale, grid.scale)):
        tally.unverified += 1
        return
    table.CopyFrom(numpy_helper.from_array(written, table.name))
    tally.integers[table.name] = integers
    tally.left[table.name] = left
    free = ~grid.extremes
    tally.learned += 1
    tally.flipped += int((integers != nearest)[free].sum())
    tally.weights += int(free.sum())


def adaround(proto: onnx.ModelProto, settings: Settings, calibration: Samples, skip: frozenset[str] = frozenset(),
             iterations: int | None = None) -> tuple[onnx.ModelProto, AdaRound]:
    """A copy of ``proto`` whose learnable layers (not named in ``skip``) carry learned integers (the module
    docstring), and the record; ``originals`` maps each rewritten weight to its float values."""
    start = time.perf_counter()
    iterations = ITERATIONS if iterations is None else iterations
    layers, skipped = layers_of(proto, set(skip))
    if not layers:
        return proto, AdaRound(0, skipped, 0, 0, 0.0, 1.0, iterations, 0.0)
    samples = _samples(calibration)
    current = onnx.ModelProto()
    current.CopyFrom(proto)
    tables = {t.name: t for t in current.graph.initializer}
    originals = {layer.weight: numpy_helper.to_array(tables[layer.weight]).copy() for layer in layers}
    pools = _targets(proto, layers, originals, samples)
    tally = _Tally()
    for first in range(0, len(layers), CHUNK):
        chunk = list(enumerate(layers))[first:first + CHUNK]
        _gather_inputs(current, chunk, pools, originals, samples)
        for k, layer in chunk:
            _one(layer, tables, settings, pools[k], iterations, tally)
            pools[k] = _Pool()
    record = AdaRound(tally.learned, skipped, tally.unverified, tally.nearest, tally.flipped / max(tally.weights, 1),
                      tally.error / tally.nearest_error if tally.nearest_error > 0 else 1.0, iterations,
                      time.perf_counter() - start,
                      {k: v for k, v in originals.items() if k in tally.integers}, tally.integers,
                      tally.left)
    return current, record
