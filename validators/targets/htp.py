"""The QNN HTP's own answer (``portable validate --target qnn --live``): onnxruntime-qnn's QNN execution provider
with its HTP backend, which on x86-64 validates every node with Qualcomm's op definitions and compiles and runs
the graph in the HTP simulator, with the NPU's integer arithmetic.

One session, made by the one session factory (:func:`portable.runners.sessions.qnn_htp`), graph optimizations
off (the nodes are the file's, as the offline estimate judges them), its log read at VERBOSE through ONNX
Runtime's logging callback:

- per node, the EP's ``LogNodeSupport`` verdict of its first capability pass (``Validation PASSED`` /
  ``Validation FAILED ... REASON : ...``), with the HTP backend's own error for a node it refused
  (``<E> Unsupported input/output datatypes requested for the HTP Op 'ElementWiseAsin' ...``) and the I/O
  type sets it would take (``INT16, INT8``);
- the partitions: the subgraphs ONNX Runtime gave the QNN EP (``get_provider_graph_assignment_info``, after
  its layout transform to NHWC, which adds Transposes of its own);
- whether the graph compiles: the session is made only when the HTP's prepare (``QnnGraph_finalize``)
  succeeds; its failure is named with the HTP's message;
- whether a run on seeded inputs (batch 1) succeeds.

QNN needs every dim fixed, the batch too: on a file with a symbolic batch every node fails "Cannot get shape".
Such a file is answered at batch 1 (ONNX Runtime's free-dimension override: the session sees a copy with the
batch fixed), and the answer says so and what to do (``portable export --batch N``, ``portable fix --batch N``).
The Q of a graph input and the DQ of a graph output stay on the CPU by the EP's design ("configured to not
take"): they are counted apart, not as refusals.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HtpAnswer", "NodeSupport", "ask_htp", "batch_symbols", "htp_version", "node_support"]

_UNIT = re.compile(r"Validation (PASSED|FAILED) for \d+ nodes in OrtNodeUnit \((\w+)\) :")
_NODE = re.compile(r"Operator type: (\S+) Node name: (.*?) Node index: \d+")
_REASON = re.compile(r"REASON : (.*)")
_HTP_ERROR = re.compile(r"<E> (.*)")
_SETS = re.compile(r"Supported I/O datatype sets for the configuration: (\w+)")
_PASS_TWO = "GetCapability pass 2"
_GENERIC = ("Requested I/O datatype set", "Supported I/O datatype sets", "Please refer to",
            "QnnBackend_validateOpConfig failed", "Failed to validate op", "unexpected GraphHtpSettings")
BY_DESIGN = "is configured to not take"  # the EP keeps a graph input's Q and a graph output's DQ on the CPU


@dataclass(frozen=True)
class NodeSupport:
    """One node as the QNN EP judged it: taken, or left with the EP's reason and the HTP backend's own words."""

    op: str
    node: str
    taken: bool
    reason: str = ""

    @property
    def by_design(self) -> bool:
        return BY_DESIGN in self.reason


def _htp_words(block: Sequence[str], node: str) -> str:
    """The HTP backend's telling error about ``node`` in the log lines before its verdict, and the I/O type
    sets it would take instead (``the HTP takes INT16, INT8``)."""
    errors = [m.group(1).strip() for line in block for m in [_HTP_ERROR.search(line)] if m]
    telling = next((e for e in errors if f"'{node}'" in e or f'"{node}"' in e), None) \
        or next((e for e in errors if not e.startswith(_GENERIC)), None)
    sets = list(dict.fromkeys(m.group(1) for line in block for m in [_SETS.search(line)] if m))
    words = telling or ""
    if sets:
        words += f"{'; ' if words else ''}the HTP takes it as {', '.join(sets)} only"
    return words


def node_support(said: Sequence[str]) -> tuple[NodeSupport, ...]:
    """Each node's verdict from the QNN EP's log (entries as ONNX Runtime's callback gives them), first pass
    only (the second judges the graph after the layout transform, with nodes of ONNX Runtime's own); a node
    judged twice keeps its first verdict."""
    lines = "\n".join(said).splitlines()
    cut = next((i for i, line in enumerate(lines) if _PASS_TWO in line), len(lines))
    found: dict[str, NodeSupport] = {}
    start = 0
    for i, line in enumerate(lines[:cut]):
        unit = _UNIT.search(line)
        if unit is None:
            continue
        body = lines[i + 1:i + 40]
        nodes = [m.groups() for b in body[:next((k for k, b in enumerate(body) if not b.startswith("\t")), len(body))]
                 for m in [_NODE.search(b)] if m]
        reason = next((m.group(1).strip() for b in body[:len(nodes) + 1] for m in [_REASON.search(b)] if m), "")
        for op, name in nodes:
            if name not in found:
                htp = "" if unit.group(1) == "PASSED" else _htp_words(lines[start:i], name)
                text = f"{reason} HTP: {htp}" if htp and reason else (htp or reason)
                found[name] = NodeSupport(op, name, unit.group(1) == "PASSED", text)
        start = i + 1
    return tuple(found.values())


def _compile_error(said: Sequence[str], detail: str) -> str:
    """Why the HTP's prepare failed: its own ``<E>`` line (``"where" generated: could not create op``), else ONNX
    Runtime's message."""
    errors = [m.group(1).strip() for text in said for line in text.splitlines() for m in [_HTP_ERROR.search(line)] if m]
    telling = [e for e in errors if "could not create op" in e or "prepare failed" in e.lower()]
    return (telling[0] + f" ({detail[:200]})" if telling else detail)[:400]


def htp_version() -> str:
    """``onnxruntime-qnn 2.7.0 (QAIRT 2.51.0)``."""
    from portable.runners.sessions import qnn_version

    return qnn_version()


def batch_symbols(source: str | bytes) -> tuple[str, ...]:
    """The symbols (or unnamed dims, as ``?``) at dim 0 of the graph's inputs: what must be fixed for QNN."""
    import onnx

    proto = onnx.load_model_from_string(source) if isinstance(source, bytes) else onnx.load(source, load_external_data=False)
    found = []
    for value in proto.graph.input:
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
        if len(dims) and not dims[0].HasField("dim_value"):
            found.append(dims[0].dim_param or "?")
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class HtpAnswer:
    """What the HTP said about one model."""

    version: str
    nodes: tuple[NodeSupport, ...]
    partitions: int = 0  # the QNN EP's subgraphs
    compiled: str = ""  # "" when it compiled, else why not
    ran: str = ""  # "a run on seeded inputs succeeds (0.9 s)" or why not
    batch: tuple[str, ...] = ()  # the symbols fixed to 1 for the answer

    @property
    def refused(self) -> tuple[NodeSupport, ...]:
        return tuple(n for n in self.nodes if not n.taken and not n.by_design)

    @property
    def taken(self) -> int:
        return sum(n.taken for n in self.nodes)

    def batch_note(self) -> str:
        if not self.batch:
            return ""
        named = ", ".join(f"'{s}'" for s in self.batch)
        return (f"answered for a copy at batch 1: QNN needs every dim fixed and the file's batch {named} is symbolic "
                "(every node fails 'Cannot get shape' as it is); export with `portable export --batch N` or "
                "`portable fix --batch N` for the batch the device runs; ")

    def verdict(self) -> str:
        """One line: the nodes, the partitions, the compile and the run."""
        kept = [n for n in self.nodes if not n.taken and n.by_design]
        text = f"{self.batch_note()}the HTP takes {self.taken}/{len(self.nodes)} nodes"
        if self.taken and not self.compiled:
            text += f" in {self.partitions} partition{'' if self.partitions == 1 else 's'}"
        if self.refused:
            counts = Counter(n.op for n in self.refused)
            text += ", refuses " + ", ".join(f"{op} x{n}" for op, n in sorted(counts.items()))
        if kept:
            text += f" ({len(kept)} graph-boundary Q/DQ kept on the CPU by the EP's design)"
        if self.compiled:
            return f"{text}; the graph does not compile: {self.compiled}"
        return f"{text}; compiles (HTP prepare){'; ' + self.ran if self.ran else ''}"

    def pairs(self) -> tuple[tuple[str, str], ...]:
        out = [("verdict", self.verdict()), ("backend", f"QNN HTP simulator, {self.version}"),
               ("nodes", str(len(self.nodes))), ("taken", str(self.taken)),
               ("partitions", str(self.partitions)), ("compiles", "yes" if not self.compiled else f"no: {self.compiled}")]
        if self.ran:
            out.append(("run", self.ran))
        if self.batch:
            out.append(("batch", "fixed to 1 for the answer (symbolic: " + ", ".join(self.batch) + ")"))
        out += [("refused", "; ".join(f"{n.op} '{n.node}': {n.reason}" for n in self.refused))] if self.refused else []
        return tuple(out)


def _partitions(session: Any) -> int:
    return sum(1 for sub in session.get_provider_graph_assignment_info() if sub.ep_name == "QNNExecutionProvider")


def _run(session: Any, feeds: dict[str, Any]) -> str:
    started = time.perf_counter()
    try:
        session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - the simulator's refusal is the answer
        return f"a run fails: {' '.join(str(exc).split())[:300]}"
    return f"a run on seeded inputs succeeds ({time.perf_counter() - started:.2f} s in the simulator)"


def ask_htp(source: str | bytes, symbols: Sequence[str] | None = None, *, run: bool = True,
            feeds: Any = None) -> HtpAnswer:
    """The HTP's answer for a model (a path or its bytes); ``symbols``: its batch symbols (read from the file when
    None), fixed to 1; ``feeds``: a callable giving the run's inputs from the session (batch 1, seeded)."""
    from portable.runners.sessions import SessionFailed, qnn_htp, session_from_onnx, what_ort_says

    batch = tuple(batch_symbols(source) if symbols is None else symbols)
    spec = qnn_htp(log_severity=0, memory_arena=False, free_dims={s: 1 for s in batch if s != "?"},
                   config_entries={"session.record_ep_graph_assignment_info": "1"})
    said: list[str] = []
    version = htp_version()
    try:
        session = session_from_onnx(source, spec, said=said, what="the model on the QNN HTP")
    except SessionFailed as exc:
        return HtpAnswer(version, node_support(said), compiled=_compile_error(said, exc.detail), batch=batch)
    quiet: list[str] = []
    with what_ort_says(quiet):
        ran = _run(session, feeds(session)) if run and feeds is not None else ""
        answer = HtpAnswer(version, node_support(said), _partitions(session), ran=ran, batch=batch)
        del session  # released here, its log kept from the user too
    return answer
