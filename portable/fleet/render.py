"""A fleet report as Markdown, JSON, or one self-contained HTML page (inline CSS, no script, nothing fetched)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from portable.fleet.report import CLASSES, FleetReport, TargetRow

__all__ = ["FORMATS", "render", "target_table"]

FORMATS = ("md", "json", "html")


def _share(n: int, total: int) -> str:
    return f"{n} ({100 * n / total:.0f} %)" if total else "0"


def _headline(row: TargetRow) -> list[str]:
    offline, live = dict(row.offline), dict(row.live)
    ran = sum(live[c] for c in CLASSES)
    cells = [_share(offline[c], row.models) for c in (*CLASSES, "no file")]
    cells += [_share(live[c], ran) for c in CLASSES] if ran else ["–"] * len(CLASSES)
    return [row.target, str(row.models), *cells, f"{ran}/{row.models}"]


HEADLINE = ("target", "models", "offline: whole", "partly", "no", "no file", "live: whole", "partly", "no", "live ran")
MODELS = ("model", "export / fix", "contract", "int8 (min SQNR, top-1, latency)", "parity", "steps not passed")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def target_table(report: FleetReport) -> list[str]:
    """Per model and target, the offline cell, and per target how many models run whole there."""
    names = [t.target for t in report.targets]
    if not names:
        return ["No targets were named (`targets` in the fleet file)."]
    rows = [[m.name, *(dict(m.targets).get(t, "–") for t in names)] for m in report.models]
    whole = [f"{dict(t.offline)['whole']}/{t.models}" for t in report.targets]
    return _table(["model", *names], [*rows, ["**whole model on the target**", *whole]])


def _failures(report: FleetReport) -> list[str]:
    lines = [f"- {m.name} {step}: **{status}**: {reason}" for m in report.models for step, status, reason in m.failures]
    return lines or ["Every step of every model passed."]


def markdown(report: FleetReport) -> str:
    meta = report.meta
    models = report.models
    passed = sum(m.passed for m in models)
    lines = ["# Fleet report", "", f"{passed} of {len(models)} models passed every step; fleet `{meta.get('fleet')}`, "
             f"engine {meta.get('engine')}, portable {meta.get('portable')}, run {meta.get('at')}.", "",
             "## Per target", "", "Of the models checked on each target: how many load there whole, partly (partitions, "
             "fallbacks) or not at all, by the target's own tables (offline) and, where the `live` step ran, by its "
             "runtime (shares of those it ran on).", "",
             *_table(HEADLINE, [_headline(t) for t in report.targets]), "",
             "## Per model", "", *_table(MODELS, _model_cells(report)), "",
             "## Per model and target (offline)", "", *target_table(report), "",
             "## Not passed, and why", "", *_failures(report)]
    return "\n".join(lines) + "\n"


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d4d9e2;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f6}.ok{background:#dff3e3}.part{background:#fff1cc}.bad{background:#fbdcdc}.muted{color:#6b7385}
.bar{display:flex;width:220px;height:14px;border:1px solid #c5ccd8}.bar span{display:block;height:100%}
.w{background:#3aa55b}.p{background:#e5b532}.n{background:#d64545}.f{background:#9aa3b5}
ul{padding-left:20px}
"""


def _bar(row: TargetRow) -> str:
    offline = dict(row.offline)
    spans = "".join(f'<span class="{c}" style="width:{100 * offline[k] / row.models:.1f}%" title="{k}: {offline[k]}"></span>'
                    for k, c in (("whole", "w"), ("partly", "p"), ("no", "n"), ("no file", "f")) if row.models)
    return f'<div class="bar">{spans}</div>'


def _cls(text: str) -> str:
    lowered = text.lower()
    if lowered.startswith(("pass", "portable", "exported", "already", "fixed", "loads")) or lowered.endswith(", 1p"):
        return "ok"
    if lowered in ("–", ""):
        return "muted"
    if lowered.startswith(("refused", "failed", "error", "timeout", "killed", "memory", "skipped", "no:", "no")):
        return "bad"
    return "part"


def _td(cell: str, index: int, colour: bool) -> str:
    """A cell: coloured by its verdict (not the row's name); a bar is markup already, the rest is escaped."""
    text = cell if cell.startswith('<div class="bar">') else html.escape(cell)
    return f'<td class="{_cls(cell) if colour and index else ""}">{text}</td>'


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], colour: bool = True) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_td(c, i, colour) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _model_cells(report: FleetReport) -> list[list[str]]:
    return [[m.name, m.export, m.contract, m.int8, m.parity, ", ".join(f"{s} ({st})" for s, st, _ in m.failures) or "–"]
            for m in report.models]


def page(report: FleetReport) -> str:
    meta, models = report.meta, report.models
    passed = sum(m.passed for m in models)
    heads = [[*_headline(t), _bar(t)] for t in report.targets]
    names = [t.target for t in report.targets]
    cells = [[m.name, *(dict(m.targets).get(t, "–") for t in names)] for m in models]
    failures = "".join(f"<li><b>{html.escape(m.name)}</b> {html.escape(s)}: <b>{html.escape(st)}</b>: {html.escape(r)}</li>"
                       for m in models for s, st, r in m.failures) or "<li>Every step of every model passed.</li>"
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Fleet report</title><style>{STYLE}</style></head>"
            f"<body><h1>Fleet report</h1><p class=muted>{passed} of {len(models)} models passed every step · fleet "
            f"{html.escape(str(meta.get('fleet')))} · engine {html.escape(str(meta.get('engine')))} · portable "
            f"{html.escape(str(meta.get('portable')))} · {html.escape(str(meta.get('at')))}</p>"
            f"<h2>Per target</h2>{_html_table([*HEADLINE, 'offline'], heads, colour=False)}"
            f"<h2>Per model</h2>{_html_table(MODELS, _model_cells(report))}"
            f"<h2>Per model and target (offline)</h2>{_html_table(['model', *names], cells)}"
            f"<h2>Not passed, and why</h2><ul>{failures}</ul></body></html>\n")


def render(report: FleetReport, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=1, default=str) + "\n"
    if fmt == "html":
        return page(report)
    return markdown(report)
