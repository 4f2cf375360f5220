"""Live answers (``portable validate --target ... --live``): the runtimes installed here asked about
the model itself, beside the offline estimate of their profile.

- ``ort-cpu``: an ONNX Runtime CPU session with ``session.record_ep_graph_assignment_info`` on and
  graph optimizations off (so nodes keep their names), read back with
  ``InferenceSession.get_provider_graph_assignment_info()``: which provider got how many nodes,
  or the error that stopped the session.
- ``openvino``: ``Core.read_model`` (the ONNX frontend: where an op it lacks fails) and
  ``Core.query_model(model, "CPU")``: how many of the converted model's operations the CPU plugin takes.
- ``tract``: ``tract.onnx().load(path).into_model()``: its loader and typing, where an op without a
  builder fails.

A runtime that is not installed answers ``not installed`` (``make targets-venv`` installs OpenVINO
and tract); nothing here is imported unless ``--live`` is given.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator

from portable.errors import one_line
from portable.packages import installed_version

__all__ = ["LIVE", "ask"]

Answer = tuple[tuple[str, str], ...]


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


def _openvino(source: str | bytes) -> str:
    import openvino as ov

    core = ov.Core()
    with _as_file(source) as path:
        try:
            model = core.read_model(path)
        except Exception as exc:  # noqa: BLE001
            return f"read_model fails: {_message(exc)}"
    ops = {op.get_friendly_name() for op in model.get_ops() if op.get_type_name() not in ("Parameter", "Result", "Constant")}
    taken = set(core.query_model(model, "CPU")) & ops
    return f"read_model ok; query_model(CPU) takes {len(taken)}/{len(ops)} operations"


def _tract(source: str | bytes) -> str:
    import tract

    with _as_file(source) as path:
        try:
            tract.onnx().load(path).into_model()
        except Exception as exc:  # noqa: BLE001
            return f"does not load: {_message(exc)}"
    return "loads (tract.onnx().load(...).into_model())"


# target -> (package to import, what its version is reported as, the question)
LIVE: dict[str, tuple[str, Callable[[str | bytes], str]]] = {
    "ort-cpu": ("onnxruntime", _ort_cpu),
    "openvino": ("openvino", _openvino),
    "tract": ("tract", _tract),
}


def ask(target: str, source: str | bytes) -> Answer:
    """The live answer for ``target`` (empty when no runtime here can give one)."""
    if target not in LIVE:
        return ()
    package, question = LIVE[target]
    found = installed_version(package)
    if found is None:
        return (("runtime", package), ("verdict", "not installed"))
    try:
        verdict = question(source)
    except Exception as exc:  # noqa: BLE001 - a runtime that breaks is reported, not raised
        verdict = f"error: {one_line(exc, limit=240)}"
    return (("runtime", f"{package} {found}"), ("verdict", verdict))
