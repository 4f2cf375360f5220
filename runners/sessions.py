"""One ONNX Runtime session factory (Polygraphy's ``SessionFromOnnx`` is the model).

Every ONNX Runtime session portable makes comes from :func:`session_from_onnx`: export's verify,
``fix``'s proof, ``compare``'s runners, ``--localize``, PORT014 and the target checks. So the
provider options, the log levels, the threads and spinning, the graph optimization level and the
wording of a load failure are decided here once, from a frozen :class:`SessionSpec`.

* Quiet: ONNX Runtime's default logger and the session's logger at ERROR (or FATAL where the
  caller words the failure itself); its warnings are noise to a user, its error reaches them as
  one line (:class:`SessionFailed`).
* No silent fallback: the session must run on the provider asked for, else :class:`SessionFailed`.
* ``spinning``: ONNX Runtime's intra-op threads spin-wait after a run by default
  (``session.intra_op.allow_spinning``), which steals the cores from whatever runs next in the
  process: ``compare`` turns it off while other runners are timed beside it.
* ``load_model_format`` is always ONNX: a file is never read as the ORT format by its suffix.

The other runtimes' loaders live here too, one per runtime, for their runner and for ``validate --live``
alike: :func:`openvino_model` (``Core.read_model``) and :func:`openvino_compiled` (``Core.compile_model``),
:func:`tract_model` (``tract.onnx().load(path).into_model()``). Each imports its (optional) runtime when
called and words its refusal once, as :class:`LoadFailed`.

A *plugin* execution provider (ONNX Runtime's EP ABI: a library shipped in its own package, such as
``onnxruntime-qnn``'s QNN EP) is registered with ONNX Runtime once per process
(``register_execution_provider_library``) and given to the session through the devices it reports
(``get_ep_devices``, ``SessionOptions.add_provider_for_devices``): :data:`PLUGINS` names each one's package.
:func:`qnn_htp` is the spec of a session on the QNN EP's HTP backend (on x86-64: Qualcomm's HTP simulator).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from portable.errors import one_line
from portable.runners.base import RunnerFailed

__all__ = ["CPU", "ERROR", "FATAL", "PLUGINS", "QNN", "LoadFailed", "SessionFailed", "SessionSpec", "fallback_reason",
           "openvino_compiled", "openvino_model", "qnn_htp", "qnn_version", "session_from_onnx", "tract_message", "tract_model",
           "what_ort_says"]

CPU = "CPUExecutionProvider"
ERROR, FATAL = 3, 4  # ONNX Runtime's severity levels (0 verbose ... 4 fatal)
QNN = "QNNExecutionProvider"
# plugin execution provider -> the package that ships its library (its module's get_library_path())
PLUGINS: dict[str, str] = {QNN: "onnxruntime_qnn"}


@dataclass(frozen=True)
class SessionSpec:
    """How to build a session: the provider and its options, and the session options that matter."""

    provider: str = CPU
    provider_options: Mapping[str, str] = field(default_factory=dict)
    optimize: bool = True  # False: ORT_DISABLE_ALL, nodes run as written (localize, PORT014)
    spinning: bool | None = None  # None: ONNX Runtime's default (spinning on)
    intra_op_threads: int | None = None  # None: ONNX Runtime's default (one per physical core)
    log_severity: int = ERROR
    memory_arena: bool = True  # False for a session that is never run (PORT014)
    profile_prefix: str | None = None
    config_entries: Mapping[str, str] = field(default_factory=dict)  # e.g. session.record_ep_graph_assignment_info
    # symbolic dims fixed by ONNX Runtime when it loads the graph (add_free_dimension_override_by_name): the
    # session answers for the model at that size, as a copy with the dim fixed would
    free_dims: Mapping[str, int] = field(default_factory=dict)

    def with_(self, **changes: Any) -> SessionSpec:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """What a report shows of the session (the options asked for; ``compare`` also reports
        what ONNX Runtime gives back)."""
        return {"provider": self.provider, "provider_options": dict(self.provider_options), "optimize": self.optimize,
                "spinning": self.spinning, "intra_op_threads": self.intra_op_threads}


class SessionFailed(RunnerFailed):
    """ONNX Runtime cannot create the session; ``detail`` is its own message on one line."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.message, self.detail = message, detail


def session_options(spec: SessionSpec) -> Any:
    """``onnxruntime.SessionOptions`` for ``spec``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.load_model_format", "ONNX")  # never by the file's suffix
    options.log_severity_level = spec.log_severity
    if not spec.optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if spec.spinning is not None:
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spec.spinning else "0")
    if spec.intra_op_threads is not None:
        options.intra_op_num_threads = spec.intra_op_threads
    options.enable_cpu_mem_arena = spec.memory_arena
    for key, value in spec.config_entries.items():
        options.add_session_config_entry(key, value)
    for symbol, size in spec.free_dims.items():
        options.add_free_dimension_override_by_name(symbol, size)
    if spec.profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = spec.profile_prefix
    if spec.provider in PLUGINS:
        options.add_provider_for_devices(_plugin_devices(spec.provider), dict(spec.provider_options))
    return options


_REGISTERED: set[str] = set()


def _plugin_devices(provider: str) -> list[Any]:
    """The devices a plugin execution provider reports, its library registered with ONNX Runtime on first use
    (once per process: a second registration of the same name is an error); :class:`LoadFailed` when its package
    is not installed or it reports no device."""
    import onnxruntime as ort

    module = _runtime(PLUGINS[provider], hint=f"pip install 'portable-onnx[{provider.removesuffix('ExecutionProvider').lower()}]'")
    if provider not in _REGISTERED:
        ort.register_execution_provider_library(provider, module.get_library_path())
        _REGISTERED.add(provider)
    devices = [d for d in ort.get_ep_devices() if d.ep_name == provider]
    if not devices:
        raise LoadFailed(f"{provider} reports no device", RuntimeError("get_ep_devices() lists none"))
    return devices


def qnn_version() -> str:
    """``onnxruntime-qnn 2.7.0 (QAIRT 2.51.0)``: the QNN EP's package and the Qualcomm SDK its wheel ships."""
    info = _runtime(PLUGINS[QNN], hint="pip install 'portable-onnx[qnn]'").build_and_package_info
    return f"onnxruntime-qnn {info.__version__} (QAIRT {getattr(info, 'qnn_version', '?')})"


_QNN_PRIMED: list[bool] = []  # process-wide, as QNN's own log level is: whether the first QNN session was made


def _prime_qnn(spec: SessionSpec) -> None:
    """QNN's HTP backend takes the log level of the process's first QNN session and keeps it (measured: after a
    runner's session at ERROR, the live check's session at VERBOSE no longer got the HTP's reasons for a refusal).
    The first one is therefore a one-Relu session at VERBOSE, its log dropped: a later session that reads the log
    gets QNN's words, and a quiet one (its own level ERROR) prints nothing on its runs."""
    from onnx import TensorProto, helper

    _QNN_PRIMED.append(True)
    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "qnn_log_level", value[:1], value[1:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with contextlib.suppress(SessionFailed):
        session_from_onnx(model.SerializeToString(), spec.with_(log_severity=0), said=[],
                          what="a one-node model (QNN's log level)")


def qnn_htp(**changes: Any) -> SessionSpec:
    """A session on onnxruntime-qnn's QNN EP with its HTP backend (``backend_path``: the wheel's ``libQnnHtp.so``;
    on x86-64 the HTP simulator, which validates each node with Qualcomm's op definitions and runs the NPU's
    arithmetic); ``changes`` as :meth:`SessionSpec.with_`. :class:`LoadFailed` when the package is not installed."""
    module = _runtime(PLUGINS[QNN], hint="pip install 'portable-onnx[qnn]'")
    return SessionSpec(QNN, {"backend_path": module.get_qnn_htp_path()}).with_(**changes)


def session_from_onnx(model: str | Path | bytes, spec: SessionSpec = SessionSpec(), *,  # noqa: B008 - frozen
                      what: str = "the model", said: list[str] | None = None) -> Any:
    """An ``onnxruntime.InferenceSession`` for ``model`` (a file's path, or serialized bytes) on
    ``spec.provider``; :class:`SessionFailed` naming ``what`` and the provider when it cannot be made.
    ``said``: a list that receives what ONNX Runtime wrote while the session was made (its log at
    ``spec.log_severity``, kept from the user either way), for a caller that reads its placements."""
    import onnxruntime as ort

    if spec.provider == QNN and not _QNN_PRIMED:
        _prime_qnn(spec)
    # provider-library messages too; below ERROR only for a caller that reads them
    caller_reads = said is not None
    ort.set_default_logger_severity(spec.log_severity if caller_reads else max(spec.log_severity, ERROR))
    source = str(model) if isinstance(model, Path) else model
    said = [] if said is None else said
    try:
        with what_ort_says(said, spec.log_severity if caller_reads else ERROR):
            options = session_options(spec)
            providers = None if spec.provider in PLUGINS else [(spec.provider, dict(spec.provider_options))]
            session = ort.InferenceSession(source, options, providers=providers)
    except LoadFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/InvalidGraph/NotImplemented types
        detail = _without_path(" ".join(str(exc).split()), source)
        raise SessionFailed(f"{_provider(spec)} cannot load {what}: {one_line(exc, limit=400, typed=False)}",
                            detail) from None
    got = session.get_providers()
    if not got or got[0] != spec.provider:
        reason = fallback_reason("\n".join(said))
        because = f" ({reason})" if reason else ""
        raise SessionFailed(f"ONNX Runtime gave providers {got} instead of {spec.provider} for {what}{because}",
                            f"providers {got}{because}")
    return session


@contextlib.contextmanager
def what_ort_says(said: list[str], severity: int = ERROR) -> Iterator[None]:
    """Collect what ONNX Runtime writes while a session is made (or run, or released), instead of letting it reach
    the user: its log through its own Python logging callback (``onnxruntime.set_default_logger_callback``, at
    ``severity``: a provider's messages, one per entry, ``FILE:LINE FUNCTION message``), and whatever is written
    on file descriptors 1 and 2 (messages from threads Python does not know, which ONNX Runtime sends to its
    platform sink; a native library's own prints; a provider library that cannot load, e.g. TensorRT's missing
    ``libnvinfer.so.10``), its Python fallback notice on stdout ("EP Error ... Falling back") and its warnings
    ("Specified provider ... is not in available provider names"). The default logger is back at ERROR after."""
    import onnxruntime as ort

    callback = getattr(ort, "set_default_logger_callback", None)  # onnxruntime >= 1.32
    with tempfile.TemporaryFile(mode="w+b") as log, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        printed = io.StringIO()
        saved = (_redirect_fd(1, log.fileno()), _redirect_fd(2, log.fileno()))
        if callback is not None and severity < ERROR:
            callback(lambda _sev, _cat, _id, where, message: said.append(f"{where} {message}"), severity)
        try:
            with contextlib.redirect_stdout(printed):
                yield
        finally:
            if callback is not None and severity < ERROR:
                callback(None, ERROR)
            ort.set_default_logger_severity(ERROR)
            _restore_fd(2, saved[1])
            _restore_fd(1, saved[0])
            log.seek(0)
            said.extend([log.read().decode("utf-8", "replace"), printed.getvalue()])
            said.extend(str(w.message) for w in caught)


def _redirect_fd(fd: int, target: int) -> int | None:
    """Point ``fd`` at ``target``; the saved copy to restore (None where ``fd`` is not open)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(fd)
    except OSError:
        return None
    os.dup2(target, fd)
    return saved


def _restore_fd(fd: int, saved: int | None) -> None:
    if saved is not None:
        os.dup2(saved, fd)
        os.close(saved)


# ONNX Runtime's words for a provider it did not use, most telling first; the first that matches is the reason
_REASONS = tuple(re.compile(p) for p in (r"Failed to load library .*", r"EP Error .*", r"CUDA failure .*",
                                          r"CUDNN failure .*", r"Specified provider .*", r"\[ONNXRuntimeError\].*"))
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def fallback_reason(text: str) -> str:
    """ONNX Runtime's own words for why a provider was not used, from what it wrote while the session
    was made (a library that cannot load, an EP error), on one line; empty when it said nothing telling."""
    plain = _ANSI.sub("", text)
    for pattern in _REASONS:
        found = pattern.search(plain)
        if found:
            return " ".join(found.group(0).split())[:400]
    return ""


def _provider(spec: SessionSpec) -> str:
    """``ONNX Runtime's CPU provider``: how messages name the provider (``CUDAExecutionProvider`` -> CUDA)."""
    return f"ONNX Runtime's {spec.provider.removesuffix('ExecutionProvider')} provider"


def _without_path(text: str, source: str | bytes) -> str:
    """ONNX Runtime's message without its ``Load model from PATH failed:`` prefix (reports name the file)."""
    if isinstance(source, str):
        return text.replace(f"Load model from {source} failed:", "", 1).strip()
    return text


class LoadFailed(RunnerFailed):
    """An optional runtime cannot load the model (or is not installed): the message names the runtime and the
    step that refused; ``error`` is the runtime's own exception, for a caller that words its answer itself
    (``validate --live`` keeps the line of it that names the problem)."""

    def __init__(self, message: str, error: BaseException) -> None:
        super().__init__(message)
        self.message, self.error = message, error


def _runtime(package: str, hint: str = "make targets-venv") -> Any:
    """The optional runtime's module, imported now; :class:`LoadFailed` saying how to install it when absent."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise LoadFailed(f"{package} is not installed ({hint})", exc) from None


def openvino_model(path: str | Path) -> tuple[Any, Any]:
    """OpenVINO's ``Core`` and the model its ONNX frontend reads from ``path`` (``Core.read_model``, where an
    op it does not translate fails: :class:`LoadFailed` "OpenVINO read_model fails: ...")."""
    core = _runtime("openvino").Core()
    try:
        return core, core.read_model(str(path))
    except Exception as exc:  # noqa: BLE001 - the frontend's refusal is the answer
        raise LoadFailed(f"OpenVINO read_model fails: {one_line(exc, limit=400)}", exc) from None


def openvino_compiled(core: Any, model: Any, device: str = "CPU", config: Mapping[str, str] | None = None) -> Any:
    """``core.compile_model(model, device, config)``: the plugin's compiled model; :class:`LoadFailed`
    "OpenVINO compile_model(CPU) fails: ..." when the plugin refuses it."""
    try:
        return core.compile_model(model, device, dict(config or {}))
    except Exception as exc:  # noqa: BLE001 - the plugin's refusal is the answer
        raise LoadFailed(f"OpenVINO compile_model({device}) fails: {one_line(exc, limit=400)}", exc) from None


def tract_message(exc: BaseException) -> str:
    """tract's error without its Rust backtrace: the message and its causes."""
    text = " ".join(str(exc).split("Stack backtrace:")[0].split())
    return f"{type(exc).__name__}: {text[:400]}"


def tract_model(path: str | Path) -> Any:
    """tract's typed model of ``path``: ``tract.onnx().load(path)`` (its loader: an op without a builder fails,
    "tract does not load the model: ...") then ``into_model()`` (typing: a shape it cannot infer fails, "tract
    cannot type the model: ..."), each refusal a :class:`LoadFailed`."""
    tract = _runtime("tract")
    try:
        inference = tract.onnx().load(str(path))
    except Exception as exc:  # noqa: BLE001 - the loader's refusal is the answer
        raise LoadFailed(f"tract does not load the model: {tract_message(exc)}", exc) from None
    try:
        return inference.into_model()
    except Exception as exc:  # noqa: BLE001
        raise LoadFailed(f"tract cannot type the model: {tract_message(exc)}", exc) from None
