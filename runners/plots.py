"""PNG plots for the Markdown report (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from portable.io import atomic_write_bytes
from portable.runners.comparator import HISTOGRAM_EDGES
from portable.runners.report import CompareReport

__all__ = ["error_plot", "latency_plot", "write_plots"]


def _save(fig, path: Path) -> None:
    """Render to memory, then write atomically: a report folder never holds half a PNG."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_plot(report: CompareReport, path: Path) -> bool:
    """Horizontal bars, one per runner and batch: p50 latency on a log axis (a 0.2 ms bar stays visible beside
    150 ms), the p90 as a whisker, each bar labelled with its value."""
    if not report.latency:
        return False
    plt = _pyplot()
    rows = sorted(report.latency, key=lambda r: (r.batch, r.runner))
    labels = [f"{r.runner}, batch {r.batch}" for r in rows]
    p50 = [r.stats.p50_s * 1e3 for r in rows]
    up = [max(0.0, (r.stats.p90_s - r.stats.p50_s) * 1e3) for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.42 * len(rows)))
    bars = ax.barh(range(len(rows)), p50, xerr=[[0] * len(up), up], capsize=3, color=_colours(plt, rows))
    ax.bar_label(bars, labels=[f"{v:.3g} ms" for v in p50], padding=4, fontsize=8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(min(p50) / 2, max(v + u for v, u in zip(p50, up)) * 4)  # room for the labels
    ax.set_xlabel("latency, ms (p50, log scale; whisker to p90)")
    ax.set_title("Latency per runner and batch size")
    fig.tight_layout()
    _save(fig, path)
    return True


def _colours(plt: Any, rows: list[Any]) -> list[Any]:
    """One colour per runner, the same at every batch."""
    runners = list(dict.fromkeys(r.runner for r in rows))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return [cycle[runners.index(r.runner) % len(cycle)] for r in rows]


_MAX_PANELS = 8


def _bin_of(value: float) -> float:
    """Where a value falls on the histogram's x axis: bin 0 holds exact zeros, bin k the decade
    [1e(HISTOGRAM_EDGES[k-1]), ...), with the position inside the decade as the fraction."""
    import math

    if value <= 0:
        return 0.0
    return min(max(math.log10(value) - HISTOGRAM_EDGES[0], 0.0), len(HISTOGRAM_EDGES)) + 1.0


def error_plot(report: CompareReport, path: Path) -> bool:
    """Per pair and output (every batch), a bar histogram of |error| over log10 bins (exact zeros first), with
    the output's absolute tolerance as a dashed line and its max |error| as a dotted one: the margin to
    ``atol`` can be read off. A pair whose outputs are identical shows one bar at 0."""
    series = [(p, o) for p in report.parity for o in p.outputs if o.stats.shape_mismatch is None]
    if not series:
        return False
    plt = _pyplot()
    shown = series[:_MAX_PANELS]
    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 1.9 * len(shown) + 0.6), squeeze=False, sharex=True)
    for ax, (pair, out) in zip(axes[:, 0], shown):
        _error_panel(ax, pair, out)
    ticks = [0.0, *(k + 0.5 for k in range(len(HISTOGRAM_EDGES)))]  # the decades' edges, between their bars
    axes[-1, 0].set_xticks(ticks, ["0", *(f"1e{e}" for e in HISTOGRAM_EDGES)], rotation=45, ha="right",
                           rotation_mode="anchor", fontsize=7)
    axes[-1, 0].set_xlabel("|error| (bar 0: exactly equal; then one bar per decade, from the edge at its left)")
    more = f" (first {_MAX_PANELS} of {len(series)})" if len(series) > _MAX_PANELS else ""
    fig.suptitle(f"Error distribution per pair and output{more}", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return True


def _error_panel(ax: Any, pair: Any, out: Any) -> None:
    hist = out.stats.histogram
    ax.bar(range(len(hist)), hist, width=0.85, color="tab:green" if out.passed else "tab:red")
    ax.set_yscale("log")
    ax.set_ylim(0.5, max(max(hist), 1) * 3)
    ax.set_ylabel("elements", fontsize=7)
    ax.axvline(_bin_of(out.tolerance.atol) - 0.5, color="black", linestyle="--", linewidth=1,
               label=f"atol {out.tolerance.atol:g}")
    if out.stats.max_abs > 0:
        ax.axvline(_bin_of(out.stats.max_abs) - 0.5, color="tab:blue", linestyle=":", linewidth=1.2,
                   label=f"max |error| {out.stats.max_abs:.3g}")
    verdict = "pass" if out.passed else "FAIL"
    ax.set_title(f"{pair.actual} vs {pair.expected}, output {out.output!r}, batch {pair.batch}: {verdict}", fontsize=8)
    ax.legend(fontsize=7, loc="upper right")


def write_plots(report: CompareReport, markdown_path: Path) -> list[tuple[str, str]]:
    """Write the PNGs next to ``markdown_path``; return ``(title, relative path)`` pairs."""
    stem = markdown_path.with_suffix("")
    made = []
    for title, suffix, fn in (("latency", ".latency.png", latency_plot), ("errors", ".errors.png", error_plot)):
        target = stem.with_name(stem.name + suffix)
        if fn(report, target):
            made.append((title, target.name))
    return made
