"""``portable quantize``: a portable float model to a portable int8 QDQ one, its cost measured and gated.

onnxruntime is imported inside the command only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import click

from portable._version import __version__
from portable.cli.options import config_option, format_option, quiet_option
from portable.errors import UsageError
from portable.io import check_writable
from portable.policy import load_policy

__all__ = ["QUANTIZE_SCHEMA_VERSION", "QuantizeOptions", "quantize", "render_json", "render_text"]

QUANTIZE_SCHEMA_VERSION = "1.0"
_EIGHT_BIT = click.Choice(["uint8", "int8"], case_sensitive=False)


def _int_ranges(values: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    from portable.runners.inputs import parse_int_range

    ranges = {}
    for text in values:
        name, sep, rest = text.partition("=")
        rng = parse_int_range(rest) if sep and name else None
        if rng is None:
            raise UsageError(f"--int-range {text!r}: expected NAME=LOW:HIGH (HIGH exclusive)")
        ranges[name] = rng
    return ranges


@click.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--output", "-o", "output", required=True, type=click.Path(dir_okay=False),
              help="The int8 ONNX file to write (its manifest goes beside it as OUTPUT.json).")
@click.option("--calibration", default=None, type=click.Path(),
              help="Calibration samples (.npz: one array per input name, samples on a leading axis; .txt: one text a "
                   "line, or .jsonl with a 'text' field, tokenized by the tokenizer the file's export recorded; or a "
                   "folder of images); its last quarter is held out for the accuracy unless --eval is "
                   "given. Default: seeded random data.")
@click.option("--eval", "eval_data", default=None, type=click.Path(),
              help="Held-out samples for the accuracy measurement (.npz, .txt, .jsonl, or a folder of images).")
@click.option("--preprocess", type=click.Choice(["imagenet", "inception", "none"]), default=None,
              help="How a folder of images becomes the input: imagenet (resize, centre crop, ImageNet mean/std), "
                   "inception (the same, to [-1, 1]) or none (pixels in [0, 1], images already the input's size). "
                   "Default: the image processor the file's export recorded (a model folder's), else required.")
@click.option("--samples", type=click.IntRange(min=1), default=None,
              help="Seeded calibration samples (default 64); not with --calibration.")
@click.option("--eval-samples", type=click.IntRange(min=1), default=256, show_default=True,
              help="Seeded held-out samples (without --eval or --calibration).")
@click.option("--batch", type=click.IntRange(min=1), default=8, show_default=True,
              help="Samples per run of a dynamic-batch model, and the batch the latency is timed at.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random samples.")
@click.option("--int-range", "int_range", multiple=True, metavar="NAME=LOW:HIGH",
              help="Range of a seeded integer input (default: the rows of the table it indexes, else all ones).")
@click.option("--target", default=None,
              help="Take this target's defaults: ort-cpu (default), qnn, nnapi, openvino, tensorrt (validate's names).")
@click.option("--activation-type", "activations", type=_EIGHT_BIT, default=None,
              help="Activation type. Default: the target's.")
@click.option("--weight-type", "weights", type=_EIGHT_BIT, default=None, help="Weight type. Default: the target's.")
@click.option("--activations", "old_activations", type=_EIGHT_BIT, default=None, hidden=True)
@click.option("--weights", "old_weights", type=_EIGHT_BIT, default=None, hidden=True)
@click.option("--per-channel/--per-tensor", "per_channel", default=None,
              help="Weights per output channel, or one scale per tensor. Default: the target's.")
@click.option("--method", type=click.Choice(["auto", "minmax", "entropy", "percentile", "mse"]), default=None,
              help="Activation ranges: ONNX Runtime's calibrators (minmax, entropy, percentile), mse (per tensor, the "
                   "range of least quantization error on the calibration data), or auto (default: minmax or mse, "
                   "whichever measures better on the calibration data).")
@click.option("--exclude", multiple=True, metavar="OP|NODE",
              help="Keep these op types or nodes in float (comma-separated, repeatable; op:TYPE and node:NAME say "
                   "which, a bare value is an op type if the model has it, else a node name).")
@click.option("--min-sqnr", type=float, multiple=True, metavar="DB",
              help="Budget: every output's SQNR vs the float model at least DB; below it exits 1, nothing written. "
                   "With no budget, the default floor judges each output by its kind: logits 95 % top-1 agreement "
                   "where the float model is sure and 10 dB, embeddings a mean cosine of 0.99, other tensors 20 dB; "
                   "--min-sqnr 0 writes what the quantizer gives.")
@click.option("--max-top1-drop", type=float, multiple=True, metavar="PCT",
              help="Budget: top-1 disagreement with the float model (outputs judged as logits, every held-out "
                   "sample) at most PCT.")
@click.option("--min-cosine", type=float, multiple=True, metavar="C",
              help="Budget: the mean cosine between float and int8 vectors along each output's last axis (an "
                   "encoder's embeddings) at least C.")
@click.option("--judge", "judge", multiple=True, metavar="OUTPUT=KIND",
              help="What judges OUTPUT: logits (top-1 agreement by the float model's confidence), embedding (cosine) "
                   "or tensor (SQNR). Default: decided from the manifest's task, the output's name, its values and "
                   "the graph; the report says which and why.")
@click.option("--search-limit", type=click.IntRange(min=0), default=16, show_default=True,
              help="Keep up to this many of the most sensitive nodes in float until the budgets hold (with none "
                   "given and --calibration data: the default goal, logits 98 % top-1 where the float model is sure "
                   "and 20 dB; 0: no search).")
@click.option("--bias-correction/--no-bias-correction", "bias_correction", default=True, show_default=True,
              help="Shift Conv/Gemm biases to cancel the int8 weights' mean error on the calibration data.")
@click.option("--adaround/--no-adaround", "adaround", default=None,
              help="Learned rounding of Conv/Gemm/MatMul weights on the calibration data (AdaRound). Default: off "
                   "(on EfficientNet-Lite0 it measured worse end to end; docs/quantize.md).")
@click.option("--equalization/--no-equalization", "equalization", default=None,
              help="Cross-layer equalization of Conv pairs. Default: kept where it measures better on the "
                   "calibration data.")
@click.option("--smoothing/--no-smoothing", "smoothing", default=True, show_default=True,
              help="SmoothQuant: move LayerNorm outputs' outlier channels into the MatMul weights that read them.")
@click.option("--float-islands/--no-float-islands", "float_islands", default=True, show_default=True,
              help="Leave float the tensors 8 bits per tensor cannot hold: masking sentinels, outlier channels.")
@click.option("--logits-headroom/--no-logits-headroom", "logits_headroom", default=True, show_default=True,
              help="Give a logits output's range twice the calibration's largest logit, so held-out inputs surer "
                   "than every calibration input do not saturate and tie (ranges auto or mse).")
@click.option("--scope", type=click.Choice(["auto", "all", "linear"]), default=None,
              help="What is quantized: all ops, or linear (MatMul/Gemm/Conv inputs and weights, the rest float). "
                   "Default auto: linear for a transformer on a target that takes float between layers.")
@click.option("--no-latency", is_flag=True, help="Skip the float-vs-int8 latency measurement.")
@click.option("--duration-ms", default=1000.0, show_default=True, type=click.FloatRange(min=0),
              help="Least timed duration per model (after the warm-up).")
@click.option("--warmup-max-ms", default=10000.0, show_default=True, type=click.FloatRange(min=0),
              help="Most warm-up per model (it goes on until the model is steady; the report says if it was).")
@click.option("--no-per-node", is_flag=True, help="Skip the per-node error analysis.")
@click.option("--weight-only", is_flag=True,
              help="A text-generation pair (MODEL: NAME.textgen.json, -o NAME-w8): MatMul and Gather weights as int8 "
                   "behind a per-channel DequantizeLinear, activations float; judge it with compare --task "
                   "text-generation --text FILE (docs/llm.md).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@format_option("Print the quantize report as text, or as JSON (schema: portable/schemas/quantize.schema.json).")
@config_option
@quiet_option
def quantize(**params: Any) -> None:
    """Quantize MODEL (portable, float) to 8-bit QDQ with ONNX Runtime's quantization tooling.

    The result is validated against the contract and the QDQ profile (PORT030-PORT032); its
    accuracy is measured against MODEL on held-out samples (SQNR and max abs per output, top-1
    agreement for logits, the 10 worst nodes), its ONNX Runtime CPU latency beside MODEL's.

    Exit codes: 0 written; 1 the result fails the contract or a budget (nothing written);
    2 usage, a non-portable MODEL (run `portable fix` first) or samples that do not fit it;
    3 unreadable input or internal failure.
    """
    from portable.quantization.api import quantize as run_quantize
    from portable.quantization.result import QuantizeFailed

    options = QuantizeOptions(**params)
    if options.weight_only or options.model.endswith(".textgen.json"):
        _weight_only(options)
    arguments = options.arguments()
    check_writable(options.output)  # before the model is read or calibrated
    try:
        result = run_quantize(options.model, options.output, **arguments)
    except QuantizeFailed as exc:
        click.echo(render_json(exc.result) if options.fmt == "json" else render_text(exc.result))
        click.echo(f"portable: quantize failed: {exc}", err=True)
        raise click.exceptions.Exit(int(exc.result.exit_code)) from None
    if options.fmt == "json" or not options.quiet:
        click.echo(render_json(result) if options.fmt == "json" else render_text(result))
    raise click.exceptions.Exit(int(result.exit_code))


@dataclass(frozen=True, kw_only=True)
class QuantizeOptions:
    """quantize's options, each field named as its click parameter (``old_*``: a deprecated spelling's)."""

    model: str
    output: str
    calibration: str | None
    eval_data: str | None
    preprocess: str | None
    samples: int | None
    eval_samples: int
    batch: int
    seed: int
    int_range: tuple[str, ...]
    target: str | None
    activations: str | None
    weights: str | None
    old_activations: str | None
    old_weights: str | None
    per_channel: bool | None
    method: str | None
    exclude: tuple[str, ...]
    min_sqnr: tuple[float, ...]
    max_top1_drop: tuple[float, ...]
    min_cosine: tuple[float, ...]
    judge: tuple[str, ...]
    search_limit: int
    bias_correction: bool
    adaround: bool | None
    equalization: bool | None
    smoothing: bool
    float_islands: bool
    logits_headroom: bool
    scope: str | None
    no_latency: bool
    duration_ms: float
    warmup_max_ms: float
    no_per_node: bool
    weight_only: bool
    force: bool
    fmt: str
    config: str | None
    quiet: bool

    def arguments(self) -> dict[str, Any]:
        """:func:`portable.quantization.api.quantize`'s keyword arguments, every option checked (a deprecated
        spelling says so on stderr)."""
        from portable.quantization.api import DEFAULT_SAMPLES

        if self.calibration is not None and self.samples is not None:
            raise UsageError("--calibration and --samples exclude each other: the samples are the file's")
        return {"calibration": self.calibration, "eval_data": self.eval_data, "preprocess": self.preprocess,
                "samples": self.samples or DEFAULT_SAMPLES, "eval_samples": self.eval_samples, "batch": self.batch,
                "seed": self.seed, "int_ranges": _int_ranges(self.int_range), "target": _target_name(self.target),
                "activations": _renamed("--activations", "--activation-type", self.old_activations, self.activations),
                "weights": _renamed("--weights", "--weight-type", self.old_weights, self.weights),
                "per_channel": self.per_channel, "method": self.method,
                "exclude": [e for item in self.exclude for e in item.split(",")],
                "min_sqnr": _once("--min-sqnr", self.min_sqnr), "max_top1_drop": _once("--max-top1-drop", self.max_top1_drop),
                "min_cosine": _once("--min-cosine", self.min_cosine), "judge": _judged(self.judge),
                "search_limit": self.search_limit, "bias_correction": self.bias_correction,
                "adaround": self.adaround, "equalization": self.equalization, "smoothing": self.smoothing,
                "float_islands": self.float_islands, "logits_headroom": self.logits_headroom, "scope": self.scope,
                "latency": not self.no_latency, "timing": _timing(self.duration_ms, self.warmup_max_ms),
                "per_node": not self.no_per_node, "policy": load_policy(self.config), "force": self.force,
                "quiet": self.quiet or self.fmt != "text"}


def _judged(values: tuple[str, ...]) -> dict[str, str]:
    from portable.quantization.judging import parse_judge

    return parse_judge(values)


def _weight_only(o: QuantizeOptions) -> None:
    """``--weight-only`` on a pair: written (exit 0) or refused; calibration and budgets do not apply to it."""
    from portable.quantization.weight_only import quantize_pair

    if not o.weight_only:
        raise UsageError(f"{o.model}: a text-generation pair is quantized weight-only here: add --weight-only")
    if o.calibration or o.eval_data or o.min_sqnr or o.max_top1_drop or o.min_cosine or o.target:
        raise UsageError("--weight-only takes no --calibration, --eval, --target or budgets: the pair is judged "
                         "afterwards by compare --task text-generation --text FILE")
    result = quantize_pair(o.model, o.output, force=o.force)
    if o.fmt == "json":
        click.echo(json.dumps({"schema_version": QUANTIZE_SCHEMA_VERSION, "exit_code": 0, "weight_only": result.to_dict()},
                              indent=2))
    elif not o.quiet:
        click.echo(f"wrote {result.files[0]} and {result.files[1]} (int8 weights, {result.quantized} per graph): "
                   f"{result.bytes_before / 1e6:.1f} MB -> {result.bytes_after / 1e6:.1f} MB; manifest {result.manifest}; "
                   "judge it: portable compare " + str(result.manifest) + " --reference SPEC --task text-generation "
                   "--text FILE")
    raise click.exceptions.Exit(0)


def _target_name(target: str | None) -> str | None:
    from portable.quantization.targets import DEPRECATED

    if target is not None and target.lower() in DEPRECATED:
        new = DEPRECATED[target.lower()]
        click.echo(f"portable: deprecated: --target {target} is now --target {new} (validate's name); the old "
                   "name goes in the next release", err=True)
        return new
    return target


def _renamed(old: str, new: str, old_value: str | None, value: str | None) -> str | None:
    """An old spelling's value, with its deprecation line; both given is a usage error."""
    if old_value is None:
        return value
    if value is not None:
        raise UsageError(f"{old} and {new} are the same option: give {new} only")
    click.echo(f"portable: deprecated: {old} is now {new}; the old spelling goes in the next release", err=True)
    return old_value


def _once(flag: str, values: tuple[float, ...]) -> float | None:
    """A budget's value; given twice it is a usage error, not the last one silently."""
    if len(values) > 1:
        raise UsageError(f"{flag} given {len(values)} times ({', '.join(f'{v:g}' for v in values)}): give it once")
    return values[0] if values else None


def _timing(duration_ms: float, warmup_max_ms: float) -> Any:
    from portable.runners.timing import TimingConfig

    warmup_max = warmup_max_ms / 1e3
    return TimingConfig(warmup_seconds=min(0.2, warmup_max), warmup_max_seconds=warmup_max, min_seconds=duration_ms / 1e3)


def render_json(result: Any) -> str:
    """The quantize report as JSON (schema: portable/schemas/quantize.schema.json); its ``exit_code`` is the
    process's."""
    data = {"schema_version": QUANTIZE_SCHEMA_VERSION, "tool": {"name": "portable", "version": __version__},
            **result.to_dict()}
    return json.dumps(data, indent=2, sort_keys=True)


def render_text(result: Any) -> str:
    """Settings, samples, accuracy and budgets, the worst nodes, latency, and what was written."""
    lines = [f"portable quantize: {result.source} -> {result.path}", "", *_settings(result.settings),
             f"  calibration: {result.calibration.count} samples, {result.calibration.source}",
             f"  held out:    {result.held_out.count} samples, {result.held_out.source}"]
    lines += _passes(result)
    lines += [f"  note: {n}" for n in result.notes]
    lines += ["", *_accuracy(result), *_nodes(result), *_latency(result), "", _verdict(result)]
    return "\n".join(lines)


def _settings(settings: Any) -> list[str]:
    mine = set(settings.from_user)

    def who(key: str) -> str:
        return "yours" if key in mine else f"target {settings.target.name}"

    return [f"  target {settings.target.name}: {settings.target.description}",
            f"  activations {settings.activations} ({who('activations')}) per-tensor; weights {settings.weights} "
            f"({who('weights')}) {'per-channel' if settings.per_channel else 'per-tensor'} ({who('per_channel')}); "
            f"calibration {settings.method}" + (f", excluded: {', '.join(settings.exclude)}" if settings.exclude else ""),
            f"  defaults from: {settings.target.source}"]


def _before_quantizer(passes: dict[str, Any]) -> list[str]:
    lines = (["  scope: linear (MatMul/Gemm/Conv inputs and weights int8, the ops between them float)"]
             if passes.get("scope") == "linear" else [])
    smoothed = passes.get("smoothing")
    if smoothed and smoothed["layer_norms"]:
        lines.append(f"  smoothing: {smoothed['layer_norms']} LayerNorm(s) into {smoothed['matmuls']} MatMul(s) "
                     f"(largest factor {smoothed['largest_factor']:.3g})")
    islands = passes.get("float_islands")
    if islands and islands["nodes_kept_float"]:
        lines.append(f"  float islands: {len(islands['sentinel_tensors'])} masking-sentinel and "
                     f"{len(islands['outlier_tensors'])} outlier-channel tensor(s), {islands['nodes_kept_float']} "
                     "node(s) kept float")
    return lines


def _learned(passes: dict[str, Any]) -> list[str]:
    """Equalization, AdaRound and the activation ranges, as they were decided."""
    lines = []
    cle, rounded, ranges = passes.get("equalization"), passes.get("adaround"), passes.get("ranges")
    if cle and cle.get("pairs"):
        lines.append(f"  equalization: {cle['pairs']} Conv pair(s), {'kept' if cle['applied'] else 'not kept'}"
                     + (f" (measured: {passes['decision']['worst_output_sqnr_db']})" if "decision" in passes else ""))
    if rounded and rounded["applied"]:
        lines.append(f"  adaround: {rounded['layers']} layer(s) learned, {rounded['flipped_share']:.1%} of weights "
                     f"rounded away from nearest, layer error {rounded['error_vs_nearest']:.2f}x nearest's "
                     f"({rounded['seconds']:.0f} s)")
    if ranges:
        lines.append(f"  activation ranges: {ranges['method']}" + (f", {ranges['clipped']} of {ranges['tensors']} "
                                                                   "tensor(s) clipped" if "clipped" in ranges else ""))
    headroom = (ranges or {}).get("logits_headroom", {})
    lines += [f"  logits headroom: {name} range {low:.4g} to {high:.4g} (the calibrated top x{headroom['factor']:g})"
              for name, (low, high) in headroom.get("outputs", {}).items()]
    return lines


def _passes(result: Any) -> list[str]:
    lines = _before_quantizer(result.passes) + _learned(result.passes)
    corrected = result.passes.get("bias_correction")
    if corrected:
        lines.append(f"  bias correction: {corrected['corrected_layers']} Conv/Gemm layer(s) "
                     f"(largest mean shift taken out {corrected['largest_shift']:.3g})")
    return lines + _search_lines(result)


def _search_lines(result: Any) -> list[str]:
    found, aim = result.search, ("the default goal (logits 98 % top-1 where the float model is sure and 20 dB, "
                                 "embeddings cosine 0.99, tensors 20 dB)" if result.budgets.floor else "the budgets")
    if found is not None and found.kept_float:
        state = "met" if found.met else "NOT met"
        return [f"  precision search: {len(found.kept_float)} node(s) kept in float, {aim} {state} after "
                f"{found.trials} trial(s): {', '.join(found.kept_float)}"]
    if found is not None and found.tried:
        return [f"  precision search: up to {len(found.tried)} node(s) in float did not meet {aim}; none "
                f"kept (tried {', '.join(found.tried)})"]
    if found is not None:
        return [f"  precision search: every node int8 met {aim}"]
    return []


def _db(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} dB"


_JUDGED_BY = {"logits": "top-1 agreement by the float model's confidence", "embedding": "mean cosine",
              "tensor": "SQNR"}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _accuracy_rows(accuracy: Any) -> list[str]:
    lines = [f"  {'output':<24} {'SQNR':>9} {'max abs':>10} {'top-1 agree':>12} {'cosine':>8}  judged as"]
    for a in accuracy:
        cosine = "–" if a.cosine_mean is None else f"{a.cosine_mean:.4f}"
        lines.append(f"  {a.name:<24} {_db(a.sqnr_db):>9} {a.max_abs:>10.4g} {_pct(a.top1_agreement):>12} {cosine:>8}"
                     f"  {a.kind}")
    return lines


def _judged_lines(accuracy: Any) -> list[str]:
    lines = []
    for a in accuracy:
        where = f" (over the real positions of {a.positions})" if a.positions else ""
        lines.append(f"  {a.name}: {a.kind}, judged by {_JUDGED_BY.get(a.kind, a.kind)}{where}: {a.why}")
        lines += [f"    {b.name} band ({b.samples} sample(s)"
                  + (", float top-1 probability >= 0.5" if b.name == "confident" else "") + f"): top-1 agree "
                  f"{_pct(b.top1_agreement)}, KL {'–' if b.kl_divergence is None else f'{b.kl_divergence:.4f}'}, "
                  f"SQNR {_db(b.sqnr_db)}" for b in a.bands]
    return lines


def _accuracy(result: Any) -> list[str]:
    lines = _accuracy_rows(result.accuracy)
    htp = getattr(result, "htp", None)  # issue 47: --target qnn judged on the HTP, ONNX Runtime CPU beside it
    if htp is not None:
        lines = [f"  judged on {htp.arithmetic}, the first {htp.samples} of {htp.held_out} held-out samples:", *lines,
                 f"  beside it, {htp.to_dict()['beside']}, the same samples:", *_accuracy_rows(htp.ort_cpu)]
    lines += _judged_lines(result.accuracy)
    kind = "floor" if result.budgets.floor else "budget"
    for c in result.checks:
        mark = "ok" if c.passed else "EXCEEDED"
        lines.append(f"  {kind} {c.budget} {c.limit:g} on {c.output}: measured {c.measured:.4g} ({mark})"
                     + (f"\n    {c.why}" if c.why else ""))
    return lines


def _nodes(result: Any) -> list[str]:
    if not result.worst_nodes:
        return []
    lines = ["", "  worst nodes (SQNR of their output's or weight's own Q/DQ pair; --exclude node:NAME keeps one in "
                 "float):"]
    for n in result.worst_nodes:
        where = f"vs float {_db(n.vs_float_sqnr_db)}" if n.kind == "activation" else f"its weight {n.tensor}"
        lines.append(f"    {n.node or n.tensor:<28} {n.op_type:<14} {_db(n.qdq_sqnr_db):>9}  {where}")
    return lines


def _latency(result: Any) -> list[str]:
    lat = result.latency
    if lat is None:
        return []
    return ["", f"  ONNX Runtime CPU latency at batch {lat.batch}, side by side: float p50 "
                f"{lat.float_stats.p50_s * 1e3:.2f} ms, int8 p50 {lat.int8_stats.p50_s * 1e3:.2f} ms "
                f"(int8/float {lat.ratio_p50:.2f})"]


def _verdict(result: Any) -> str:
    if result.written:
        return f"wrote {result.path} ({(result.fingerprint or '')[:19]}…), manifest {result.manifest_path}"
    if result.findings:
        lines = ["nothing written: the quantized model fails the contract:"]
        lines += [f"  {f.rule_id} {f.location.describe()}: {f.message} (fix: {f.hint})" for f in result.findings]
        return "\n".join(lines)
    if result.budgets.floor:
        return ("nothing written: below the default floor (logits: 95 % top-1 agreement where the float model is "
                "sure and 10 dB; embeddings: cosine 0.99; tensors: 20 dB); give a budget of your own "
                "(--min-sqnr/--max-top1-drop/--min-cosine), or --min-sqnr 0 to write it as it is")
    return "nothing written: an accuracy budget is exceeded"
