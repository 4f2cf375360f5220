"""The ``portable`` command line: a thin layer over the Python API.

Commands are imported lazily (``portable --help`` and ``portable validate`` never
import torch or onnxruntime). Errors are handled in one place,
:meth:`PortableGroup.invoke`: a :class:`portable.errors.PortableError` becomes one
line on stderr and its exit code; anything unexpected is exit 3 (with the traceback
under ``--debug``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import importlib.util
import os
import sys
from typing import Any

import click

from portable._version import __version__
from portable.errors import ExitCode, PortableError, UsageError

__all__ = ["BROKEN_PIPE", "CLI_GC_THRESHOLDS", "COMMANDS", "NEEDS_TORCH", "PortableGroup", "cli", "console", "main"]

# command name -> "module:attribute"; a command whose module is absent is not listed.
COMMANDS: dict[str, str] = {
    "validate": "portable.cli.validate:validate",
    "rules": "portable.cli.rules:rules",
    "explain": "portable.cli.rules:explain",
    "inspect": "portable.cli.inspect:inspect",
    "export": "portable.cli.export:export",
    "precheck": "portable.cli.export:precheck",
    "fix": "portable.cli.fix:fix",
    "quantize": "portable.cli.quantize:quantize",
    "compare": "portable.cli.compare:compare",
    "matrix": "portable.cli.compare:matrix",
    "report": "portable.cli.compare:report",
    "fleet": "portable.cli.fleet:fleet",
}


# The shell's status for a process that SIGPIPE ended (128 + 13): what `yes | head` reports.
BROKEN_PIPE = 141

# Commands that run PyTorch: the core install has no torch (pip install 'portable-onnx[torch]' adds it).
NEEDS_TORCH = frozenset({"export", "precheck", "compare"})
TORCH_HINT = ("pip install 'portable-onnx[torch]' (for the CPU build, first: "
              "pip install torch --index-url https://download.pytorch.org/whl/cpu)")


def _error(message: str) -> None:
    click.echo(f"portable: error: {message}", err=True)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's final flush does not raise again on exit
    (the recipe in the documentation of the ``signal`` module)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (an in-process runner)
        pass


def _needing_torch(command: click.Command, name: str) -> click.Command:
    """``command`` with a first step that says in one line what to install when torch is missing (exit 2);
    its ``--help`` works without torch."""
    callback = command.callback
    if callback is None or getattr(callback, "_checks_torch", False):
        return command

    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            importlib.import_module("torch")  # the command imports it next anyway
        except ImportError:
            raise UsageError(f"portable {name} runs PyTorch, which is not installed here: {TORCH_HINT}") from None
        return callback(*args, **kwargs)

    checked._checks_torch = True  # type: ignore[attr-defined]
    command.callback = checked
    return command


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        root = ctx.find_root()
        root.ensure_object(dict)["debug"] = True


# ``portable validate --debug`` as well as ``portable --debug validate``: the error says "run with --debug",
# and a user adds it where the command's other options are
DEBUG_OPTION = click.Option(["--debug"], is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
                            help="Show Python tracebacks on errors (as portable --debug).")


def _with_debug(command: click.Command) -> click.Command:
    """``command`` taking ``--debug`` too (once: the command objects are the modules' own)."""
    if not any(isinstance(p, click.Option) and "--debug" in p.opts for p in command.params):
        command.params.append(DEBUG_OPTION)
    return command


class PortableGroup(click.Group):
    """Lazy command loading, and the one place where errors become exit codes."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, t in COMMANDS.items() if importlib.util.find_spec(t.split(":")[0]) is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None or name not in self.list_commands(ctx):
            return None
        module, attr = target.split(":")
        command: click.Command = _with_debug(getattr(importlib.import_module(module), attr))
        return _needing_torch(command, name) if name in NEEDS_TORCH else command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except PortableError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                import traceback  # only under --debug (start-up)

                traceback.print_exc()
            _error(str(exc))
            ctx.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            _error("interrupted")
            ctx.exit(130)
        except BrokenPipeError:  # the reader went away (`portable ... | head`): stop quietly, like SIGPIPE
            _silence_stdout()
            ctx.exit(BROKEN_PIPE)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback by default
            if ctx.obj and ctx.obj.get("debug"):
                import traceback  # only under --debug (start-up)

                traceback.print_exc()
            _error(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
            ctx.exit(int(ExitCode.ERROR))


@click.group(cls=PortableGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="portable")
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Export PyTorch models to portable ONNX, validate the contract, compare runtimes.

    Exit codes: 0 pass, 1 findings or parity failure, 2 usage or config error,
    3 unreadable input or internal failure.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


#: The collector's thresholds in the CLI's own process: the young generation collected every 50,000 net
#: allocations, not CPython's 700. Importing torch and transformers and torch.export's tracing allocate
#: millions of small objects that live to the end of a short process: a ResNet-50 export from a folder
#: ran 1,646 collections (1.3 s of its 20 s with verify, on a shared 2-core machine); at these thresholds 21
#: (0.4 s), peak RSS 1.11 GB either way (docs/peers.md). Only the console script sets them: a caller's
#: process (the API, ``cli`` invoked in-process) keeps its own.
CLI_GC_THRESHOLDS = (50_000, 10, 10)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Output to a pipe is flushed at exit: a reader that left
    (``| head``) ends the run quietly with :data:`BROKEN_PIPE`, not a traceback."""
    gc.set_threshold(*CLI_GC_THRESHOLDS)
    try:
        cli.main(args=argv, prog_name="portable")
    except SystemExit:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            raise SystemExit(BROKEN_PIPE) from None
        raise


def console() -> None:
    """The ``portable`` console script (and ``python -m portable``): :func:`main`, and then the process ends
    with its exit code as soon as the exit handlers the command registered have run
    (:func:`_end_process`). In-process callers use :func:`main` or :data:`cli`, which leave the
    interpreter alone."""
    code: list[int] = []
    atexit.register(_end_process, code)  # registered before the command's own handlers, so it runs after them
    try:
        main()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code.append(int(exc.code or 0))
        raise


def _end_process(code: list[int]) -> None:
    """``os._exit`` with the command's exit code, after the output is flushed and logging shut down.

    What it skips is the interpreter's teardown: freeing the modules of torch, transformers, onnx and
    onnxscript object by object, about 1.3 s of a ResNet-50 folder export's 10 s on this machine (the same
    in any process that imported them; docs/peers.md), for memory the OS takes back at once. What still
    needs doing at exit is done before it: every file portable writes is closed when written (``with``,
    ``Path.write_*``, atomic renames), and the exit handlers registered during the command (Ray's
    shutdown, temporary directories' removal) run first, since ``atexit`` runs the last registered first.
    """
    if not code:  # main did not end with an exit code (an interrupt): leave the exit to Python
        return
    import logging  # loaded already (click, torch): the import is a lookup

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code[0])


if __name__ == "__main__":  # pragma: no cover
    console()
