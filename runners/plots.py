"""PNG plots for the Markdown report (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

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
    """Grouped bars: p50 latency (ms, p90 as error bar) per runner and batch size."""
    if not report.latency:
        return False
    plt = _pyplot()
    runners = list(dict.fromkeys(r.runner for r in report.latency))
    batches = sorted({r.batch for r in report.latency})
    width = 0.8 / len(runners)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, runner in enumerate(runners):
        rows = {r.batch: r.stats for r in report.latency if r.runner == runner}
        xs = [b_i + i * width for b_i, b in enumerate(batches) if b in rows]
        p50 = [rows[b].p50_s * 1e3 for b in batches if b in rows]
        up = [(rows[b].p90_s - rows[b].p50_s) * 1e3 for b in batches if b in rows]
        ax.bar(xs, p50, width, yerr=[[0] * len(up), up], label=runner, capsize=3)
    ax.set_xticks([b_i + 0.4 - width / 2 for b_i in range(len(batches))], [f"batch {b}" for b in batches])
    ax.set_ylabel("latency, ms (p50; bar to p90)")
    ax.set_title("Latency per runner and batch size")
    ax.legend()
    fig.tight_layout()
    _save(fig, path)
    return True


def error_plot(report: CompareReport, path: Path) -> bool:
    """Histogram of |error| per output and pair (first batch size), log10 bins."""
    pairs = [p for p in report.parity if p.batch == min(p.batch for p in report.parity)] if report.parity else []
    series = [(f"{p.actual} vs {p.expected}: {o.output}", o.stats.histogram) for p in pairs for o in p.outputs
              if o.stats.shape_mismatch is None]
    if not series:
        return False
    plt = _pyplot()
    labels = ["0", *(f"1e{e}" for e in HISTOGRAM_EDGES)]
    fig, ax = plt.subplots(figsize=(8, 4))
    for label, hist in series[:12]:
        ax.plot(range(len(hist)), hist, marker="o", label=label)
    ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=7)
    ax.set_xlabel("|error| (bin lower edge)")
    ax.set_ylabel("elements")
    ax.set_yscale("symlog")
    ax.set_ylim(bottom=0)
    ax.set_title("Error distribution per output")
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
    return True


def write_plots(report: CompareReport, markdown_path: Path) -> list[tuple[str, str]]:
    """Write the PNGs next to ``markdown_path``; return ``(title, relative path)`` pairs."""
    stem = markdown_path.with_suffix("")
    made = []
    for title, suffix, fn in (("latency", ".latency.png", latency_plot), ("errors", ".errors.png", error_plot)):
        target = stem.with_name(stem.name + suffix)
        if fn(report, target):
            made.append((title, target.name))
    return made
