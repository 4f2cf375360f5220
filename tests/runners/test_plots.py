"""The report's plots: latency on a log axis with labelled values; one error histogram per pair and output,
identical pairs included, with the tolerance line (figures inspected, not pixels)."""

from __future__ import annotations

import numpy as np
import pytest

from portable.runners import plots
from portable.runners.comparator import compare_outputs
from portable.runners.report import CompareReport, LatencyResult
from portable.runners.stats import LatencyStats
from portable.runners.tolerances import ToleranceTable


def _report() -> CompareReport:
    good = np.linspace(-1, 1, 64, dtype=np.float32)
    table = ToleranceTable()
    identical = compare_outputs(("ort-cpu", [good]), ("eager", [good]), ["y"], ["float32"], 1, table)
    off = compare_outputs(("ort-cpu", [good + np.float32(3e-5)]), ("eager", [good]), ["y"], ["float32"], 3, table)
    latency = tuple(LatencyResult(name, 1, LatencyStats.from_samples([seconds] * 5, 1), "perf_counter", None, "rss_growth")
                    for name, seconds in (("eager", 0.15), ("ort-cpu", 0.0002)))
    return CompareReport("m.onnx", "", {}, {}, (), (identical, off), latency)


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list:
    made: list = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: made.append(fig))
    return made


def test_latency_is_on_a_log_axis_with_each_value_written(figures, tmp_path) -> None:
    assert plots.latency_plot(_report(), tmp_path / "l.png")
    (ax,) = figures[0].axes
    assert ax.get_xscale() == "log"
    texts = [t.get_text() for t in ax.texts]
    assert "0.2 ms" in texts and "150 ms" in texts


def test_each_pair_and_output_has_a_panel_with_its_tolerance_and_batch(figures, tmp_path) -> None:
    assert plots.error_plot(_report(), tmp_path / "e.png")
    axes = figures[0].axes
    assert len(axes) == 2  # the identical pair is shown too, not hidden under the other
    assert "batch 1" in axes[0].get_title() and "batch 3" in axes[1].get_title()
    for ax in axes:
        assert [line.get_label() for line in ax.get_lines()][0] == "atol 0.0001"
        assert ax.patches  # bars, not a line joining the bins
    assert axes[0].patches[0].get_height() == 64  # every element exactly equal: all in bar 0
    atol_x = axes[1].get_lines()[0].get_xdata()[0]
    worst_x = axes[1].get_lines()[1].get_xdata()[0]
    assert worst_x < atol_x  # 3e-5 lies left of atol 1e-4: the margin can be read off


def test_a_value_falls_in_its_decade() -> None:
    assert plots._bin_of(0.0) == 0.0
    assert plots._bin_of(1e-12) == pytest.approx(1.0) and plots._bin_of(3e-5) == pytest.approx(8 + np.log10(3))
