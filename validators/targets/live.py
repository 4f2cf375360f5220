"""Live answers (``portable validate --target ... --live``): the runtimes installed here asked about
the model itself, beside the offline estimate of their profile.

- ``ort-cpu``: an ONNX Runtime CPU session with ``session.record_ep_graph_assignment_info`` on and
  graph optimizations off (so nodes keep their names), read back with
  ``InferenceSession.get_provider_graph_assignment_info()``: which provider got how many nodes,
  or the error that stopped the session.
- ``ort-cuda``: an ONNX Runtime CUDA session, graph optimizations off, its log read at INFO: the nodes
  ORT finds no CUDA kernel for ("CUDA kernel not found in registries for Op type: ..."), the node
  count per provider (ORT also places shape computations on the CPU on purpose: those are counted
  apart), and one run on seeded inputs, since some kernels refuse an input only when they run. The
  ops without a CUDA kernel are set against the offline profile's: each op the two judge differently
  is a disagreement, named.
- ``openvino``: ``Core.read_model`` (the ONNX frontend: where an op it lacks fails) and
  ``Core.query_model(model, "CPU")``: how many of the converted model's operations the CPU plugin takes.
- ``tract``: ``tract.onnx().load(path).into_model()``: its loader and typing, where an op without a
  builder fails.
- ``qnn``: onnxruntime-qnn's QNN EP on its HTP backend (the HTP simulator on x86-64,
  :mod:`portable.validators.targets.htp`): the nodes it takes and those it refuses with QNN's reason, the
  partitions, whether the graph compiles (HTP prepare) and whether a run on seeded inputs succeeds; a
  file with a symbolic batch is answered at batch 1, and the answer says so. Its refusals are set against
  the profile's like the CUDA provider's, and carried node by node (:class:`Live`) for PORT201's findings.

Each runtime's model is made by its one loader in ``portable.runners.sessions`` (the runners' too):
``session_from_onnx``, ``openvino_model``, ``tract_model``.

A runtime that is not installed answers ``not installed`` (``make targets-venv`` installs OpenVINO
and tract, ``pip install 'portable-onnx[qnn]'`` the QNN EP); nothing here is imported unless ``--live`` is
given. :func:`ask` is the one entry point: ``validate --live`` and the fleet's live step both call it.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from portable.errors import one_line
from portable.packages import installed_version

__all__ = ["LIVE", "Live", "OfflineOps", "answer", "ask"]

Answer = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Live:
    """A runtime's answer: ``pairs`` (``verdict`` among them) and, where it names them, the nodes it refused
    (op, node name, its reason) and why the model does not load there at all (``blocking``)."""

    pairs: Answer
    refusals: tuple[tuple[str, str, str], ...] = ()
    blocking: str = ""


class OfflineOps(Counter[str]):
    """The ops (per node) the profile says fall back, and those nodes as (op, name) pairs (``pairs``; a name may be
    empty): a runtime that names the nodes it refuses (QNN's HTP) is compared node by node, over the nodes it was
    given."""

    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, nodes: Iterable[tuple[str, str]]) -> OfflineOps:
        """From (op, node name) pairs."""
        pairs = tuple(nodes)
        found = cls(op for op, _name in pairs)
        found.pairs = pairs
        return found


Question = Callable[[str | bytes, Counter[str]], Live]  # (the model, the ops the profile says fall back)


@contextlib.contextmanager
def _as_file(source: str | bytes) -> Iterator[str]:
    """A path to the model: the file it was read from, or a temporary copy of the bytes."""
    if isinstance(source, str):
        yield source
        return
    with tempfile.TemporaryDirectory(prefix="portable-live-") as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as out:
            out.write(source)
        yield path


_TELLING = re.compile(r"No conversion rule|Unimplemented|not supported|Could not find|NOT_IMPLEMENTED", re.IGNORECASE)


def _message(exc: BaseException) -> str:
    """The line of a runtime's (often many-line) error that names the problem."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    telling = next((line for line in lines if _TELLING.search(line)), None)
    return (telling or one_line(exc, limit=240))[:240]


def _ort_cpu(source: str | bytes) -> str:
    from portable.runners.sessions import FATAL, SessionFailed, SessionSpec, session_from_onnx

    spec = SessionSpec(optimize=False, log_severity=FATAL, memory_arena=False,
                       config_entries={"session.record_ep_graph_assignment_info": "1"})
    try:
        session = session_from_onnx(source, spec)
    except SessionFailed as exc:  # the runtime's refusal is the answer, in its own words
        return f"does not load: {_message(RuntimeError(exc.detail))}"
    counts: Counter[str] = Counter()
    for sub in session.get_provider_graph_assignment_info():
        counts[sub.ep_name] += len(sub.get_nodes())
    placed = ", ".join(f"{n} node{'' if n == 1 else 's'} on {ep}" for ep, n in sorted(counts.items()))
    return f"loads, {placed or 'no nodes assigned'}"


_NO_KERNEL = re.compile(r"CUDA kernel not found in registries for Op type: (\S+) node name: (.*)")


def _no_kernel(said: list[str]) -> Counter[str]:
    """The ops (per node) ONNX Runtime's CUDA provider found no kernel for, from its INFO log; a node named
    twice (the provider is asked again after the layout pass) counts once."""
    nodes = {(m.group(1), m.group(2).strip()) for text in said for m in _NO_KERNEL.finditer(text)}
    return Counter(op for op, _ in nodes)


def _ort_cuda(source: str | bytes, offline: Counter[str]) -> tuple[str, str]:
    """``(verdict, disagreements)`` for the CUDA provider, ``offline`` the ops the profile says fall back."""
    from portable.runners.sessions import SessionFailed, SessionSpec, session_from_onnx

    said: list[str] = []
    spec = SessionSpec("CUDAExecutionProvider", {"device_id": "0"}, optimize=False, log_severity=1,
                       config_entries={"session.record_ep_graph_assignment_info": "1"})
    try:
        session = session_from_onnx(source, spec, said=said)
    except SessionFailed as exc:
        return f"does not load: {_message(RuntimeError(exc.detail))}", "not compared"
    missing, ran = _no_kernel(said), _run_once(session)
    counts: Counter[str] = Counter()
    for sub in session.get_provider_graph_assignment_info():
        counts[sub.ep_name] += len(sub.get_nodes())
    placed = ", ".join(f"{n} on {ep.removesuffix('ExecutionProvider')}" for ep, n in sorted(counts.items()))
    lacking = ", ".join(f"{op} x{n}" for op, n in sorted(missing.items())) or "none"
    return f"loads, {placed}; no CUDA kernel: {lacking}; {ran}", _disagreements(offline, missing)


_NUMPY = {"float": "float32", "float16": "float16", "double": "float64", "int64": "int64", "int32": "int32",
          "int8": "int8", "uint8": "uint8", "bool": "bool"}


def _seeded_feeds(session: Any) -> dict[str, Any]:
    """Batch-1 inputs for the session's own signature: floats standard normal, integers 0 or 1 (a valid
    index into any table), symbolic dims 1. (The runners' feeds are not imported: validators sit below
    runners, docs/layout.md's floors; this question only needs the kernels to run.)"""
    import numpy as np

    rng, feeds = np.random.default_rng(0), {}
    for spec in session.get_inputs():
        dtype = _NUMPY.get(spec.type.removeprefix("tensor(").removesuffix(")"))
        if dtype is None:
            raise ValueError(f"input {spec.name!r} has type {spec.type}: no seeded value for it")
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.shape]
        values = rng.standard_normal(shape) if dtype.startswith("float") else rng.integers(0, 2, shape)
        feeds[spec.name] = values.astype(dtype)
    return feeds


def _run_once(session: Any) -> str:
    """One run on seeded inputs (batch 1): a kernel that refuses its input says so only here."""
    try:
        session.run(None, _seeded_feeds(session))
    except Exception as exc:  # noqa: BLE001 - a kernel's refusal is the answer
        return f"a run fails: {_message(exc)}"
    return "a run on seeded inputs succeeds"


def _disagreements(offline: Counter[str], live: Counter[str], who: str = "ORT") -> str:
    """The ops the offline profile and the runtime (``who``) judge differently, with both sides' node counts."""
    ops = sorted(op for op in set(offline) | set(live) if offline[op] != live[op])
    if not ops:
        return "0"
    return f"{len(ops)}: " + ", ".join(f"{op} (offline {offline[op]}, {who} {live[op]})" for op in ops)


def _openvino(source: str | bytes) -> str:
    from portable.runners.sessions import LoadFailed, openvino_model

    with _as_file(source) as path:
        try:
            core, model = openvino_model(path)
        except LoadFailed as exc:  # the frontend's refusal is the answer, in its own words
            return f"read_model fails: {_message(exc.error)}"
    ops = {op.get_friendly_name() for op in model.get_ops() if op.get_type_name() not in ("Parameter", "Result", "Constant")}
    taken = set(core.query_model(model, "CPU")) & ops
    return f"read_model ok; query_model(CPU) takes {len(taken)}/{len(ops)} operations"


def _tract(source: str | bytes) -> str:
    from portable.runners.sessions import LoadFailed, tract_model

    with _as_file(source) as path:
        try:
            tract_model(path)
        except LoadFailed as exc:
            return f"does not load: {_message(exc.error)}"
    return "loads (tract.onnx().load(...).into_model())"


def _cuda_question(source: str | bytes, offline: Counter[str]) -> Live:
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return Live((("verdict", "not installed (this onnxruntime has no CUDA provider: onnxruntime-gpu has)"),))
    verdict, disagreements = _ort_cuda(source, offline)
    return Live((("verdict", verdict), ("disagreements", disagreements)))


def _qnn(source: str | bytes, offline: Counter[str]) -> Live:
    """The QNN HTP's answer (:func:`portable.validators.targets.htp.ask_htp`), its refusals set against the profile's
    node by node, over the nodes the HTP was given (ONNX Runtime folds and fuses some before: not compared)."""
    from portable.validators.targets.htp import ask_htp

    found = ask_htp(source, feeds=_seeded_feeds)
    blocking = f"the HTP cannot compile the graph: {found.compiled}" if found.compiled else ""
    shapes = [n for n in found.refused if any(words in n.reason for words in _SHAPE_WORDS)]
    said = (("refused_for_shapes", f"{len(shapes)} node(s) refused for their shapes (QNN needs every dim fixed: "
                                   "the estimate's 'with a fixed batch' counts them), not compared by op"),) if shapes else ()
    return Live((*found.pairs(), ("disagreements", _node_disagreements(offline, found, shapes)), *said),
                tuple((n.op, n.node, n.reason) for n in found.refused), blocking)


# the HTP's words for a node refused for its shapes, not its op (a symbolic dim beyond the batch, a computed shape)
_SHAPE_WORDS = ("Cannot get shape", "shape must be static", "dynamic shape")


def _node_disagreements(offline: Counter[str], found: Any, shapes: list[Any]) -> str:
    """The ops of the nodes the profile and the HTP judge differently, over the nodes the HTP was given: by name,
    and for unnamed nodes by op, as many as it saw (a node refused for its shapes is not an op's verdict)."""
    if not isinstance(offline, OfflineOps):  # asked without the profile's nodes (the fleet's live step)
        return "not compared"
    judged = [n for n in found.nodes if not n.by_design and n not in shapes]
    live = Counter(n.op for n in judged if not n.taken)
    named = {n.node for n in judged if n.node}
    said = Counter(op for op, name in offline.pairs if name and name in named)
    unnamed = Counter(n.op for n in judged if not n.node)
    said += Counter({op: min(count, unnamed[op]) for op, count in Counter(op for op, name in offline.pairs if not name).items()})
    return _disagreements(said, live, "HTP")


def _plain(question: Callable[[str | bytes], str]) -> Question:
    """A question whose answer is its verdict alone (the offline ops are not compared)."""
    return lambda source, offline: Live((("verdict", question(source)),))


# target -> (package to import, the question)
LIVE: dict[str, tuple[str, Question]] = {
    "ort-cpu": ("onnxruntime", _plain(_ort_cpu)),
    "ort-cuda": ("onnxruntime", _cuda_question),
    "openvino": ("openvino", _plain(_openvino)),
    "tract": ("tract", _plain(_tract)),
    "qnn": ("onnxruntime_qnn", _qnn),
}
# how to install a runtime that is not here, where it is not `make targets-venv`
INSTALL = {"onnxruntime_qnn": "pip install 'portable-onnx[qnn]' (onnxruntime-qnn, the QNN EP with its HTP simulator)"}


def answer(target: str, source: str | bytes, offline: Counter[str] | None = None) -> Live:
    """The live answer for ``target`` (empty when no runtime here can give one); ``offline``: the ops
    (per node) the profile says fall back, for a runtime whose answer is compared with it."""
    if target not in LIVE:
        return Live(())
    package, question = LIVE[target]
    found = _version(package)
    if found is None:
        hint = f": {INSTALL[package]}" if package in INSTALL else ""
        return Live((("runtime", package.replace("_", "-")), ("verdict", f"not installed{hint}")))
    try:
        said = question(source, offline if offline is not None else Counter())
    except Exception as exc:  # noqa: BLE001 - a runtime that breaks is reported, not raised
        said = Live((("verdict", f"error: {one_line(exc, limit=240)}"),))
    return Live((("runtime", f"{package.replace('_', '-')} {found}"), *said.pairs), said.refusals, said.blocking)


def ask(target: str, source: str | bytes, offline: Counter[str] | None = None) -> Answer:
    """:func:`answer`'s pairs: what ``validate --live`` prints and the fleet's live step records."""
    return answer(target, source, offline).pairs


def _version(package: str) -> str | None:
    """The version of the package Python imports (onnxruntime-gpu's module is ``onnxruntime`` too)."""
    names = (package, f"{package}-gpu", package.replace("_", "-"))
    if all(installed_version(name) is None for name in names):
        return None
    module = __import__(package)
    return str(getattr(module, "__version__", None) or installed_version(package))
