"""Whether a target's table has a node: its op, its op version at the model's opset, its element types.

Only what the profile holds is checked: an op the table lists without versions is taken at any
version, a table without types checks no type. Element types are matched per type constraint
where the table gives them so (ONNX Runtime's kernels: the node's inputs and outputs are mapped to
constraints through the ONNX schema), against the data tensor where it gives one list (TensorRT:
input 0 or output 0), and against the target's element types for every tensor where it states
those (QNN).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from portable.policy import dtype_name
from portable.validators.targets.facts import ModelFacts, formal_types, function_body
from portable.validators.targets.profile import OpEntry, Profile, VersionRange

__all__ = ["Verdict", "judge"]


@dataclass(frozen=True)
class Verdict:
    """One node on one target: supported, or why not (``reason``: ``op``, ``opset``, ``dtype``, or ``backend``: the
    target's own backend refused such a node when it was asked, e.g. QNN's HTP; ``compile``: it took the node and
    then failed to compile the graph, so the session fails instead of falling back)."""

    index: int
    supported: bool
    reason: str = ""
    detail: str = ""
    wanted: tuple[str, ...] = ()  # for ``dtype``: the element types the table allows there
    listed: bool = True  # False: the op is not in the target's table at all (``unknown`` in the counts)


def judge(profile: Profile, facts: ModelFacts, index: int) -> Verdict:
    """The node on the target; where ONNX Runtime hosts it, an op no provider has a kernel for is
    inlined from its ONNX function body (``expands_functions``), so the body's ops are judged instead.
    An op the runtime turns into data at load (``folded``: ONNX Runtime's Constant) is not judged."""
    node = facts.nodes[index]
    if profile.folds(node.domain, node.op_type):
        return Verdict(index, True, detail=f"{profile.runtime} turns {node.op_type} into an initializer at load")
    verdict = _judge(profile, facts, index)
    if verdict.supported or verdict.reason == "dtype" or not profile.expands_functions:
        return verdict
    opset = facts.opset(node.domain)
    body = function_body(node.domain, node.op_type, opset) if opset is not None else None
    if body is None or not _no_cpu_kernel(facts, index):
        return verdict
    if body == ("*",):
        return Verdict(index, True, detail=f"no kernel: ONNX Runtime inlines {node.op_type}'s function body (not checked)")
    lacking = [op for op in body if not (profile.entry(node.domain, op) or OpEntry(supported=False)).supported]
    if not lacking:
        return Verdict(index, True, detail=f"no kernel: ONNX Runtime inlines {node.op_type}'s function body ({', '.join(body)})")
    return Verdict(index, False, "op", f"{node.op_type} has no kernel and ONNX Runtime inlines its function body, "
                                       f"whose {', '.join(lacking)} {profile.name} lacks")


def _no_cpu_kernel(facts: ModelFacts, index: int) -> bool:
    """ONNX Runtime inlines a function op only when no provider claims it: not even the CPU one."""
    from portable.validators.targets.profile import load_profile

    cpu = load_profile("ort-cpu")
    return not _judge(cpu, facts, index).supported


def _judge(profile: Profile, facts: ModelFacts, index: int) -> Verdict:
    node = facts.nodes[index]
    entry = profile.entry(node.domain, node.op_type)
    if entry is None:
        return Verdict(index, False, "op", f"{node.op_type} is not in {profile.name}'s table", listed=False)
    if not entry.supported:
        return Verdict(index, False, "op", f"{profile.name}'s table lists {node.op_type} as not supported")
    since = facts.since(index)
    version = _range(entry, since)
    if entry.versions is not None and since is not None and version is None:
        listed = ", ".join(v.label() for v in sorted(entry.versions, key=lambda v: v.since))
        return Verdict(index, False, "opset", f"{node.op_type}-{since} (the model's opset {facts.opset(node.domain)}) "
                                              f"is not registered; {profile.name} has versions {listed}")
    refused = entry.refusal(facts.kind(index)) if entry.refused else None
    if refused is not None:  # the HTP's prepare failing stops the session: no fallback then
        reason = "compile" if "does not compile" in refused else "backend"
        return Verdict(index, False, reason, f"{node.op_type} as {facts.kind(index)}: {refused}")
    return _typed(profile, facts, index, entry, version)


def _range(entry: OpEntry, since: int | None) -> VersionRange | None:
    if entry.versions is None or since is None:
        return None
    return next((v for v in entry.versions if v.covers(since)), None)


def _typed(profile: Profile, facts: ModelFacts, index: int, entry: OpEntry, version: VersionRange | None) -> Verdict:
    for where, name, allowed in _type_checks(profile, facts, index, entry, version):
        elem = facts.types.get(name)
        if elem is not None and elem != 0 and dtype_name(elem) not in allowed:
            return Verdict(index, False, "dtype", f"{where} '{name}' is {dtype_name(elem)}; {profile.name} takes "
                                                  f"{', '.join(allowed)} there", wanted=_nearest_first(dtype_name(elem), allowed))
    if entry.data_types is not None and not _data_type_ok(facts, index, entry.data_types):
        node = facts.nodes[index]
        got = dtype_name(facts.types.get(node.input[0] if node.input else "", 0))
        return Verdict(index, False, "dtype", f"its data tensor is {got}; {profile.name}'s table lists "
                                              f"{', '.join(entry.data_types)} for {node.op_type}", wanted=entry.data_types)
    return Verdict(index, True)


_DTYPE = re.compile(r"(bfloat|float|uint|int|bool|complex|string)(\d*)")


def _kind_bits(dtype: str) -> tuple[str, int]:
    """``float32`` -> ("float", 32), ``bfloat16`` -> ("float", 16), ``bool`` -> ("bool", 0)."""
    found = _DTYPE.match(dtype)
    if found is None:
        return dtype, 0
    kind, bits = found.groups()
    return "float" if kind == "bfloat" else kind, int(bits) if bits else 0


def _nearest_first(dtype: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The allowed types, the one a cast should go to first: of the same kind (float, int, uint...), the
    narrowest wider than ``dtype`` (lossless), else the widest narrower one; other kinds after, as listed."""
    kind, bits = _kind_bits(dtype)

    def rank(t: str) -> tuple[int, int]:
        k, b = _kind_bits(t)
        if k != kind:
            return 2, 0
        return (0, b) if b > bits else (1, -b)

    return tuple(sorted(allowed, key=rank))


def _data_type_ok(facts: ModelFacts, index: int, allowed: tuple[str, ...]) -> bool:
    """TensorRT's one type list per op: input 0's type or output 0's (ConstantOfShape lists its output's)."""
    node = facts.nodes[index]
    seen = [facts.types.get(v) for v in (node.input[:1], node.output[:1]) for v in v if v]
    known = [dtype_name(t) for t in seen if t]
    return not known or any(t in allowed for t in known)


def _type_checks(profile: Profile, facts: ModelFacts, index: int, entry: OpEntry,
                 version: VersionRange | None) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """(where, value, allowed types) for each typed input and output."""
    node = facts.nodes[index]
    if profile.element_types is not None:
        for k, name in enumerate(node.input):
            if name:
                yield f"input {k}", name, profile.element_types
        for k, name in enumerate(node.output):
            if name:
                yield f"output {k}", name, profile.element_types
    if version is None or not version.types:
        return
    opset = facts.opset(node.domain)
    formal = formal_types(node.domain, node.op_type, opset) if opset is not None else None
    if formal is None:
        return
    constraints = dict(version.types)
    for kind, names, params in (("input", node.input, formal[0]), ("output", node.output, formal[1])):
        for k, name in enumerate(names):
            constraint = params[min(k, len(params) - 1)] if params else ""
            if name and constraint in constraints:
                yield f"{kind} {k}", name, constraints[constraint]
