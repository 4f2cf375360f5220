"""Parsers of the runtimes' own support tables, one function per upstream format.

Each takes the upstream file's text and returns a :class:`Parsed`: the op rows and whatever else
the file states (element types, preferred casts, an opset range). What a file does not state stays
``None``/empty: nothing is filled in by hand. Formats (in the upstream repositories):

- ONNX Runtime ``docs/OperatorKernels.md`` (generated from the registered kernels): per execution
  provider, ``|Op|params|versions|types|`` rows, continuation rows ``|||versions|types|``.
- ONNX Runtime ``nnapi_supported_ops.md`` / ``coreml_supported_*_ops.md``: ``|domain:Op|caveats|``,
  read as ORT's ``usability_checker._SupportedOpsChecker`` reads them; the checker's own settings
  (fixed input sizes, CoreML's rank limit) from ``usability_checker.py``.
- onnx-tensorrt ``docs/operators.md``: ``| Op | Y/N | types | restrictions |`` and the data-type notes.
- OpenVINO ``src/frontends/onnx/docs/supported_ops.md``: ``|domain|Op|supported versions|defined|limitation|``.
- ONNX Runtime QNN EP ``op_builder_factory.cc`` (``Create*OpBuilder("Op", ...)``) and ``qnn_utils.cc``
  (the ONNX -> QNN element type map).
- tract ``onnx/src/**.rs`` (``reg.insert("Op", ...)``).
- ONNX Runtime Web ``js/web/docs/webnn-operators.md``: ``| Op | domain(7-12, 13+), ... | WebNN ops | constraints |``.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from portable.validators.targets.profile import ANY_DOMAIN, OpEntry, VersionRange

__all__ = [
    "Parsed",
    "migraphx_ops",
    "mobile_ops",
    "onnx2tf_constraints",
    "onnx2tf_element_types",
    "onnx2tf_registry",
    "openvino_ops",
    "ort_kernels",
    "htp_answers",
    "qnn_builders",
    "qnn_element_types",
    "tensorrt_ops",
    "tract_registry",
    "usability_settings",
    "webgpu_kernels",
    "webnn_ops",
]


@dataclass(frozen=True)
class Parsed:
    """What one upstream file states."""

    ops: Mapping[str, OpEntry]
    element_types: tuple[str, ...] | None = None
    prefer: tuple[tuple[str, str], ...] = ()
    opset_range: tuple[int, int] | None = None
    notes: tuple[str, ...] = ()


def onnx_type(name: str) -> str:
    """``float`` -> ``float32``, ``double`` -> ``float64``; ONNX's other names as they are (lower case)."""
    name = name.strip().lower()
    return {"float": "float32", "double": "float64"}.get(name, name)


# -- ONNX Runtime OperatorKernels.md ------------------------------------------------------

_KERNEL_TYPE = re.compile(r"(seq|optional)?\(?tensor\((\w+)\)\)?")


def _kernel_types(cell: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``**T** = tensor(double), tensor(float)<br/> **T1** = tensor(bool)`` -> (("T", ("float64", "float32")), ...)."""
    out = []
    for part in cell.split("<br/>"):
        name, sep, values = part.partition("=")
        if not sep:
            continue
        found = [(kind, onnx_type(t)) for kind, t in _KERNEL_TYPE.findall(values)]
        types = tuple(f"{kind}({t})" if kind else t for kind, t in found)
        out.append((name.strip().strip("*"), types))
    return tuple(out)


def _kernel_range(cell: str) -> VersionRange:
    """``13+``, ``[6, 12]`` or ``13``."""
    cell = cell.strip()
    if cell.endswith("+"):
        return VersionRange(int(cell[:-1]))
    if cell.startswith("["):
        low, high = (int(v) for v in cell.strip("[]").split(","))
        return VersionRange(low, high)
    return VersionRange(int(cell), int(cell))


def _provider_lines(text: str, provider: str) -> list[str]:
    """The table lines of one execution provider's section."""
    lines = text.splitlines()
    head = f"## Operators implemented by {provider}"
    if head not in lines:
        raise ValueError(f"no section {head!r} in the kernel table")
    start = lines.index(head) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line.startswith("|")]


def ort_kernels(text: str, provider: str) -> Parsed:
    """One execution provider's kernels: per op, its version ranges and types per constraint."""
    rows: dict[str, list[VersionRange]] = {}
    domain, op = "ai.onnx", ""
    for line in _provider_lines(text, provider):
        cells = line.split("|")[1:-1]
        if len(cells) != 4 or cells[0].startswith("-") or cells[0].strip() == "Op Name":
            continue
        marker = re.match(r"\*\*Operator Domain:\*\* \*(.+)\*", cells[0])
        if marker:
            domain = marker.group(1)
            continue
        op = cells[0].strip() or op
        version = _kernel_range(cells[2])
        rows.setdefault(f"{domain}:{op}", []).append(VersionRange(version.since, version.until, _kernel_types(cells[3])))
    return Parsed(ops={key: OpEntry(versions=tuple(ranges)) for key, ranges in rows.items()})


# -- ONNX Runtime mobile tables (NNAPI, CoreML) and the usability checker -----------------


def mobile_ops(text: str) -> Parsed:
    """``|domain:Op|caveats|`` rows, read as ``_SupportedOpsChecker`` reads them: a line starting
    with ``|`` that splits into 4 pieces and whose first cell holds ``:``; ``<br/>`` -> space."""
    ops = {}
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        pieces = line.strip().split("|")
        if len(pieces) == 4 and ":" in pieces[1]:
            ops[pieces[1]] = OpEntry(notes=pieces[2].replace("<br/>", " ").strip())
    return Parsed(ops=ops)


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise ValueError(f"no function {name}() in the usability checker")


def _first_assignment(func: ast.FunctionDef, target: str) -> object:
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target for t in node.targets):
            if isinstance(node.value, ast.Constant):
                return node.value.value
    raise ValueError(f"no constant assignment to {target} in {func.name}()")


def usability_settings(text: str) -> dict[str, object]:
    """What ORT's ``usability_checker.py`` estimates partitions with: ``checker()``'s first
    ``require_fixed_input_sizes`` and ``check_coreml_partitions()``'s ``max_rank``."""
    tree = ast.parse(text)
    return {"fixed_sizes": _first_assignment(_function(tree, "check_ep"), "require_fixed_input_sizes"),
            "coreml_max_rank": _first_assignment(_function(tree, "check_coreml_partitions"), "max_rank")}


# -- onnx-tensorrt docs/operators.md ------------------------------------------------------

_TRT_TYPES = {"FP32": "float32", "FLOAT32": "float32", "FLOAT": "float32", "FP16": "float16", "FLOAT16": "float16",
              "BF16": "bfloat16", "BFLOAT16": "bfloat16", "DOUBLE": "float64", "FP8": "float8e4m3fn", "INT4": "int4",
              "INT8": "int8", "UINT8": "uint8", "INT32": "int32", "INT64": "int64", "BOOL": "bool"}


def _trt_types(cell: str, op: str, unread: list[str]) -> tuple[str, ...]:
    out = []
    for token in (t.strip() for t in cell.split(",")):
        if token in _TRT_TYPES:
            out.append(_TRT_TYPES[token])
        elif token:
            unread.append(f"{op}: type {token!r} is not a TensorRT type name; left out")
    return tuple(out)


def _trt_header(text: str) -> tuple[tuple[str, ...] | None, tuple[tuple[str, str], ...], tuple[int, int] | None]:
    listed = re.search(r"supports the following ONNX data types: ([A-Z0-9, ]+?)(?:, and | and )([A-Z0-9]+)", text)
    types = None
    if listed:
        types = tuple(dict.fromkeys(_TRT_TYPES[t.strip()] for t in (*listed.group(1).split(","), listed.group(2))
                                    if t.strip() in _TRT_TYPES))
    casts = tuple((_TRT_TYPES[a], _TRT_TYPES[b]) for a, b in re.findall(r"cast (\w+) down to (\w+)", text)
                  if a in _TRT_TYPES and b in _TRT_TYPES)
    opsets = re.search(r"range of opset (\d+) to opset (\d+)", text)
    return types, casts, (int(opsets.group(1)), int(opsets.group(2))) if opsets else None


def tensorrt_ops(text: str) -> Parsed:
    """The operator matrix (``Y``/``N``, types, restrictions) and the data-type notes above it."""
    ops: dict[str, OpEntry] = {}
    unread: list[str] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[1] not in ("Y", "N") or not re.fullmatch(r"\w+", cells[0]):
            continue
        listed = _trt_types(cells[2], cells[0], unread) if len(cells) > 2 else ()
        caveat = re.sub(r"<br\s*/?>", " ", cells[3]).strip() if len(cells) > 3 else ""
        ops[f"ai.onnx:{cells[0]}"] = OpEntry(supported=cells[1] == "Y", data_types=listed or None, notes=caveat)
    types, casts, opsets = _trt_header(text)
    notes = tuple(line.lstrip("> ").strip() for line in text.splitlines() if line.startswith("> Note:"))
    return Parsed(ops=ops, element_types=types, prefer=casts, opset_range=opsets, notes=notes + tuple(unread))


# -- OpenVINO ONNX frontend supported_ops.md ----------------------------------------------


def _since_ranges(cell: str) -> tuple[VersionRange, ...]:
    """``14, 13, 7`` (the op versions a translator is registered for) -> 7..12, 13..13, 14+:
    each registration serves its version up to the next one."""
    since = sorted({int(v) for v in cell.split(",") if v.strip()})
    return tuple(VersionRange(v, since[i + 1] - 1 if i + 1 < len(since) else None) for i, v in enumerate(since))


def openvino_ops(text: str) -> Parsed:
    """``|domain|Op|supported versions|defined versions|limitation|`` rows; domain "" is ai.onnx;
    a row without supported versions is an op the frontend does not translate."""
    ops = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"[\w.]+", cells[1]) or cells[1] == "Operation":
            continue
        domain, op, supported, _defined, limitation = cells
        ranges = _since_ranges(supported)
        ops[f"{domain or 'ai.onnx'}:{op}"] = OpEntry(supported=bool(ranges), versions=ranges or None, notes=limitation)
    return Parsed(ops=ops)


# -- QNN EP op builders and type map -------------------------------------------------------


def qnn_builders(text: str) -> Parsed:
    """Every ``Create<Kind>OpBuilder("Op", *this)`` registration; looked up by op type alone."""
    names = re.findall(r"Create\w*OpBuilder\(\s*\"(\w+)\"", text)
    return Parsed(ops={f"{ANY_DOMAIN}:{name}": OpEntry() for name in names})


def qnn_element_types(text: str) -> tuple[str, ...]:
    """The ONNX element types of ``OnnxDataTypeToQnnDataType``'s (not quantized) map."""
    block = re.search(r"onnx_to_qnn_data_type = \{(.*?)\};", text, re.DOTALL)
    if block is None:
        raise ValueError("no onnx_to_qnn_data_type map in qnn_utils.cc")
    return tuple(onnx_type(t) for t in re.findall(r"ONNX_TENSOR_ELEMENT_DATA_TYPE_(\w+)", block.group(1)))


_NODE_NAME = re.compile(r" in the node '[^']*'")
_TYPED = ("Unsupported input/output datatypes", "Failed to map Onnx data type", "Unsupported FP64", "datatype",
          "could not create op")


def _typed(reason: str) -> bool:
    return any(words in reason for words in _TYPED)
_SKIPPED = ("QuantizeLinear", "DequantizeLinear")  # judged as members of a QDQ unit, not alone


Kinds = dict[str, tuple[tuple[str, str], ...]]


def htp_answers(text: str) -> tuple[Kinds, Kinds, str, frozenset[str]]:
    """The QNN HTP's measured answers (``validators/targets/measured/qnn-htp.json``, written by
    ``python -m portable.validators.targets.htp_answers``): per op, the kinds it refused (with its reason), a note
    per kind it refused only in some cases, the runtime that answered, and the ops it took at least once. Q and DQ
    alone are not judged (the EP takes them as members of a QDQ unit)."""
    import json

    data = json.loads(text)
    runtime = data["runtime"]
    refused: Kinds = {}
    notes: Kinds = {}
    for op, kinds in data["ops"].items():
        if op in _SKIPPED:
            continue
        never = [(kind, _NODE_NAME.sub("", r["reason"])) for kind, r in kinds.items() if r["refused"] and not r["taken"]]
        # one refused probe alone is an attribute's or a mode's as likely as the op's: a note, not a refusal,
        # unless the HTP says it is the data types (its I/O type sets) or the data type has no QNN counterpart
        never = [(kind, reason) for kind, reason in never if kinds[kind]["refused"] > 1 or _typed(reason)]
        some = [(kind, f"the HTP ({runtime}) refused {r['refused']} of its {r['taken'] + r['refused']} {kind} probes: "
                       f"{r['case']}: {_NODE_NAME.sub('', r['reason'])}")
                for kind, r in kinds.items() if r["refused"] and kind not in dict(never)]
        if never:
            refused[op] = tuple((kind, f"the HTP refused it in every probe ({runtime}): {reason}") for kind, reason in never)
        if some:
            notes[op] = tuple(some)
    taken = frozenset(op for op, kinds in data["ops"].items() if any(r["taken"] for r in kinds.values()))
    return refused, notes, runtime, taken


# -- tract ---------------------------------------------------------------------------------


def tract_registry(texts: Iterable[str]) -> Parsed:
    """Every ``reg.insert("Op", ...)`` in tract-onnx's sources; tract looks ops up by type alone."""
    names = sorted({name for text in texts for name in re.findall(r"reg\.insert\(\s*\"(\w+)\"", text)})
    return Parsed(ops={f"{ANY_DOMAIN}:{name}": OpEntry() for name in names})


# -- ONNX Runtime Web's WebNN EP table --------------------------------------------------------

_DOMAIN_RANGES = re.compile(r"([\w.]+)\(([^)]*)\)")


def _dashed_ranges(cell: str) -> tuple[VersionRange, ...]:
    """``7-12, 13, 14+`` -> [7, 12], [13, 13], 14+."""
    out = []
    for part in (p.strip() for p in cell.split(",")):
        if part.endswith("+"):
            out.append(VersionRange(int(part[:-1])))
        elif "-" in part:
            low, high = part.split("-")
            out.append(VersionRange(int(low), int(high)))
        elif part:
            out.append(VersionRange(int(part), int(part)))
    return tuple(out)


def webnn_ops(text: str) -> Parsed:
    """``| Op | ai.onnx(7-12, 13+), com.microsoft(1+) | WebNN ops | constraints |`` rows: one entry per
    (domain, op) with its version ranges; the constraints column, verbatim, is the entry's restriction."""
    ops = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not re.fullmatch(r"\w+", cells[0]) or cells[0] == "Operator":
            continue
        op, opsets, _webnn, constraints = cells
        for domain, ranges in _DOMAIN_RANGES.findall(opsets):
            ops[f"{domain}:{op}"] = OpEntry(versions=_dashed_ranges(ranges), notes=constraints)
    return Parsed(ops=ops)


# -- ONNX Runtime's WebGPU EP: its kernel registration tables ---------------------------------

_ORT_DOMAINS = {"kOnnxDomain": "ai.onnx", "kMSDomain": "com.microsoft", "kMSInternalNHWCDomain": "com.ms.internal.nhwc"}
_CPP_TYPES = {"float": "float32", "double": "float64", "MLFloat16": "float16", "BFloat16": "bfloat16", "bool": "bool",
              "int8_t": "int8", "uint8_t": "uint8", "int32_t": "int32", "uint32_t": "uint32", "int64_t": "int64"}
_KERNEL_CLASS = re.compile(r"ONNX_OPERATOR_(VERSIONED_)?(TYPED_)?KERNEL_CLASS_NAME\(\s*\w+,\s*(\w+),\s*([^)]*)\)")
_KERNEL_MACRO = re.compile(r"\bKERNEL_CREATE_INFO(_VERSIONED)?(_TYPED)?\(([^)]*)\)")
_CREATED = re.compile(r"Register\(\s*Create(\w+)KernelInfo\b")
_TABLE = "function_table[] = {"

Registration = tuple[str, int, int | None, str | None]  # "domain:Op", since, until, the typed kernel's type


def _registration(domain: str, versioned: bool, typed: bool, args: str) -> Registration:
    """One kernel class name's arguments (``since[, end][, type], Op``) as (key, since, until, type)."""
    if domain not in _ORT_DOMAINS:
        raise ValueError(f"unknown kernel domain {domain!r}")
    parts = [a.strip() for a in args.split(",")]
    until = int(parts[1]) if versioned else None
    cpp = parts[-2] if typed else None
    if cpp is not None and cpp not in _CPP_TYPES:
        raise ValueError(f"unknown kernel type {cpp!r} of {parts[-1]}")
    return f"{_ORT_DOMAINS[domain]}:{parts[-1]}", int(parts[0]), until, _CPP_TYPES[cpp] if cpp else None


def _code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.lstrip().startswith(("//", "#"))]


def _registered(text: str) -> list[Registration]:
    """The kernels one registration file registers: its table's entries, then the ops registered by a
    ``Create<Op>KernelInfo`` function, at the versions their class declarations state."""
    if _TABLE not in text:
        raise ValueError("no kernel registration table (function_table[]) in the file")
    head, body = text.split(_TABLE, 1)
    body_lines = _code_lines(body)
    out = [_registration(m.group(3), bool(m.group(1)), bool(m.group(2)), m.group(4))
           for line in body_lines for m in _KERNEL_CLASS.finditer(line)]
    out += [_registration("kOnnxDomain", bool(m.group(1)), bool(m.group(2)), m.group(3))
            for line in body_lines for m in _KERNEL_MACRO.finditer(line)]
    created = {m.group(1) for line in body_lines for m in _CREATED.finditer(line)}
    declared = [_registration(m.group(3), bool(m.group(1)), bool(m.group(2)), m.group(4))
                for line in _code_lines(head) if line.lstrip().startswith("class ") for m in _KERNEL_CLASS.finditer(line)]
    return out + [r for r in declared if r[0].split(":")[1] in created]


def webgpu_kernels(texts: Iterable[str]) -> Parsed:
    """Per op, the version ranges its kernels are registered for; a typed kernel (``Range`` for float
    and int32) gives its range the types of its ``T`` (the constraint ORT's typed kernel macros bind)."""
    ranges: dict[str, dict[tuple[int, int | None], list[str] | None]] = {}
    for key, since, until, dtype in (r for text in texts for r in _registered(text)):
        types = ranges.setdefault(key, {}).setdefault((since, until), [] if dtype else None)
        if dtype is not None and types is not None and dtype not in types:
            types.append(dtype)
    ops = {key: OpEntry(versions=tuple(VersionRange(since, until, (("T", tuple(t)),) if t else ())
                                       for (since, until), t in found.items()))
           for key, found in ranges.items()}
    return Parsed(ops=ops)


# -- AMD MIGraphX docs/dev/onnx_operators.rst ------------------------------------------------

_MIGX_TYPES = {"BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
               "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64", "FLOAT16": "float16",
               "FLOAT32": "float32", "DOUBLE": "float64"}
_SUPPORTED = {"\u2705": True, "\u274c": False}  # the table's check mark and cross


def _grid_rows(text: str) -> list[list[str]]:
    """An RST grid table's rows, each cell's lines joined by a space; whitespace inside an embedded
    URI (``<https://...>``) is dropped, as docutils drops it."""
    rows: list[list[str]] = []
    cells: list[list[str]] | None = None
    for line in text.splitlines():
        if line.startswith("+"):
            if cells:
                rows.append([re.sub(r"<([^>]*)>", lambda m: "<" + re.sub(r"\s+", "", m.group(1)) + ">", " ".join(c))
                             for c in cells])
            cells = None
        elif line.startswith("|"):
            parts = [c.strip() for c in line.strip().strip("|").split("|")]
            cells = cells if cells is not None and len(cells) == len(parts) else [[] for _ in parts]
            for cell, part in zip(cells, parts, strict=True):
                if part:
                    cell.append(part)
    return rows


def _migx_types(text: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """The element types the data-type sentence lists; FLOAT8 is the variant the FP8 note names."""
    listed = re.search(r"supports the following ONNX data types: ([A-Z0-9, ]+?),? and ([A-Z0-9]+)", text)
    if listed is None:
        return None, ("the table states no data types",)
    names = [t.strip() for t in (*listed.group(1).split(","), listed.group(2)) if t.strip()]
    fp8 = re.search(r"FP8 support is only for (\w+)", text)
    known = _MIGX_TYPES | ({"FLOAT8": f"float8{fp8.group(1).lower()}"} if fp8 else {})
    unread = tuple(f"data type {n!r} is not a type name portable reads; left out" for n in names if n not in known)
    return tuple(known[n] for n in names if n in known), unread


def migraphx_ops(text: str) -> Parsed:
    """The operator matrix (supported or not, limitations as the entry's restriction), keyed by op type
    alone (the table names no domains, and lists contrib ops such as BiasGelu beside ONNX's), and the
    element types of the data-type sentence; the table's notes (``.. Note::``) as the profile's notes."""
    ops = {}
    for op, mark, _types, limits in (r for r in _grid_rows(text) if len(r) == 4 and r[1] in _SUPPORTED):
        name = re.sub(r"\s*\(deprecated\)$", "", op)
        ops[f"{ANY_DOMAIN}:{name}"] = OpEntry(supported=_SUPPORTED[mark], notes=limits)
    types, unread = _migx_types(text)
    return Parsed(ops=ops, element_types=types, notes=_rst_notes(text) + unread)


def _rst_notes(text: str) -> tuple[str, ...]:
    """The paragraph of each ``.. Note::`` directive (its first block of non-blank lines), joined."""
    lines = text.splitlines()
    notes = []
    for start in (i + 1 for i, line in enumerate(lines) if line.strip().lower() == ".. note::"):
        body = itertools.dropwhile(lambda line: not line.strip(), lines[start:])
        notes.append(" ".join(line.strip() for line in itertools.takewhile(lambda line: line.strip(), body)))
    return tuple(notes)


# -- onnx2tf's flatbuffer_direct converter (LiteRT) -------------------------------------------

_O2T_REGISTRY = "_DISPATCH_REGISTRY: Dict[str, DispatchEntry] = {"
_O2T_TABLE = "|ONNX OP|TFLite OP|Key constraints (flatbuffer_direct)|"


def onnx2tf_registry(text: str) -> Parsed:
    """The ops of the converter's dispatch registry (``"Op": DispatchEntry(`` at the dict's top level),
    looked up by op type alone (``validate_node_support`` reads ``node.op``)."""
    if _O2T_REGISTRY not in text:
        raise ValueError("no _DISPATCH_REGISTRY in op_registry.py")
    body = text.split(_O2T_REGISTRY, 1)[1].split("\n}\n", 1)[0]
    names = re.findall(r"^    \"(\w+)\": DispatchEntry\(", body, re.MULTILINE)
    return Parsed(ops={f"{ANY_DOMAIN}:{name}": OpEntry() for name in names})


def onnx2tf_constraints(text: str) -> dict[str, str]:
    """The README's builtin table: op -> its key constraints, verbatim (``-``: none)."""
    lines = text.splitlines()
    if _O2T_TABLE not in (line.strip() for line in lines):
        raise ValueError(f"no {_O2T_TABLE!r} table in the README")
    start = [line.strip() for line in lines].index(_O2T_TABLE) + 2
    rows = itertools.takewhile(lambda line: line.strip().startswith("|"), lines[start:])
    cells = [line.strip().strip("|").split("|") for line in rows]
    return {c[0].strip(): "" if "|".join(c[2:]).strip() == "-" else "|".join(c[2:]).strip() for c in cells if len(c) >= 3}


def onnx2tf_element_types(text: str) -> tuple[str, ...]:
    """The ONNX element types of ``_ONNX_TYPE_TO_TFLITE_DTYPE`` (any other type stops the conversion)."""
    block = re.search(r"_ONNX_TYPE_TO_TFLITE_DTYPE = \{(.*?)\}", text, re.DOTALL)
    if block is None:
        raise ValueError("no _ONNX_TYPE_TO_TFLITE_DTYPE map in onnx_analysis.py")
    return tuple(onnx_type(t) for t in re.findall(r"onnx\.TensorProto\.(\w+):", block.group(1)))
