"""``portable fleet run`` and ``portable fleet report`` (the work: ``portable/fleet/``)."""

from __future__ import annotations

import click

from portable.cli.options import format_option, quiet_option
from portable.io import check_writable

__all__ = ["fleet", "report", "run"]


@click.group()
def fleet() -> None:
    """Many models, many targets: every step of a fleet file, resumable, and one report."""


@fleet.command()
@click.argument("fleet_file", metavar="FLEET.toml", type=click.Path(dir_okay=False))
@click.option("--output", "-o", "output", required=True, type=click.Path(file_okay=False),
              help="The results folder (created; a second run skips what it holds already).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: a process per step on this machine; ray: ray.remote tasks on a cluster.")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(min=1),
              help="local: steps at once; ray without --address: the local cluster's CPUs.")
@click.option("--address", default=None, metavar="HOST:PORT|auto",
              help="ray: the cluster to use ('auto': the one running here, or RAY_ADDRESS's). Default: a local cluster "
                   "for this run, whatever runs here already.")
@click.option("--only", default=None, metavar="NAMES", help="Only these models (comma-separated names).")
@click.option("--force", is_flag=True, help="Run every step again, done or not.")
@format_option("Progress as a status line on a terminal, or as JSON lines on stdout.")
@quiet_option
def run(fleet_file: str, output: str, engine: str, jobs: int, address: str | None, only: str | None, force: bool, fmt: str,
        quiet: bool) -> None:
    """Run every step of every model of FLEET.toml not done yet, into the results folder.

    Each (model, step) runs in its own process, under the fleet's time limit and memory cap; its record is
    written as it ends. Exit 0 when every step of every model passed, 1 when any did not (the report says
    why), 2 for a bad fleet file or engine, before any work."""
    from portable.fleet.api import check_fleet
    from portable.fleet.api import only as only_models
    from portable.fleet.engine import make_engine
    from portable.fleet.progress import make_progress
    from portable.fleet.run import run_fleet

    plan = only_models(check_fleet(fleet_file), only)
    check_writable(output, what="results folder", folder=True)
    chosen = make_engine(engine, jobs=jobs, address=address)
    progress = make_progress(plan, fmt, quiet)
    try:
        summary = run_fleet(plan, output, chosen, force=force, on_record=progress.record, on_tick=progress.tick)
    finally:
        progress.close()
    if fmt == "json":
        click.echo(_summary_json(summary, output))
    elif not quiet:
        click.echo(f"fleet: {len(summary.records)} records ({summary.ran} run, {summary.kept} kept), "
                   f"{len(summary.failing)} not passed, {summary.seconds:.1f} s; `portable fleet report {output}`", err=True)
    raise click.exceptions.Exit(summary.exit_code)


def _summary_json(summary: object, output: str) -> str:
    import json

    from portable.fleet.run import RunSummary

    assert isinstance(summary, RunSummary)
    return json.dumps({"event": "summary", "results": output, "exit_code": summary.exit_code, "records": len(summary.records),
                       "ran": summary.ran, "kept": summary.kept, "not_passed": len(summary.failing),
                       "seconds": summary.seconds})


@fleet.command()
@click.argument("results", metavar="RESULTS", type=click.Path(file_okay=False))
@format_option("Markdown, JSON (schema portable.fleet.report), or one self-contained HTML page.", ("md", "json", "html"))
@click.option("--output", "-o", "output", default=None, type=click.Path(dir_okay=False), help="Write here instead of stdout.")
def report(results: str, fmt: str, output: str | None) -> None:
    """The results folder as one report: per target, the share of models that load whole, partly or not at
    all (offline and live); per model, export, contract, int8, parity, and why any step did not pass.
    Exit 0 when every record passed, 1 otherwise."""
    from portable.fleet.render import render
    from portable.fleet.report import load_report
    from portable.io import atomic_write_text

    if output is not None:
        check_writable(output)
    found = load_report(results)
    text = render(found, fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        atomic_write_text(output, text)
    raise click.exceptions.Exit(found.exit_code)
