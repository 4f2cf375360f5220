"""``portable compare MODEL --runtime ort,openvino,tract,reference``: the runtimes side by side.

Parsed here, run by :func:`portable.runners.runtimes.compare_runtimes` (imported inside the command).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NoReturn

import click

from portable.cli.options import CompareCommon, check_outputs, emit, feed_options, load_reference, progress
from portable.errors import UsageError
from portable.io import atomic_write_text, check_writable

__all__ = ["RuntimesCompareOptions", "compare_runtimes_command"]


@dataclass(frozen=True, kw_only=True)
class RuntimesCompareOptions(CompareCommon):
    """``portable compare MODEL --runtime RUNTIMES``: each runtime against PyTorch (``--reference``, with
    ``--weights``) or, without it, against the first runtime that runs."""

    runtimes: str
    golden: str | None
    reference_cap: float
    report_path: str | None
    batch: str | None
    dims: tuple[str, ...]
    int_range: tuple[str, ...]
    min_cosine: float | None
    min_sqnr: float | None


def _check(o: RuntimesCompareOptions) -> None:
    """The files and the folder it writes, before the model is read; ``--weights`` needs its module."""
    check_outputs(("--report", o.report_path), ("-o/--output", o.output))
    if o.golden:
        check_writable(o.golden, what="--golden folder", folder=True)
    if o.weights and not o.reference:
        raise UsageError("--weights: the state dict of the --reference SPEC's module; give --reference too")


def compare_runtimes_command(o: RuntimesCompareOptions) -> NoReturn:
    """The runtimes' table (Markdown; JSON with ``--format json``), the golden bundle with ``--golden``;
    exit by the verdict."""
    from portable.runners.budgets import with_figures
    from portable.runners.runtimes import compare_runtimes, parse_runtimes, render_runtimes

    _check(o)
    names = parse_runtimes(o.runtimes)
    feeds = feed_options(o.batch, o.dims, o.int_range, o.seed)
    loaded = (load_reference(o.reference, o.weights, model=o.model, trust_remote_code=o.trust_remote_code)
              if o.reference else None)
    with progress(o.quiet) as say:
        result = compare_runtimes(o.model, names, module=loaded.module if loaded else None,
                                  example_inputs=loaded.example_inputs if loaded else None,
                                  tolerances=with_figures(o.tolerances(), o.model, o.min_cosine, o.min_sqnr),
                                  golden=o.golden, cap_seconds=o.reference_cap, progress=say, **feeds)
    text = render_runtimes(result)
    if o.report_path:
        atomic_write_text(o.report_path, text)
    emit(json.dumps(result.to_dict(), indent=2) if o.fmt == "json" else text, o.output)
    raise click.exceptions.Exit(int(result.exit_code))
