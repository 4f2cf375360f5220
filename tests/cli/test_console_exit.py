"""The console script ends its process without the interpreter's teardown, once the command's output is flushed
and the exit handlers the command registered have run (portable/cli/__init__.py, ``console``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# A command stand-in (``portable.cli.main`` replaced) that leaves what a real one can leave at exit: output not
# yet flushed to a pipe, an exit handler (Ray's shutdown, a temporary directory's removal) and an object whose
# finalizer only the interpreter's teardown would run.
_SCRIPT = """
import atexit, sys
import portable.cli as cli

class Held:
    def __del__(self):
        print("teardown ran", flush=True)

HELD = Held()

def command(argv=None):
    print("the report", end="")
    atexit.register(lambda: print(" / handler ran", end=""))
    raise SystemExit({code})

cli.main = command
cli.{entry}()
"""


def _run(entry: str, code: int) -> subprocess.CompletedProcess[str]:
    script = _SCRIPT.format(entry=entry, code=code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_the_console_script_keeps_the_code_the_output_and_the_commands_exit_handlers() -> None:
    done = _run("console", 1)
    assert done.returncode == 1
    assert done.stdout == "the report / handler ran"  # flushed, the handler run, no teardown


def test_without_the_console_script_the_interpreter_tears_down_as_usual() -> None:
    done = _run("main", 0)
    assert done.returncode == 0
    assert "teardown ran" in done.stdout


def test_a_real_command_keeps_its_exit_code_and_its_report(tmp_path: Path) -> None:
    missing = tmp_path / "missing.onnx"
    done = subprocess.run([sys.executable, "-m", "portable", "validate", str(missing), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3  # unreadable input
    report = json.loads(done.stdout)  # the whole report reached the pipe
    assert report["exit_code"] == 3 and report["summary"]["unreadable"] == 1
