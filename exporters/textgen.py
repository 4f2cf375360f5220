"""``portable export --task text-generation``: a decoder LLM as a prefill and a decode graph over a static KV cache.

Both graphs are one step module (:mod:`portable.exporters.textgen_step`: the model over transformers'
``StaticCache`` with the cache as explicit inputs and outputs) exported at two token counts, ``P``
(prefill) and 1 (decode), each through the ordinary export pipeline (:func:`portable.exporters.api.export`:
torch.export, translation, portable's passes, the contract's rules, the 2 GiB check) into a staging
folder. Then the pair rules run on the two files (PORT301-304), then the proof: greedy generation of
``tokens`` tokens through the pair in ONNX Runtime against the model's own eager ``generate``
(:func:`portable.runners.textgen.compare_text_generation`). Only when all of it passed are the two
files and the one manifest written (:func:`portable.exporters.textgen_write.write_pair`); on any
failure nothing is.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portable.errors import UsageError
from portable.exporters.job import ExportFailed, ExportResult, convert_precision, eval_mode
from portable.exporters.manifest import versions
from portable.exporters.textgen_step import (
    StaticCacheRefused,
    cache_shape,
    make_step,
    step_inputs,
)
from portable.exporters.textgen_write import PairTargets, staging, write_pair
from portable.policy import Policy, load_policy
from portable.progress import Phases
from portable.report import ValidationReport

if TYPE_CHECKING:
    from portable.runners.generation_report import GenerationReport
    from portable.runners.tolerances import ToleranceTable

__all__ = ["DEFAULT_CONTEXT", "DEFAULT_PREFILL", "HOST_LOOP", "TextGenFailed", "TextGenResult", "export_text_generation",
           "export_text_generation_spec"]

DEFAULT_CONTEXT = 256
DEFAULT_PREFILL = 32
HOST_LOOP = ("outputs are the whole cache: feed present_* back as past_* (two buffer sets used in turn); before each "
             "call set cache_position to the first slot the call writes, position_ids to the tokens' positions, "
             "attention_mask to 1 on the slots filled so far including the call's; pad the last prefill block")


class TextGenFailed(ExportFailed):
    """The pair failed a check (a graph's rules, the pair rules, the generation proof); nothing was written."""

    def __init__(self, message: str, report: ValidationReport, proof: GenerationReport | None = None,
                 detail: str = "") -> None:
        super().__init__(message, report, detail=detail)
        self.proof = proof


@dataclass(frozen=True)
class TextGenResult:
    """What the text-generation export wrote and found."""

    prefill: ExportResult
    decode: ExportResult
    manifest_path: Path
    weights_fingerprint: str
    proof: GenerationReport | None = None
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def reports(self) -> tuple[ValidationReport, ValidationReport]:
        return (self.prefill.report, self.decode.report)

    def to_dict(self) -> dict[str, Any]:
        graphs = {role: {"path": str(r.path), "fingerprint": r.fingerprint, "validation": r.report.to_dict()}
                  for role, r in (("prefill", self.prefill), ("decode", self.decode))}
        return {"task": "text-generation", "manifest": str(self.manifest_path),
                "weights_fingerprint": self.weights_fingerprint, "graphs": graphs,
                "proof": self.proof.to_dict() if self.proof else None, "timings": self.manifest.get("timings", {})}


@dataclass(frozen=True)
class _Plan:
    """The arguments, checked before any work."""

    targets: PairTargets
    context: int
    prefill: int
    batch: str | int
    precision: str
    policy: Policy
    tokens: int


def export_text_generation(model: Any, output: str | Path, *, context: int = DEFAULT_CONTEXT,
                           prefill: int = DEFAULT_PREFILL, batch: str | int = 1, precision: str = "fp32",
                           policy: Policy | None = None, verify: bool = True, tokens: int = 32, force: bool = False,
                           quiet: bool = True, phases: Phases | None = None, spec: str | None = None,
                           root: str | Path | None = None, tolerances: ToleranceTable | None = None,
                           text: Any = None, tokenizer: Any = None) -> TextGenResult:
    """Export ``model`` (a transformers causal LM) as ``NAME.prefill.onnx`` + ``NAME.decode.onnx`` +
    ``NAME.textgen.json`` from ``output`` (``NAME`` or ``NAME.onnx``); raise :class:`ExportFailed`
    (nothing written) on error findings, a refused cache (PORT107) or a failed proof. ``text``: the proof's
    real prompt (``portable.runners.textgen.Text``), else a seeded one. ``tokenizer`` (a model folder's): saved
    beside the pair, ``NAME.hf/``, and recorded in the manifest's ``preprocessing``."""
    from portable.exporters.inputs import parse_batch

    plan = _Plan(PairTargets.of(output), context, prefill, parse_batch(batch), precision,
                 (policy or load_policy()), tokens)
    _check(plan, force, verify, text)
    beside = plan.targets.tokenizer(force) if tokenizer is not None else None
    phases = phases or Phases(quiet)
    _check_weights(model, plan)
    step = _step(model, plan)
    with staging(plan.targets) as folder, eval_mode(model):
        graphs = _export_graphs(step, plan, folder, phases, spec, root)
        staged_tokenizer = folder / "tokenizer"
        saved = _save_tokenizer(tokenizer, staged_tokenizer, plan.context, beside) if beside else None
        with phases.phase("pair"):
            reports = _validate_pair(graphs, plan)
        proof = None
        if verify:
            with phases.phase("generate"):
                proof = _prove(graphs, model, plan, reports, tolerances, text)
        manifest = _manifest(plan, graphs, reports, proof, phases, spec, cache_shape(step))
        if saved is not None:
            manifest["preprocessing"] = saved
        with phases.phase("write"):
            write_pair([(graphs["prefill"].path, plan.targets.prefill), (graphs["decode"].path, plan.targets.decode),
                        *([(staged_tokenizer, beside)] if beside else [])], plan.targets.manifest, manifest, force)
    done = {role: replace(result, path=getattr(plan.targets, role), report=replace(report, path=str(getattr(plan.targets, role))))
            for (role, result), report in zip(graphs.items(), reports)}
    return TextGenResult(done["prefill"], done["decode"], plan.targets.manifest,
                         str(reports[0].model["weights_fingerprint"]), proof, manifest)


def _save_tokenizer(tokenizer: Any, staged: Path, context: int, target: Path) -> dict[str, Any]:
    """transformers' own ``save_pretrained`` into ``staged`` (moved onto ``target`` with the pair), its
    ``model_max_length`` the pair's context; the manifest's record: the folder, the class, each file's sha256."""
    from portable.hf.assets import files_record
    from portable.quiet import quiet_libraries

    tokenizer.model_max_length = context
    with quiet_libraries():
        tokenizer.save_pretrained(str(staged))
    return {"folder": target.name, "tokenizer": {"class": type(tokenizer).__name__, "max_length": context},
            "files": files_record(staged)}


_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


def _check_weights(model: Any, plan: _Plan) -> None:
    """The contract's one inline file per graph (PORT010), judged from the model's parameters before any export:
    over the limit is exit 1 with the way out (fp16, then weight-only int8), not a refusal after the trace."""
    from portable.errors import FindingsError
    from portable.exporters.writer import PROTOBUF_LIMIT

    size = sum(p.numel() for p in model.parameters()) * _BYTES[plan.precision]  # tied weights count once
    cap = min(plan.policy.max_size_bytes, PROTOBUF_LIMIT)
    if size <= cap:
        return
    why = "the policy's max-size" if cap == plan.policy.max_size_bytes else "protobuf's 2 GiB for one inline file"
    if plan.precision == "fp32" and size // 2 <= cap:
        hint = (f"export with --precision fp16 ({size // 2:,} bytes a graph), then `portable quantize NAME.textgen.json "
                f"-o NAME-w8 --weight-only` for int8 weights (about {size // 4:,})")
    else:
        hint = "no portable pair holds it: the float pair the weight-only pair is made from must fit too"
    raise FindingsError(f"PORT010: the weights are {size:,} bytes a graph at {plan.precision}, above {why} "
                        f"({cap:,} bytes); nothing exported", hint=hint)


def _check(plan: _Plan, force: bool, verify: bool, text: Any = None) -> None:
    if plan.prefill < 1 or plan.context <= plan.prefill:
        raise UsageError(f"--prefill {plan.prefill} --context {plan.context}: need 1 <= P < C")
    if plan.precision == "bf16":  # checked before the export, not after it
        raise UsageError("--precision bf16 --task text-generation: such a pair cannot be proven here: ONNX Runtime's CPU "
                         "provider has no bfloat16 kernel for Mul (among others), and the host loop cannot hold a "
                         "bfloat16 cache (numpy has no such type); use --precision fp16")
    if verify and not 1 <= plan.tokens < plan.context:
        raise UsageError(f"--tokens {plan.tokens}: the proof generates 1 to C - 1 = {plan.context - 1} tokens")
    from portable.runners.generation import fits

    prompt = None if text is None or text.prompt is None else int(text.prompt.shape[1])
    if verify and prompt is not None and not fits(prompt, plan.tokens, plan.prefill, plan.context):
        raise UsageError(f"--prompt: its {prompt} token(s) (prefill blocks of {plan.prefill}) and the proof's {plan.tokens} "
                         f"new token(s) do not fit a context of {plan.context}: a shorter prompt, or a larger --context")
    plan.targets.check(force)


def _step(model: Any, plan: _Plan) -> Any:
    """The step module, or the refusal (PORT107) as the export's report."""
    try:
        return make_step(model, plan.context, plan.batch if isinstance(plan.batch, int) else 1)
    except StaticCacheRefused as exc:
        report = ValidationReport(str(plan.targets.prefill), plan.policy, exc.findings)
        raise ExportFailed(exc.message, report) from None


class _RolePhases(Phases):
    """The pipeline's phases of one graph, named ``prefill: torch.export`` on the export's own :class:`Phases`."""

    def __init__(self, parent: Phases, role: str) -> None:
        super().__init__(quiet=True)
        self.parent, self.role = parent, role
        self.timings = parent.timings

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with self.parent.phase(f"{self.role}: {name}"):
            yield


def _export_graphs(step: Any, plan: _Plan, folder: Path, phases: Phases, spec: str | None,
                   root: str | Path | None) -> dict[str, ExportResult]:
    """Each graph through the export pipeline (verify is the pair's proof, not a forward's), staged in ``folder``."""
    from portable.exporters.api import export
    from portable.exporters.provenance import project_root

    shape = cache_shape(step)
    root = root if root is not None else project_root(Path(inspect.getfile(type(step.model))).parent)
    graphs = {}
    for role, count in (("prefill", plan.prefill), ("decode", 1)):
        path = folder / getattr(plan.targets, role).name
        graphs[role] = export(step, step_inputs(shape, count), path, batch=plan.batch, precision=plan.precision,
                              policy=plan.policy, root=root, verify=False,
                              force=True, phases=_RolePhases(phases, role), spec=spec)
    return graphs


def _validate_pair(graphs: dict[str, ExportResult], plan: _Plan) -> tuple[ValidationReport, ValidationReport]:
    """The pair rules on the staged files; each graph's report is its export's plus the pair's findings."""
    from portable.validators.pairs import PAIR_RULES
    from portable.validators.pairs.engine import validate_pair

    ids = tuple(r.id for r in PAIR_RULES if r.id not in plan.policy.ignore)
    pair_policy = plan.policy.with_(select=ids)
    checked = validate_pair(graphs["prefill"].path, graphs["decode"].path, pair_policy, context=plan.context,
                            names=(str(plan.targets.prefill), str(plan.targets.decode)))
    reports = tuple(replace(g.report, findings=g.report.findings + c.findings, rules=g.report.rules + c.rules,
                            model={**g.report.model, **{k: c.model[k] for k in ("pair_role", "weights_fingerprint")}})
                    for g, c in zip(graphs.values(), checked))
    for report in reports:
        if not report.ok:
            failing = report.failing()
            raise TextGenFailed(f"{len(failing)} error finding(s) over the pair, first: {failing[0].message}", report)
    return reports[0], reports[1]


def _prove(graphs: dict[str, ExportResult], model: Any, plan: _Plan, reports: tuple[ValidationReport, ...],
           tolerances: ToleranceTable | None, text: Any = None) -> GenerationReport:
    """Greedy generation through the staged pair against the model's eager ``generate`` (at the export's precision)."""
    from portable.runners.generation import PairFiles
    from portable.runners.textgen import compare_text_generation

    reference, _ = convert_precision(model, (), plan.precision)
    proof = compare_text_generation(PairFiles(graphs["prefill"].path, graphs["decode"].path), reference,
                                    tokens=plan.tokens, compile=False, tolerances=tolerances, text=text)
    if not proof.passed:
        raise TextGenFailed(f"generation proof failed: {proof.message()}; to look closer, export with --no-verify "
                            "and run `portable compare NAME.textgen.json --reference SPEC --task text-generation`",
                            reports[1], proof)
    return proof


def _proof_record(proof: GenerationReport | None, entries: dict[str, Any]) -> dict[str, Any] | None:
    """The proof as the manifest keeps it: the graphs named by their written files, not the staged ones the
    proof ran on (a staging folder that is gone once the pair is in place)."""
    if proof is None:
        return None
    return {**proof.to_dict(), **{role: entries[role]["file"] for role in ("prefill", "decode")}}


def _manifest(plan: _Plan, graphs: dict[str, ExportResult], reports: tuple[ValidationReport, ...],
              proof: GenerationReport | None, phases: Phases, spec: str | None, shape: Any) -> dict[str, Any]:
    """The one manifest of the pair: both graphs' own manifests, the shared weights, the cache, the host loop."""
    entries = {}
    for (role, result), report in zip(graphs.items(), reports):
        entries[role] = {**result.manifest, "validation": {"ok": report.ok, "counts": report.counts,
                                                          "findings": [f.to_dict() for f in report.findings]}}
        for shared in ("timings", "versions", "spec", "parity", "policy", "precision", "batch"):  # once, at the top
            entries[role].pop(shared, None)
    return {"schema": "portable.textgen/1", "task": "text-generation", "spec": spec, "policy": plan.policy.to_dict(),
            "weights_fingerprint": reports[0].model["weights_fingerprint"], "context": plan.context,
            "prefill_tokens": plan.prefill, "batch": plan.batch, "precision": plan.precision,
            "cache": {"layers": shape.layers, "shape": ["batch" if plan.batch == "dynamic" else plan.batch,
                                                        shape.heads, shape.context, shape.head_dim],
                      "dtype": entries["decode"]["inputs"][-1]["dtype"], "outputs": "whole cache"},
            "host_loop": HOST_LOOP, "graphs": entries, "proof": _proof_record(proof, entries),
            "versions": versions(), "timings": dict(phases.timings)}


def export_text_generation_spec(spec: str, output: str | Path, *, weights: str | Path | None = None,
                                phases: Phases | None = None, prompt: str | None = None, trust_remote_code: bool = False,
                                **options: Any) -> TextGenResult:
    """Load ``spec`` (its callable gives the causal LM; example inputs, if any, are not used; or a model folder,
    through ``AutoModelForCausalLM``) and export it with :func:`export_text_generation` (``options``: its keyword
    arguments); ``prompt``: the proof's prompt as text, tokenized by the model's own tokenizer."""
    from portable.exporters.provenance import project_root
    from portable.hf.folder import is_folder_reference
    from portable.spec import LoadedSpec, load_spec, load_weights

    targets = PairTargets.of(output)
    targets.check(bool(options.get("force")))  # the folder and the targets, before the model loads
    if is_folder_reference(spec):  # its tokenizer's folder too
        targets.tokenizer(bool(options.get("force")))
    phases = phases or Phases(True)
    with phases.phase("load"):
        if is_folder_reference(spec):
            from portable.hf.load import load_folder

            found = load_folder(spec, "text-generation", trust_remote_code=trust_remote_code, weights=weights)
            loaded = LoadedSpec(spec, found.module, None, found.plan.folder.path)
            options.setdefault("tokenizer", found.tokenizer)
        else:
            loaded = load_spec(spec)
        if weights is not None:
            load_weights(loaded.module, weights)
    if prompt is not None:
        from portable.runners.textgen import text_for

        options["text"] = text_for(loaded, loaded.module, prompt, None)
    return export_text_generation(loaded.module, output, phases=phases, spec=spec, root=project_root(loaded.root),
                                  **options)
