"""Running the rules over one model: load once, share the context, collect a report."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from portable.errors import InputError, UsageError
from portable.findings import Finding
from portable.policy import Policy
from portable.report import TargetSummary, ValidationReport
from portable.validators.context import ModelContext
from portable.validators.lean import HeldLean, LeanModel, parse_lean_bytes
from portable.validators.loading import load_model_file, parse_model_bytes
from portable.validators.rules import ALL_RULES, Rule
from portable.validators.targets import TARGETS
from portable.validators.wire import Unscannable

__all__ = ["IGNORE_KEY", "select_rules", "validate", "validate_bytes", "validate_held", "validate_proto"]

IGNORE_KEY = "portable.ignore"  # metadata_props: "PORT013, PORT007: reason"
_IGNORE = re.compile(r"^\s*((?:PORT\d{3}\s*,?\s*)+)(?::\s*(.*))?$", re.IGNORECASE)


def select_rules(policy: Policy) -> list[Rule]:
    """The rules a policy turns on, in rule-id order."""
    known = {r.id for r in ALL_RULES}
    unknown = sorted((set(policy.select) | set(policy.ignore)) - known)
    if unknown:
        raise UsageError(f"unknown rule id(s): {', '.join(unknown)} (see `portable rules`)")
    strange = sorted(set(policy.targets) - set(TARGETS))  # a Policy built in Python: the CLI's check, again
    if strange:
        raise UsageError(f"unknown target(s) {', '.join(strange)} (known: {', '.join(TARGETS)}, or all)")
    idle = sorted(r.id for r in ALL_RULES if r.needs_targets and r.id in policy.select) if not policy.targets else []
    if idle:
        raise UsageError(f"{', '.join(idle)} check(s) target profiles: name the targets with --target "
                         "(or `targets = [...]` in [tool.portable])")
    chosen = []
    for cls in ALL_RULES:
        if policy.select:
            on = cls.id in policy.select
        elif cls.needs_targets:
            on = bool(policy.targets)
        else:
            on = not cls.opt_in or policy.ort
        if on and cls.id not in policy.ignore:
            chosen.append(cls())
    return chosen


def _inline_ignores(proto: onnx.ModelProto) -> dict[str, str]:
    """Rule id -> reason, from ``portable.ignore`` entries in the model's metadata_props."""
    waived: dict[str, str] = {}
    for prop in proto.metadata_props:
        if prop.key != IGNORE_KEY:
            continue
        for entry in prop.value.split(";"):
            match = _IGNORE.match(entry)
            if match:
                reason = (match.group(2) or "").strip() or "no reason given"
                for rule_id in re.findall(r"PORT\d{3}", match.group(1).upper()):
                    waived[rule_id] = reason
    return waived


def _model_info(proto: onnx.ModelProto, size: int | None) -> dict[str, Any]:
    return {
        "ir_version": proto.ir_version,
        "opset": {e.domain or "ai.onnx": e.version for e in proto.opset_import},
        "producer": f"{proto.producer_name} {proto.producer_version}".strip(),
        "nodes": len(proto.graph.node),
        "initializers": len(proto.graph.initializer),
        "size_bytes": size,
        "fingerprint": next((p.value for p in proto.metadata_props if p.key == "portable.fingerprint"), None),
    }


def _run(rule: Rule, ctx: ModelContext) -> list[Finding]:
    found = list(rule.check(ctx))
    return [
        replace(f, severity=ctx.policy.severity_for(rule.id, f.severity)) if f.severity == rule.severity else f
        for f in found
    ]


def _repeated(field: FieldDescriptor) -> bool:
    # protobuf 6+ has is_repeated (and 7 dropped label); older releases only label
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == FieldDescriptor.LABEL_REPEATED


def _bad_string(proto: onnx.ModelProto) -> str | None:
    """The first string field that is not UTF-8, if any. protobuf then hands Python ``bytes``
    where every rule expects ``str``; such a file is not valid ONNX. Walks every message
    (iteratively: nesting depth cannot overflow); tensor payloads are ``bytes`` fields, not
    strings, and are skipped without being read."""
    string = FieldDescriptor.TYPE_STRING
    stack: list[tuple[Message, str]] = [(proto, "model")]
    while stack:
        message, where = stack.pop()
        for field, value in message.ListFields():
            if field.type == string:
                items = value if _repeated(field) else [value]
                if any(isinstance(v, bytes) for v in items):
                    return f"{where}.{field.name}"
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                items = value if _repeated(field) else [value]
                stack.extend((v, f"{where}.{field.name}") for v in items)
    return None


def validate_proto(proto: onnx.ModelProto, path: str, policy: Policy, size: int | None = None, *,
                   rules: Sequence[Rule] | None = None, lean: LeanModel | None = None) -> ValidationReport:
    """Validate a parsed model with ``rules`` (default: ``select_rules(policy)``, chosen here).
    ``lean``: the lean parse ``proto`` is, whose large payloads the rules read from there.
    A rule that crashes makes the report an internal error (exit 3)."""
    rules = select_rules(policy) if rules is None else rules
    bad = _bad_string(proto)
    if bad is not None:
        return ValidationReport(path=path, policy=policy, rules=tuple(r.id for r in rules),
                                error=f"not a valid ONNX model: {bad} is not UTF-8 text (a corrupt file)")
    ctx = ModelContext(proto, path, policy, size, lean)
    findings: list[Finding] = []
    error = None
    for rule in rules:
        try:
            findings.extend(_run(rule, ctx))
        except (RecursionError, MemoryError, Exception) as exc:  # noqa: BLE001
            detail = " ".join(str(exc).split())
            error = f"internal error in rule {rule.id} ({rule.name}): {type(exc).__name__}: {detail}"[:500]
            break
    targets: tuple[TargetSummary, ...] = ()
    if policy.targets and error is None:
        targets, error = _target_summaries(ctx)
    waived = _inline_ignores(proto)
    kept = tuple(f for f in findings if f.rule_id not in waived)
    suppressed = tuple((f, waived[f.rule_id]) for f in findings if f.rule_id in waived)
    return ValidationReport(path=path, policy=policy, findings=_sorted(kept), error=error,
                            model=_model_info(proto, size), suppressed=suppressed,
                            rules=tuple(r.id for r in rules), targets=targets)


def _target_summaries(ctx: ModelContext) -> tuple[tuple[TargetSummary, ...], str | None]:
    """The report's line per selected target (``ctx.targets``, shared with PORT201+), or why it failed."""
    try:
        return ctx.targets.summaries(), None
    except (RecursionError, MemoryError, Exception) as exc:  # noqa: BLE001
        return (), f"internal error in the target check: {type(exc).__name__}: {' '.join(str(exc).split())}"[:500]


def _validate_file(path: str | Path, policy: Policy, name: str | None, rules: Sequence[Rule]) -> ValidationReport:
    try:
        loaded = load_model_file(path)
    except InputError as exc:
        return ValidationReport(path=str(path), policy=policy, error=exc.message, rules=tuple(r.id for r in rules))
    try:
        return validate_proto(loaded.proto, name or loaded.path, policy, loaded.size, rules=rules, lean=loaded.lean)
    finally:
        loaded.close()  # the memory map of a lean parse


def validate_bytes(data: bytes, path: str, policy: Policy, *, rules: Sequence[Rule] | None = None,
                   parsed: Callable[[onnx.ModelProto, Mapping[int, memoryview]], None] | None = None
                   ) -> ValidationReport:
    """Validate a serialized model (an export before it is written) the way :func:`validate` reads
    the file ``path``: parsed lean, so no rule copies its weights (PORT011's checker gets them as
    inputs, see ``port011_checker``), ``size`` the byte count. ``parsed`` is called with the parsed
    model and its stripped payloads (initializer index -> bytes) before the rules run: the exporter
    hashes them meanwhile. It must change neither; the payloads are views of ``data``."""
    try:
        lean: LeanModel | None = parse_lean_bytes(data, path)
    except (Unscannable, DecodeError, RecursionError, ValueError):
        lean = None
    proto = lean.proto if lean is not None else parse_model_bytes(data, path)
    return _validate_lean(proto, lean, path, policy, len(data), rules, parsed)


def validate_held(proto: onnx.ModelProto, payloads: dict[int, memoryview], pieces: Sequence[bytes | memoryview],
                  path: str, policy: Policy, *, rules: Sequence[Rule] | None = None,
                  parsed: Callable[[onnx.ModelProto, Mapping[int, memoryview]], None] | None = None
                  ) -> ValidationReport:
    """Validate an export's model before it is written, as :func:`validate_bytes` would validate the
    file ``pieces`` make: ``proto`` is that file's lean parse (no ``raw_data`` at ``payloads``' indices,
    which hold it; see ``exporters.serialize``), so nothing is parsed. ``parsed`` as for
    :func:`validate_bytes`."""
    lean = HeldLean(proto, path, payloads, tuple(pieces))
    return _validate_lean(proto, lean, path, policy, sum(memoryview(p).nbytes for p in pieces), rules, parsed)


def _validate_lean(proto: onnx.ModelProto, lean: LeanModel | None, path: str, policy: Policy, size: int,
                   rules: Sequence[Rule] | None,
                   parsed: Callable[[onnx.ModelProto, Mapping[int, memoryview]], None] | None) -> ValidationReport:
    """The rules over ``proto``, the lean parse ``lean`` holds (``parsed`` told of its payloads first)."""
    if parsed is not None:
        parsed(proto, lean.payload_views() if lean is not None else {})
    return validate_proto(proto, path, policy, size, rules=rules, lean=lean)


def _sorted(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: (f.rule_id, f.location.sort_key(), f.message)))


def validate(model: str | Path | onnx.ModelProto | Any, policy: Policy | None = None, *,
             name: str | None = None, rules: Sequence[Rule] | None = None) -> ValidationReport:
    """Validate a model file, an ``onnx.ModelProto`` or an ``onnx_ir.Model``.

    ``rules``: the rules to run, when the caller chose them once for many models
    (default: ``select_rules(policy)``). An unreadable file gives a report whose
    ``error`` says why (``exit_code`` 3); it does not raise.
    """
    policy = policy or Policy()
    rules = select_rules(policy) if rules is None else rules  # bad rule ids: a usage error, before any work
    if isinstance(model, (str, Path)):
        return _validate_file(model, policy, name, rules)
    if isinstance(model, onnx.ModelProto):
        return validate_proto(model, name or "<memory>", policy, rules=rules)
    import onnx_ir as ir

    if isinstance(model, ir.Model):
        return validate_proto(ir.serde.serialize_model(model), name or "<memory>", policy, rules=rules)
    raise UsageError(f"validate() takes a path, an onnx.ModelProto or an onnx_ir.Model, not {type(model).__name__}")
