"""Options shared by several commands, defined once, and what the commands make of their values alike.

- The decorators: ``config_options`` (``--config``, ``--select``, ``--ignore``, ``--strict``) and each of them
  alone, ``format_option`` (text or JSON), ``output_option``, ``quiet_option``, ``tolerance_options``.
- :class:`ModeTable`: a command of several modes declares once which mode each option belongs to; an option
  given in another mode is a usage error that names it and its modes, never silently ignored.
- :class:`CompareCommon`: the options every mode of ``portable compare`` takes, and their readers (the
  reference, the tolerances); the readers ``parse_batches``, ``feed_options``, ``timing_config``.
- ``progress`` (the progress line, off under ``--quiet``), ``emit`` (stdout or ``-o FILE``), ``check_outputs``.

onnxruntime, torch and the runners are imported inside the functions only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from portable.errors import UsageError
from portable.io import atomic_write_text, check_writable
from portable.policy import Policy, load_policy, merge_cli

if TYPE_CHECKING:
    from portable.runners.timing import TimingConfig
    from portable.runners.tolerances import ToleranceTable
    from portable.spec import LoadedSpec

__all__ = ["EXPORT_SCHEMA_VERSION", "CompareCommon", "ModeTable", "check_outputs", "config_option", "config_options",
           "emit", "feed_options", "format_option", "ignore_option", "load_reference", "output_option", "parse_batches",
           "policy_from_options", "progress", "quiet_option", "select_option", "strict_option", "timing_config",
           "tolerance_options", "trust_option"]

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound="CompareCommon")
Progress = Callable[[str], None]

# One shape for an export's JSON (one graph or a text-generation pair), written or refused: the major part
# changes on incompatible changes.
EXPORT_SCHEMA_VERSION = "1.0"


def _compose(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(fn: F) -> F:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


config_option = click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
                             help="Policy file (TOML; top level or [tool.portable]). Default: the nearest pyproject.toml.")
select_option = click.option("--select", multiple=True, metavar="IDS",
                             help="Run only these rules (comma-separated, repeatable).")
ignore_option = click.option("--ignore", multiple=True, metavar="IDS", help="Skip these rules (comma-separated, repeatable).")
strict_option = click.option("--strict", is_flag=True, default=False, help="Warnings fail too (exit 1).")
config_options = _compose(config_option, select_option, ignore_option, strict_option)

output_option = click.option("--output", "-o", "output", type=click.Path(dir_okay=False), default=None,
                              help="Write the report to FILE instead of stdout.")

quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress output.")

tolerance_options = _compose(
    click.option("--atol", multiple=True, metavar="[OUTPUT=]V", help="Absolute tolerance, for all or one output."),
    click.option("--rtol", multiple=True, metavar="[OUTPUT=]V", help="Relative tolerance, for all or one output."),
)


def format_option(help_text: str = "Print the report as text, or as JSON.",
                  choices: tuple[str, ...] = ("text", "json")) -> Callable[[F], F]:
    """``--format text|json`` (into ``fmt``; the first choice is the default), worded for the command's report
    (``fleet report`` is a page: md, json or html)."""
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=choices[0], show_default=True,
                        help=help_text)


def findings_format_option(help_text: str = "How to print the findings.") -> Callable[[F], F]:
    """``--format`` over every findings formatter (text, json, sarif, junit, github, gitlab, concise)."""
    from portable.formatters import FORMATS

    return click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
                        help=help_text)


def policy_from_options(config: str | None, select: tuple[str, ...] = (), ignore: tuple[str, ...] = (),
                        strict: bool = False, ort: bool = False) -> Policy:
    """The policy from the config file plus command-line overrides."""
    return merge_cli(load_policy(config), select=select, ignore=ignore, strict=strict, ort=ort)


@dataclass(frozen=True)
class ModeTable:
    """Which mode of a command each option belongs to, declared once: ``homes`` maps an option (its click
    parameter name) to its modes, ``labels`` a mode to its name in messages. An option the table does not
    name belongs to every mode (``--debug``, ``--help``)."""

    labels: Mapping[str, str]
    homes: Mapping[str, frozenset[str]]

    def __post_init__(self) -> None:
        strays = sorted(n for n, modes in self.homes.items() if not modes or not modes <= set(self.labels))
        if strays:
            raise ValueError(f"options of no declared mode: {', '.join(strays)}")

    def options_of(self, mode: str) -> frozenset[str]:
        """The options that belong to ``mode``."""
        return frozenset(name for name, modes in self.homes.items() if mode in modes)

    def refuse_others(self, ctx: click.Context, mode: str) -> None:
        """A usage error naming each option set on the command line (not left at its default) that does not
        belong to ``mode``, and the modes it belongs to."""
        foreign = [p for p in ctx.command.params if p.name in self.homes and mode not in self.homes[p.name]
                   and ctx.get_parameter_source(p.name) not in (None, ParameterSource.DEFAULT)]
        if foreign:
            raise UsageError(self.refusal(mode, [(p.name or "", p.opts[0]) for p in foreign]))

    def refusal(self, mode: str, given: Iterable[tuple[str, str]]) -> str:
        """The message for ``given`` (name, flag) in ``mode``: the flags grouped by the modes they belong to."""
        groups: dict[frozenset[str], list[str]] = {}
        for name, flag in given:
            groups.setdefault(self.homes[name], []).append(flag)
        return "; ".join(f"{', '.join(flags)}: {'an option' if len(flags) == 1 else 'options'} of "
                         f"{self._names(homes)}, not of {self.labels[mode]}" for homes, flags in groups.items())

    def _names(self, modes: frozenset[str]) -> str:
        return " and ".join(label for mode, label in self.labels.items() if mode in modes)


@dataclass(frozen=True, kw_only=True)
class CompareCommon:
    """What every mode of ``portable compare`` takes (the rows of ``portable.cli.compare.COMPARE_MODES`` that
    name all three); each mode's options are a subclass, its fields named as the click parameters."""

    model: str
    reference: str | None
    weights: str | None
    atol: tuple[str, ...]
    rtol: tuple[str, ...]
    seed: int
    fmt: str
    output: str | None
    quiet: bool
    trust_remote_code: bool

    @classmethod
    def of(cls: type[C], params: Mapping[str, Any]) -> C:
        """The mode's options out of click's parameters (the others stay behind: the mode table refused them)."""
        return cls(**{f.name: params[f.name] for f in fields(cls)})

    def required_reference(self) -> str:
        if self.reference is None:
            raise UsageError("compare needs --reference SPEC (or --runtime to compare runtimes with each other)")
        return self.reference

    def tolerances(self, tf32: bool = False) -> ToleranceTable:
        """``--atol``/``--rtol`` over the defaults of the run's numerics."""
        from portable.runners.tolerances import parse_overrides

        return parse_overrides(self.atol, self.rtol, tf32=tf32)


def parse_batches(text: str | None) -> list[int] | None:
    """``--batch 1,8,32`` as sizes (None: the command's default)."""
    if not text:
        return None
    try:
        values = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise UsageError(f"--batch {text!r}: expected sizes like 1,8,32") from None
    if not values or any(b < 1 for b in values):
        raise UsageError(f"--batch {text!r}: sizes must be >= 1")
    return values


def feed_options(batch: str | None, dims: tuple[str, ...], int_range: tuple[str, ...], seed: int) -> dict[str, Any]:
    """``--batch``, ``--dim``, ``--int-range`` and ``--seed`` as the keyword arguments of the seeded inputs
    (``CompareOptions`` and ``compare_runtimes`` name them alike)."""
    from portable.runners.inputs import parse_dims, parse_int_ranges

    ints, per_input = parse_int_ranges(int_range)
    return {"batches": parse_batches(batch), "dims": parse_dims(dims), "int_range": ints, "int_ranges": per_input,
            "seed": seed}


def timing_config(no_latency: bool, warmup_ms: float, warmup_max_ms: float, iterations: int,
                  duration_ms: float) -> TimingConfig | None:
    """The latency options as the timing of a run (None: ``--no-latency``)."""
    from portable.runners.timing import TimingConfig

    if no_latency:
        return None
    try:
        return TimingConfig(warmup_seconds=warmup_ms / 1e3, min_iterations=iterations, min_seconds=duration_ms / 1e3,
                            warmup_max_seconds=max(warmup_max_ms, warmup_ms) / 1e3)
    except ValueError as exc:
        raise UsageError(f"latency options: {exc}") from None


trust_option = click.option("--trust-remote-code", is_flag=True,
                            help="Allow a model folder whose config.json maps its own Python code (auto_map): it runs "
                                 "that code. Refused without it.")


def load_reference(spec: str, weights: str | None, *, model: str | None = None, task: str | None = None,
                   trust_remote_code: bool = False) -> LoadedSpec:
    """``--reference SPEC``'s module (with ``--weights``' state dict) and example inputs; or a model folder's, for
    ``task`` (default: the task the file ``model`` was exported for, else the folder's own); one that maps its
    own code only with ``--trust-remote-code``."""
    from portable.spec import load_reference as load

    return load(spec, weights, task=task, model=model, trust_remote_code=trust_remote_code)


def check_outputs(*files: tuple[str, str | None]) -> None:
    """Each (flag, path) given checked writable before the run, not after it."""
    for flag, path in files:
        if path:
            check_writable(path, what=f"{flag} file")


@contextlib.contextmanager
def progress(quiet: bool) -> Iterator[Progress]:
    """A progress callback for the run inside: nothing under ``--quiet``; a rich status line on a terminal's
    stderr, stopped when the run ends; else ``portable: ...`` lines on stderr."""
    if quiet:
        yield lambda _msg: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda msg: click.echo(f"portable: {msg}", err=True)
        return
    with console.status("starting") as status:
        yield lambda msg: status.update(msg)


def emit(text: str, output: str | None) -> None:
    """``text`` to ``-o FILE`` (atomically) or stdout."""
    if output:
        atomic_write_text(output, text)
    else:
        click.echo(text, nl=not text.endswith("\n"))
