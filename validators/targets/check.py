"""The offline check of one model against the selected targets, computed once per model and read by
the PORT2xx rules and the report's per-target summary.

Per target: a :class:`~portable.validators.targets.support.Verdict` per main-graph node, the
partition estimate as the file is and, where the target needs fixed sizes and the model has a
symbolic batch, once more with the batch fixed (ORT's usability checker reports both), and the
values whose element type the target wants cast.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from portable.policy import dtype_name
from portable.report import VERDICT_KINDS, TargetSummary
from portable.validators.targets.facts import ModelFacts
from portable.validators.targets.partition import Partitioning, partition
from portable.validators.targets.profile import Profile, load_profile
from portable.validators.targets.support import Verdict, judge

if TYPE_CHECKING:
    from portable.validators.context import ModelContext

__all__ = ["Cast", "TargetAnalysis", "TargetChecks"]


@dataclass(frozen=True)
class Cast:
    """A value of an element type the target wants as another: what a cast (or a re-export) changes."""

    value: str
    kind: str  # "input", "output", "initializer", "value" (a node's output)
    dtype: str
    wanted: str
    producer: int | None  # the node that computes it


@dataclass(frozen=True)
class TargetAnalysis:
    profile: Profile
    verdicts: tuple[Verdict, ...]
    estimate: Partitioning  # the file as it is
    fixed: Partitioning | None  # with the batch fixed (only where the target needs fixed sizes)
    casts: tuple[Cast, ...]
    folded: frozenset[int] = frozenset()  # nodes the runtime turns into initializers at load (not partitioned)

    @property
    def unsupported(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if not v.supported)

    def kind(self, verdict: Verdict, facts: ModelFacts) -> str:
        """One of VERDICT_KINDS: ``partial`` is a node the table lists with a restriction it states in
        words (PORT204), which portable does not check; ``unknown`` an op the table does not name."""
        if not verdict.supported:
            return "unsupported" if verdict.listed else "unknown"
        node = facts.nodes[verdict.index]
        entry = None if verdict.index in self.folded else self.profile.entry(node.domain, node.op_type)
        stated = entry is not None and (entry.notes or (entry.partial and entry.restriction(facts.kind(verdict.index))))
        return "partial" if stated else "supported"

    def counts(self, facts: ModelFacts) -> tuple[tuple[str, int], ...]:
        """Nodes per verdict kind, in VERDICT_KINDS order (every kind, zeros included), over the nodes the target
        partitions: a node the runtime folds into data at load (ONNX Runtime's Constant) is in neither figure."""
        found = Counter(self.kind(v, facts) for v in self.verdicts if v.index not in self.folded)
        return tuple((kind, found[kind]) for kind in VERDICT_KINDS)


def _over_rank(profile: Profile, facts: ModelFacts, index: int) -> bool:
    """The checker's rank test: an input of known rank above the limit, or a Transpose whose ``perm`` is."""
    if profile.max_rank is None:
        return False
    node = facts.nodes[index]
    ranks = [len(d) for d in (facts.dims.get(i) for i in node.input if i) if d is not None]
    if node.op_type == "Transpose" and node.attribute:
        ranks.append(len(node.attribute[0].ints))
    return any(r > profile.max_rank for r in ranks)


def _folded(profile: Profile, facts: ModelFacts) -> frozenset[int]:
    return frozenset(i for i, n in enumerate(facts.nodes) if profile.folds(n.domain, n.op_type))


def _estimate(profile: Profile, facts: ModelFacts, verdicts: tuple[Verdict, ...], batch_fixed: bool) -> Partitioning:
    folded = _folded(profile, facts)

    def supported(i: int) -> bool:
        if not verdicts[i].supported or _over_rank(profile, facts, i):
            return False
        inputs = [v for v in facts.nodes[i].input if v]
        return not profile.fixed_sizes or all(facts.fixed(v, batch_fixed) for v in inputs)

    if profile.fallback is None:  # no partitions: the runtime takes the whole graph or nothing
        bad = tuple(v.index for v in verdicts if not v.supported)
        kept = tuple(i for i in range(len(verdicts)) if i not in folded)
        groups = () if bad or not kept else (kept,)
        return Partitioning(nodes=len(kept), groups=groups, unsupported=bad)
    return partition(len(facts.nodes), facts.producers, facts.consumers, supported, folded)


def _casts(profile: Profile, facts: ModelFacts, graph_io: tuple[set[str], set[str]]) -> tuple[Cast, ...]:
    wanted = profile.preferred
    if not wanted:
        return ()
    made = {o: i for i, n in enumerate(facts.nodes) for o in n.output if o}
    inputs, outputs = graph_io
    out = []
    for name in sorted(facts.types, key=lambda n: (made.get(n, -1), n)):
        dtype = dtype_name(facts.types[name])
        if dtype in wanted:
            kind = "input" if name in inputs else "output" if name in outputs else \
                "initializer" if name in facts.initializers else "value"
            out.append(Cast(name, kind, dtype, wanted[dtype], made.get(name)))
    return tuple(out)


def _verdicts(profile: Profile, facts: ModelFacts) -> tuple[Verdict, ...]:
    """One verdict per node; a supported one is judged once per distinct signature (domain, op,
    version, element types): BERT-base's 469 nodes have a few dozen."""
    seen: dict[tuple[object, ...], Verdict] = {}
    out = []
    for index, signature in enumerate(facts.signatures):
        known = seen.get(signature)
        if known is None or not known.supported:  # a refusal is judged again: its detail names the node's values
            known = seen[signature] = judge(profile, facts, index)
        out.append(replace(known, index=index))
    return tuple(out)


def analyse(profile: Profile, facts: ModelFacts, graph_io: tuple[set[str], set[str]]) -> TargetAnalysis:
    verdicts = _verdicts(profile, facts)
    estimate = _estimate(profile, facts, verdicts, batch_fixed=False)
    fixed = None
    if profile.fixed_sizes and profile.fallback is not None and facts.batch is not None:
        fixed = _estimate(profile, facts, verdicts, batch_fixed=True)
    return TargetAnalysis(profile, verdicts, estimate, fixed, _casts(profile, facts, graph_io), _folded(profile, facts))


class TargetChecks:
    """Every selected target's analysis of one model (``ctx.targets``), each computed on first use."""

    def __init__(self, ctx: ModelContext) -> None:
        self.ctx = ctx
        self.names = ctx.policy.targets
        self._done: dict[str, TargetAnalysis] = {}
        self._facts: ModelFacts | None = None
        self._summaries: tuple[TargetSummary, ...] | None = None

    @property
    def facts(self) -> ModelFacts:
        if self._facts is None:
            self._facts = ModelFacts.of(self.ctx.proto, self.ctx.batch_symbols)
        return self._facts

    def __getitem__(self, name: str) -> TargetAnalysis:
        if name not in self._done:
            graph = self.ctx.proto.graph
            io = ({v.name for v in graph.input}, {v.name for v in graph.output})
            self._done[name] = analyse(load_profile(name), self.facts, io)
        return self._done[name]

    def __iter__(self) -> Iterator[tuple[str, TargetAnalysis]]:
        return ((name, self[name]) for name in self.names)

    def summaries(self) -> tuple[TargetSummary, ...]:
        """One line per target (with the runtimes' live answers under ``targets_live``), computed once."""
        if self._summaries is None:
            self._summaries = tuple(self._summary(name, a) for name, a in self)
        return self._summaries

    def _summary(self, name: str, analysis: TargetAnalysis) -> TargetSummary:
        line = summary(analysis, self.facts)
        if not self.ctx.policy.targets_live:
            return line
        from portable.validators.targets.live import OfflineOps, answer

        offline = OfflineOps.of((self.facts.nodes[v.index].op_type, self.facts.nodes[v.index].name)
                                for v in analysis.unsupported)
        said = answer(name, self.ctx.source(), offline)
        return replace(line, live=said.pairs, live_refusals=said.refusals, live_blocking=said.blocking)


def _ops(facts: ModelFacts, indices: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    counts = Counter(facts.nodes[i].op_type for i in indices)
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def summary(analysis: TargetAnalysis, facts: ModelFacts) -> TargetSummary:
    """The report's line for one target."""
    profile, est = analysis.profile, analysis.estimate
    fixed = analysis.fixed
    return TargetSummary(
        name=profile.name, nodes=est.nodes, supported=est.supported, partitions=est.partitions,
        fallback=_ops(facts, est.unsupported), falls_back=profile.fallback is not None,
        unsupported=_ops(facts, tuple(v.index for v in analysis.unsupported)),
        fixed_batch=None if fixed is None else (fixed.supported, fixed.partitions, _ops(facts, fixed.unsupported)),
        casts=len(analysis.casts), counts=analysis.counts(facts),
        sources=tuple(f"{s.repository}@{s.commit[:12]}" for s in profile.sources[:1]))
