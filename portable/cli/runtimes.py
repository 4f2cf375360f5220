"""``portable compare MODEL --runtime ort,openvino,tract,reference``: the runtimes side by side.

Parsed here, run by :func:`portable.runners.runtimes.compare_runtimes`; imported by ``compare`` only
when ``--runtime`` or ``--golden`` is given.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import click

from portable.errors import UsageError
from portable.io import atomic_write_text

__all__ = ["compare_runtimes_command"]

# compare's flags that mean nothing to a runtime comparison: given, they are a usage error, not ignored
_TORCH_ONLY = {"device": None, "compile_mode": "default", "no_compile": False, "inputs": None, "tf32": False,
               "localize": False, "providers": None, "latency_budgets": (), "error_budgets": ()}


def _check(reference: str | None, golden: str | None, runtimes: str | None, task: str, flags: dict[str, Any]) -> None:
    if runtimes is None:
        raise UsageError(f"--golden {golden}: needs --runtime (the runtimes whose inputs and outputs it holds)")
    if task != "model":
        raise UsageError("--runtime compares single-graph models; --task text-generation has its own proof")
    given = [k for k, default in _TORCH_ONLY.items() if flags.get(k, default) != default]
    if given:
        names = ", ".join("--" + k.replace("_", "-").replace("providers", "ep") for k in given)
        raise UsageError(f"{names}: not an option of compare --runtime (PyTorch and ONNX Runtime providers only)")


def compare_runtimes_command(model: str, runtimes: str | None, reference: str | None, weights: str | None,
                             golden: str | None, cap: float, fmt: str, output: str | None, quiet: bool, *,
                             report_path: str | None, task: str, flags: dict[str, Any], helpers: Any) -> NoReturn:
    """``helpers``: compare's ``_batches``, ``_emit``, ``_load_reference``, ``_progress`` (passed in: no import
    cycle between the two command modules)."""
    _batches, _emit, _load_reference, _progress = helpers
    from portable.runners.inputs import parse_dims, parse_int_ranges
    from portable.runners.runtimes import compare_runtimes, parse_runtimes, render_runtimes
    from portable.runners.tolerances import parse_overrides

    _check(reference, golden, runtimes, task, flags)
    names = parse_runtimes(runtimes or "")
    ints, per_input = parse_int_ranges(flags["int_range"])
    table = parse_overrides(flags["atol"], flags["rtol"])
    loaded = _load_reference(reference, weights) if reference else None
    say, status = _progress(quiet)
    try:
        result = compare_runtimes(model, names, module=loaded.module if loaded else None,
                                  example_inputs=loaded.example_inputs if loaded else None,
                                  batches=_batches(flags["batch"]), seed=flags["seed"], dims=parse_dims(flags["dims"]),
                                  int_range=ints, int_ranges=per_input, tolerances=table, golden=golden,
                                  cap_seconds=cap, progress=say)
    finally:
        if status is not None:
            status.stop()
    text = render_runtimes(result)
    if report_path:
        atomic_write_text(report_path, text)
    _emit(json.dumps(result.to_dict(), indent=2) if fmt == "json" else text, output)
    raise click.exceptions.Exit(int(result.exit_code))
