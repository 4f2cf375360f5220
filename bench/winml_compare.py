"""winml-cli's per-EP verdicts against portable's target profiles, op by op at opset 18 (issue 32, item 3).

microsoft/winml-cli's ``winml analyze`` judges each node from a rule database of **probed cases**: for one
op, EP and device, every combination of element types, ranks, constant/dynamic inputs and attribute
values it generated was built as a one-node model and tried on the EP (``ep_checker.py``): *compile*
(``ModelCompiler`` with CPU fallback off: the EP must take the whole node) and *run* (a session with
fallback on). A case is ``supported`` when both pass, ``partial`` when it runs only through the CPU
fallback, ``unsupported`` when even that fails (``models/runtime_checks.py``). The database is not in
the git repository (``.gitignore``: "hosted in external repo"; ``scripts/download_rules.py`` pulls it from
the private ``gim-home/ModelKitArtifacts``); it ships in the public wheel on PyPI, which is what this
script reads (the pins are below and in the JSON).

    .venv/bin/python -m pip download winml-cli==0.4.0 --no-deps --only-binary=:all: --python-version 3.11 -d /tmp/winml
    .venv/bin/python -m pip install --target /tmp/pyarrow pyarrow          # parquet reader, kept out of the venv
    PYTHONPATH=/tmp/pyarrow .venv/bin/python bench/winml_compare.py /tmp/winml/winml_cli-0.4.0-py3-none-any.whl

Per target both sides cover (qnn, openvino, tensorrt: winml-cli has no rule data for DirectML or MIGraphX)
and per ``ai.onnx`` op (the union of the ops either side names, plus the zoo's ops), a verdict from each
side, in portable's words (supported / partial / unsupported / unknown):

- **winml**: the op's non-QDQ table at its opset-18 version (``onnx.defs.get_schema(op, 18).since_version``);
  none: ``unknown`` (analyze's own ``no_data``). Its float32 cases (each type variable that admits float set
  to FLOAT), each a letter: S compiled and ran (the EP takes the node), P ran only through the CPU fallback,
  C compiled but the run failed, X failed even with the fallback here but runs on another EP or device
  compared (the EP breaks the session), U failed everywhere (an invalid case or the harness: left out). All
  the rest S -> ``supported``; none S -> ``unsupported`` (analyze calls a P node *partial*: it runs, on the
  CPU); some -> ``partial``, the note naming the conditions (``column=value``, or two joined by ``&``) under
  which no case was taken. The same over every element type is recorded as ``all_types``.
- **portable**: the profile's row (``Profile.entry``): none -> ``unknown``; listed as not supported, or at
  versions that do not cover the opset-18 version -> ``unsupported``; a restriction in words -> ``partial``;
  else ``supported`` (the rule of ``TargetAnalysis.kind``, op by op).

Output: ``bench/results/winml_compare.json`` (``--out``), per comparison the counts of agreement over the
union and over the zoo's ops, every disagreement with both verdicts and their notes, and the ops both call
partial with both notes (does the measured condition match the stated one?).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# --- what was read, pinned ----------------------------------------------------------------------------------
WINML_REPOSITORY = "microsoft/winml-cli"
# The git snapshot read for the code and docs that define the verdicts (HEAD of the fetched mirror,
# 2026-08-21, pyproject version 0.3.0); each file with its git blob id. The wheel's copies of the
# semantics files have the same blob ids (checked by ``wheel_code`` below), except runtime_checker_query.py.
WINML_COMMIT = "0876e5ae1c98a169a6137e092e0d7b30bf9cee33"
GIT_FILES = {
    "docs/commands/analyze.md": "bd505e88b38917ac9ee62bef0b5432b4326976b5",
    "docs/concepts/analyze-and-optimize.md": "4306ed485a864bbc6bfd74cb0bf9ad6b37aa3e51",
    "src/winml/modelkit/analyze/rules/runtime_check_rules/README.md": "5f90fdbf913822e131794f27df6afc1f9c1af8e2",
    "scripts/download_rules.py": "1645cd98d962db8844f830e4cd725a587c41399c",
    ".gitignore": "5c5089f7accf531ced981707e12054e11be7d6c3",
    "pyproject.toml": "cef9fa5e97d8181857524702d1ea45652704f98c",
    "src/winml/modelkit/analyze/runtime_checker/ep_checker.py": "398b30728944e2abf58683d5eb045189048a4d34",
    "src/winml/modelkit/analyze/models/runtime_checks.py": "4521b7d3449e98c70b033e6c8dd55587b80f8a31",
    "src/winml/modelkit/analyze/models/support_level.py": "f4104787f95896196370a0c25c72840c1cd23c59",
    "src/winml/modelkit/analyze/utils/rule_loader.py": "d0dbea7a30d7f7d58f3debeaa95035dae4967bb8",
    "src/winml/modelkit/analyze/utils/ep_utils.py": "0a553ebed095880e30f37ac7502d73535a8c580c",
    "src/winml/modelkit/analyze/runtime_checker/check_ops.py": "f0384cd0ff69fbcab8212288299423e4fa82dd29",
    "src/winml/modelkit/analyze/utils/avalizble_ep_device_ops/avaliable_providers.json": "63bb820d5adf728f811c421bd48cd0758f9d7806",
    "src/winml/modelkit/analyze/core/runtime_checker_query.py": "a26d6e8320a70b33f09b1c123845f0a21335de68",
}
# The rule database: the parquet files of the PyPI wheel (not in git at any commit of the snapshot).
WHEEL_NAME = "winml_cli-0.4.0-py3-none-any.whl"
WHEEL_VERSION = "0.4.0"
WHEEL_SHA256 = "24e8849d84c954c308d9c727ac9c48955de3218f16b3f2466c881010f68cde3f"
RULES = "winml/modelkit/analyze/rules/runtime_check_rules/"
WHEEL_CODE = {  # the wheel's copies of the files that define the verdicts (path in the wheel -> git blob id)
    "winml/modelkit/analyze/runtime_checker/ep_checker.py": "398b30728944e2abf58683d5eb045189048a4d34",
    "winml/modelkit/analyze/models/runtime_checks.py": "4521b7d3449e98c70b033e6c8dd55587b80f8a31",
    "winml/modelkit/analyze/utils/avalizble_ep_device_ops/avaliable_providers.json": "63bb820d5adf728f811c421bd48cd0758f9d7806",
    "winml/modelkit/analyze/core/runtime_checker_query.py": "6d4f9a45ec6613a0de3edb494825a64c456112c6",
}

OPSET = 18
# (portable target, winml EP, device, primary): the primary pair is the one the doc's tables show.
COMPARISONS = (
    ("qnn", "QNNExecutionProvider", "NPU", True),
    ("qnn", "QNNExecutionProvider", "GPU", False),
    ("openvino", "OpenVINOExecutionProvider", "CPU", True),
    ("openvino", "OpenVINOExecutionProvider", "GPU", False),
    ("openvino", "OpenVINOExecutionProvider", "NPU", False),
    ("tensorrt", "NvTensorRTRTXExecutionProvider", "GPU", True),
)
# Targets both tools name but winml-cli has no rule data for.
NO_RULE_DATA = {"directml": "DmlExecutionProvider", "migraphx": "MIGraphXExecutionProvider"}
NO_RULE_DATA_WHY = {  # what analyze has for them instead (check_ops.py's checkers probe an EP installed locally)
    "directml": "no rule data in the wheel and no local checker in check_ops.py: analyze says unknown",
    "migraphx": "no rule data in the wheel; check_ops.py's MIGraphXChecker probes a local MIGraphX EP "
                "(--run-unknown-op), otherwise unknown",
}
# The ops of the zoo's models (docs/zoo.md): portable's op set for the comparison's second count.
ZOO_OPS = tuple("""Conv Relu Add Mul MatMul Gemm Softmax LayerNormalization Erf Gelu Reshape Transpose Gather
Concat Slice Shape Expand Where Range Einsum BatchNormalization HardSwish HardSigmoid Resize Pad ReduceMean Sqrt
Div Pow Sigmoid Tanh Cast CumSum ArgMax IsNaN Not Neg Reciprocal Unsqueeze Squeeze Split GlobalAveragePool
MaxPool AveragePool Flatten Clip Sub Equal Less Greater And Or TopK NonZero ScatterND GatherElements Tile
ConstantOfShape Identity Dropout DequantizeLinear QuantizeLinear""".split())
# Ops with no ai.onnx schema at opset 18 that the zoo still has, and the domain they come in there.
OTHER_DOMAIN = {"Gelu": "com.microsoft"}  # ai.onnx Gelu is opset 20; exporters below it emit com.microsoft's
CONTRIB_VERSIONS = {("com.microsoft", "Gelu"): 1}  # ONNX Runtime's contrib schemas are not in onnx.defs
KINDS = ("supported", "partial", "unsupported", "unknown")
_NAME = re.compile(r"^(?P<op>.+?)_(?P<ep>[^_]+)_(?P<dev>CPU|GPU|NPU)_(?P<domain>.+)_opset(?P<ver>\d+)(?P<qdq>_qdq)?\.parquet$")


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# --- portable's side (no pyarrow needed: the test imports this) --------------------------------------------
def since_version(op: str, domain: str = "") -> int | None:
    """The op's version at opset 18 (com.microsoft: its contrib version), None if it has none there."""
    import onnx.defs

    if domain:
        return CONTRIB_VERSIONS.get((domain, op))
    try:
        schema = onnx.defs.get_schema(op, OPSET)
    except onnx.defs.SchemaError:
        return None
    # Deprecated before 18 (Upsample-10, Scatter-11): gone at 18. GroupNormalization-18 carries the flag of its
    # deprecation at 21 and is an op of opset 18.
    return None if schema.deprecated and schema.since_version < OPSET else schema.since_version


def portable_verdict(target: str, op: str, domain: str = "") -> tuple[str, str]:
    """(verdict, note) from the committed profile's row for ``op``, at its opset-18 version."""
    from portable.validators.targets import load_profile

    profile = load_profile(target)
    version = since_version(op, domain)
    if profile.folds(domain, op):
        return "supported", "folded: the runtime turns it into an initializer at load"
    entry = profile.entry(domain, op)
    if entry is None:
        return "unknown", "the table does not name it"
    if not entry.supported:
        return "unsupported", "listed as not supported" + (f": {entry.notes}" if entry.notes else "")
    if entry.versions is not None and version is not None and not any(v.covers(version) for v in entry.versions):
        return "unsupported", f"versions {', '.join(v.label() for v in entry.versions)} do not cover {op}-{version}"
    if entry.notes:
        return "partial", entry.notes
    return "supported", ""


def portable_sources(target: str) -> list[dict[str, str]]:
    from portable.validators.targets import load_profile

    return [{k: v for k, v in s.to_dict().items() if k in ("repository", "path", "commit", "blob")}
            for s in load_profile(target).sources]


def portable_ops(target: str) -> set[str]:
    """The ai.onnx ops the profile names (a registry keyed by op type alone counts as ai.onnx)."""
    from portable.validators.targets import load_profile

    return {key.split(":", 1)[1] for key in load_profile(target).ops if key.split(":", 1)[0] in ("ai.onnx", "*")}


# --- winml-cli's side ---------------------------------------------------------------------------------------
class Wheel:
    """The rule database inside the winml-cli wheel: parquet files named op_EP_DEVICE_domain_opsetN[_qdq]."""

    def __init__(self, path: Path) -> None:
        data = path.read_bytes()
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.zip = zipfile.ZipFile(io.BytesIO(data))
        self.tables: dict[tuple[str, str, str, str, int, bool], str] = {}
        for name in self.zip.namelist():
            if name.startswith(RULES) and name.endswith(".parquet"):
                m = _NAME.match(name.rsplit("/", 1)[1])
                if m:
                    key = (m["ep"], m["dev"], m["domain"], m["op"], int(m["ver"]), bool(m["qdq"]))
                    self.tables[key] = name
        self.dirs = sorted({n[len(RULES):].split("/", 1)[0] for n in self.tables.values()})

    def ops(self, ep: str, device: str, domain: str = "ai.onnx") -> set[str]:
        return {k[3] for k in self.tables if k[:3] == (ep, device, domain) and not k[5]}

    def versions(self, ep: str, device: str, domain: str, op: str) -> list[int]:
        return sorted(k[4] for k in self.tables if k[:4] == (ep, device, domain, op) and not k[5])

    def read(self, name: str) -> tuple[dict[str, list[Any]], str]:
        """A table's columns as parquet holds them (cells are JSON strings ``{"t": type, "v": value}``)."""
        import pyarrow.parquet as pq

        data = self.zip.read(name)
        return pq.read_table(io.BytesIO(data)).to_pydict(), git_blob(data)


OUTPUTS = ("compile_run_success", "case_index", "case_indices", "compile_reason", "run_reason",
           "has_not_run_placeholder_reason")
_DECODED: dict[str, Any] = {}


def decode(cell: Any) -> Any:
    if not isinstance(cell, str):
        return cell
    if cell not in _DECODED:
        value = json.loads(cell).get("v")
        _DECODED[cell] = tuple(value) if isinstance(value, list) else value
    return _DECODED[cell]


def _case(row: dict[str, Any]) -> str:
    compiled, ran = (bool(x) for x in row["compile_run_success"])
    if compiled and ran:
        return "S"  # the EP takes the node
    if ran:
        return "P"  # runs through the CPU fallback only
    return "C" if compiled else "U"  # C: compiled, then failed to run; U: fails even with the fallback


def _fmt(value: Any) -> str:
    text = json.dumps(list(value) if isinstance(value, tuple) else value, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


class Table:
    """One op's probed cases on one EP and device: each case's conditions (by column), key and letter."""

    def __init__(self, path: str, columns: dict[str, list[Any]], blob: str) -> None:
        self.path, self.blob = path, blob
        self.conditions = {c: v for c, v in sorted(columns.items()) if c not in OUTPUTS}
        self.keys = list(zip(*self.conditions.values()))
        self.letters = [_case({"compile_run_success": x}) for x in columns["compile_run_success"]]

    def column(self, name: str) -> list[Any]:
        return [decode(v) for v in self.conditions[name]]


def load_tables(wheel: Wheel, op: str, domain: str, version: int) -> dict[tuple[str, str], Table]:
    """The op's table on every EP and device compared; a case that fails even with the CPU fallback here but
    runs on another EP or device is an ``X`` (the EP breaks the session), one that fails everywhere stays ``U``."""
    tables = {}
    for ep, device in dict.fromkeys((c[1], c[2]) for c in COMPARISONS):
        name = wheel.tables.get((ep, device, domain, op, version, False))
        if name is not None:
            tables[(ep, device)] = Table(name, *wheel.read(name))
    for here, table in tables.items():
        runs = set().union(*({k for k, x in zip(t.keys, t.letters) if x != "U"}
                             for there, t in tables.items() if there != here))
        table.letters = ["X" if x == "U" and k in runs else x for k, x in zip(table.keys, table.letters)]
    return tables


def _float_columns(op: str, domain: str, version: int, columns: list[str]) -> list[str]:
    """The table's type-variable columns (``T_Conv``) whose constraint admits float."""
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(op, version, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:  # a contrib op: its type columns are T..._Op
        return [c for c in columns if re.fullmatch(rf"T\w*_{op}", c)]
    return [f"{tc.type_param_str}_{op}" for tc in schema.type_constraints
            if "tensor(float)" in tc.allowed_type_strs and f"{tc.type_param_str}_{op}" in columns]


def _conditions(table: Table, cases: list[int], limit: int = 4) -> str:
    """Where the EP took no case: the fewest conditions (``column=value``, or two of them joined by ``&`` where
    one alone does not separate) that cover the cases it did not take, picked greedily."""
    missed = {i for i in cases if table.letters[i] != "S"}
    groups: dict[tuple[tuple[str, Any], ...], set[int]] = collections.defaultdict(set)
    columns = [c for c, cells in table.conditions.items() if len({cells[i] for i in cases}) > 1]
    for i in cases:
        cells = [(c, table.conditions[c][i]) for c in columns]
        for n, one in enumerate(cells):
            groups[(one,)].add(i)
            for two in cells[n + 1:]:
                groups[(one, two)].add(i)
    found = [(key, group) for key, group in groups.items() if group <= missed]
    covered: set[int] = set()
    chosen = []
    for _ in range(limit):
        best = max(found, key=lambda p: (len(p[1] - covered), -len(p[0]), p[0]), default=None)
        if best is None or len(best[1] - covered) == 0:
            break
        chosen.append(best[0])
        covered |= best[1]
    if not chosen:
        return f"{len(missed)} of {len(cases)} cases not taken, no condition separates them"
    text = "; ".join(" & ".join(f"{c}={_fmt(decode(v))}" for c, v in key) for key in chosen)
    return f"not taken where {text} ({len(covered)} of the {len(missed)} cases not taken, of {len(cases)})"


def _judge(table: Table, cases: list[int], *, note: bool) -> tuple[str, str, str]:
    found = collections.Counter(table.letters[i] for i in cases)
    counts = " ".join(f"{x}={found[x]}" for x in "SPCXU")
    valid = [i for i in cases if table.letters[i] != "U"]
    taken = sum(1 for i in valid if table.letters[i] == "S")
    if not valid:
        return "unknown", "no case runs on any EP probed, even with the CPU fallback", counts
    if taken == len(valid):
        return "supported", "", counts
    if taken == 0:
        return "unsupported", f"none of {len(valid)} cases taken by the EP", counts
    return "partial", _conditions(table, valid) if note else "", counts


def winml_verdict(wheel: Wheel, tables: dict[tuple[str, str], Table], ep: str, device: str, op: str, domain: str,
                  version: int) -> dict[str, Any]:
    table = tables.get((ep, device))
    if table is None:
        others = wheel.versions(ep, device, domain, op)
        why = f"no table for {op}-{version}" + (f" (tables for {', '.join(map(str, others))})" if others else "")
        return {"verdict": "unknown", "note": why, "table": None}
    floats = [table.column(c) for c in _float_columns(op, domain, version, list(table.conditions))]
    every = range(len(table.letters))
    f32 = [i for i in every if all(column[i] == "FLOAT" for column in floats)]
    verdict, note, counted = _judge(table, f32, note=True)
    all_verdict, _, all_counted = _judge(table, list(every), note=False)
    return {"verdict": verdict, "note": note, "cases_float32": counted, "all_types": all_verdict,
            "cases_all": all_counted, "table": {"path": table.path, "blob": table.blob}}


def coarse(verdict: str) -> str:
    """Does the side say the target takes the op at all (in some cases): yes, no, or unknown."""
    return {"supported": "yes", "partial": "yes", "unsupported": "no"}.get(verdict, "unknown")


def effective(verdict: str) -> str:
    """Portable's side, coarse, with an op the table does not name read as not taken (every profile compared
    is a registry or a complete list: an op it lacks has no kernel, builder, translator or importer)."""
    return "no" if verdict == "unknown" else coarse(verdict)


def _op(op: str) -> tuple[str, int | None, str]:
    """(domain, opset-18 version, why skipped)."""
    if op.endswith("Pattern"):
        return "", None, "a winml-cli subgraph pattern, not an op"
    if since_version(op) is not None:
        return "", since_version(op), ""
    domain = OTHER_DOMAIN.get(op, "")
    version = since_version(op, domain) if domain else None
    return domain, version, "" if version is not None else "no ai.onnx schema at opset 18 (or deprecated there)"


def compare_all(wheel: Wheel) -> list[dict[str, Any]]:
    lists = [sorted(wheel.ops(ep, device) | portable_ops(target) | set(ZOO_OPS))
             for target, ep, device, _ in COMPARISONS]
    results: list[dict[str, Any]] = [{"verdicts": {}, "disagreements": [], "both_partial": [],
                                      "skipped": collections.defaultdict(list)} for _ in COMPARISONS]
    for op in sorted(set().union(*lists)):
        domain, version, why = _op(op)
        tables = load_tables(wheel, op, domain or "ai.onnx", version) if version is not None else {}
        for (target, ep, device, _), ops, out in zip(COMPARISONS, lists, results):
            if op not in ops:
                continue
            if version is None:
                out["skipped"][why].append(op)
                continue
            ours, our_note = portable_verdict(target, op, domain)
            theirs = winml_verdict(wheel, tables, ep, device, op, domain or "ai.onnx", version)
            key = f"{domain}:{op}" if domain else op
            out["verdicts"][key] = [theirs["verdict"], ours]
            if theirs["verdict"] == ours == "partial":  # the same word: do the restrictions match?
                out["both_partial"].append({"op": key, "version": version, "zoo": op in ZOO_OPS,
                                            "winml_note": theirs["note"], "portable_note": our_note,
                                            "cases_float32": theirs["cases_float32"]})
            if theirs["verdict"] != ours:
                out["disagreements"].append({
                    "op": key, "version": version, "zoo": op in ZOO_OPS, "winml": theirs["verdict"], "portable": ours,
                    "coarse_agree": coarse(theirs["verdict"]) == coarse(ours),
                    "effective_agree": coarse(theirs["verdict"]) == effective(ours),
                    "winml_note": theirs["note"], "portable_note": our_note,
                    **{k: theirs[k] for k in ("all_types", "cases_float32", "cases_all") if k in theirs},
                    "winml_table": theirs["table"] and {"path": theirs["table"]["path"][len(RULES):],
                                                        "blob": theirs["table"]["blob"]},
                })
    return [summarise(wheel, *c, **out) for c, out in zip(COMPARISONS, results)]


def summarise(wheel: Wheel, target: str, ep: str, device: str, primary: bool, *, verdicts: dict[str, list[str]],
              disagreements: list[dict[str, Any]], both_partial: list[dict[str, Any]],
              skipped: dict[str, list[str]]) -> dict[str, Any]:
    def counts(keys: list[str]) -> dict[str, Any]:
        pairs = collections.Counter(f"{verdicts[k][0]}/{verdicts[k][1]}" for k in keys)
        return {"ops": len(keys), "agree": sum(verdicts[k][0] == verdicts[k][1] for k in keys),
                "coarse_agree": sum(coarse(verdicts[k][0]) == coarse(verdicts[k][1]) for k in keys),
                "effective_agree": sum(coarse(verdicts[k][0]) == effective(verdicts[k][1]) for k in keys),
                "winml_knows": sum(verdicts[k][0] != "unknown" for k in keys),
                "effective_agree_where_winml_knows": sum(verdicts[k][0] != "unknown" and
                                                         coarse(verdicts[k][0]) == effective(verdicts[k][1]) for k in keys),
                "winml": {kind: sum(verdicts[k][0] == kind for k in keys) for kind in KINDS},
                "portable": {kind: sum(verdicts[k][1] == kind for k in keys) for kind in KINDS},
                "pairs (winml/portable)": dict(sorted(pairs.items()))}

    zoo = [k for k in verdicts if k.split(":")[-1] in ZOO_OPS]
    return {
        "target": target, "winml_ep": ep, "device": device, "primary": primary,
        "portable_table": portable_sources(target),
        "winml_table": f"{RULES}{ep}_{device}/ (PyPI {WHEEL_NAME})",
        "union": counts(list(verdicts)), "zoo": counts(zoo),
        "skipped": dict(skipped),
        "disagreements": disagreements,
        "both_partial": both_partial,
        "verdicts (winml, portable)": verdicts,
    }


def wheel_code(wheel: Wheel) -> dict[str, dict[str, Any]]:
    out = {}
    for path, blob in WHEEL_CODE.items():
        found = git_blob(wheel.zip.read(path))
        out[path] = {"blob": found, "as pinned": found == blob}
    return out


def dump(result: dict[str, Any]) -> str:
    """JSON, indented, with each disagreement and each op's pair of verdicts on a line of its own."""
    lines: dict[str, str] = {}

    def mark(value: Any) -> str:
        lines[f"@{len(lines)}@"] = json.dumps(value)
        return f"@{len(lines) - 1}@"

    out = dict(result)
    out["comparisons"] = [c | {"disagreements": [mark(x) for x in c["disagreements"]],
                               "both_partial": [mark(x) for x in c["both_partial"]],
                               "verdicts (winml, portable)": {k: mark(v) for k, v in c["verdicts (winml, portable)"].items()}}
                          for c in result["comparisons"]]
    text = json.dumps(out, indent=1)
    return re.sub(r'"(@\d+@)"', lambda m: lines[m[1]], text) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help=f"the winml-cli wheel ({WHEEL_NAME} from PyPI)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "winml_compare.json")
    args = parser.parse_args(argv)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        print("needs pyarrow: pip install --target DIR pyarrow, then PYTHONPATH=DIR (see the docstring)", file=sys.stderr)
        return 2
    wheel = Wheel(args.wheel)
    if wheel.sha256 != WHEEL_SHA256:
        print(f"{args.wheel}: sha256 {wheel.sha256}, pinned {WHEEL_SHA256} ({WHEEL_NAME})", file=sys.stderr)
        return 2
    eps = {d.rsplit("_", 1)[0] for d in wheel.dirs}
    assert not eps & set(NO_RULE_DATA.values()), "the wheel now has rule data for DirectML or MIGraphX: compare them"
    providers = json.loads(wheel.zip.read("winml/modelkit/analyze/utils/avalizble_ep_device_ops/avaliable_providers.json"))
    result = {
        "generated_by": f"PYTHONPATH=PYARROW_DIR .venv/bin/python bench/winml_compare.py {WHEEL_NAME}",
        "opset": OPSET,
        "winml": {
            "repository": WINML_REPOSITORY, "commit": WINML_COMMIT, "git_files_read": GIT_FILES,
            "database": {"package": "winml-cli", "version": WHEEL_VERSION, "registry": "PyPI", "wheel": WHEEL_NAME,
                         "sha256": WHEEL_SHA256, "path": RULES, "tables": len(wheel.tables),
                         "tables_per_ep_device": dict(sorted(collections.Counter(f"{k[0]}_{k[1]}" for k in wheel.tables).items()))},
            "why_the_wheel": "the parquet rule files are git-ignored ('hosted in external repo'); download_rules.py "
                             "clones them from gim-home/ModelKitArtifacts (Microsoft-internal); the wheel bundles them",
            "wheel_code": wheel_code(wheel),
            "providers_with_rule_keys": {ep: {d: v["valid"] for d, v in spec["devices"].items()}
                                         for ep, spec in providers.items()},
        },
        "method": {
            "winml": "the op's non-QDQ table at its opset-18 version; float32 cases (type variables that admit "
                     "float = FLOAT); cases failing even on the CPU fallback (U) left out; all remaining taken by the "
                     "EP (compile with fallback off, and run): supported; none: unsupported; some: partial (note: "
                     "column=value where no case was taken). No table: unknown. Case letters: S compile+run, "
                     "P runs on the fallback only, C compiled but the run failed, U fails on the fallback too.",
            "portable": "the committed profile's row: none -> unknown; not supported, or versions not covering the "
                        "opset-18 version -> unsupported; notes -> partial; else supported",
            "coarse": "yes (supported or partial) / no (unsupported) / unknown: does the side say the EP takes the op at all",
            "effective": "coarse, with an op portable's table does not name read as no (each profile compared is a "
                         "registry or a complete list); winml's unknown (no table) stays unknown",
        },
        "ep_map": {c[0]: sorted({f"{x[1]} {x[2]}" for x in COMPARISONS if x[0] == c[0]}) for c in COMPARISONS}
                  | {t: f"{ep}: {NO_RULE_DATA_WHY[t]}" for t, ep in NO_RULE_DATA.items()},
        "comparisons": compare_all(wheel),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(result))
    for c in result["comparisons"]:
        u, z = c["union"], c["zoo"]
        print(f"{c['target']:9s} vs {c['winml_ep']} {c['device']}: union {u['agree']}/{u['ops']} agree "
              f"({u['coarse_agree']} coarse), zoo {z['agree']}/{z['ops']} ({z['coarse_agree']} coarse)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
