"""The console script raises the collector's thresholds for its own short process; in-process use keeps the
caller's (portable/cli/__init__.py, CLI_GC_THRESHOLDS)."""

from __future__ import annotations

import gc
import subprocess
import sys

from click.testing import CliRunner

from portable.cli import CLI_GC_THRESHOLDS, cli

_SCRIPT = ("import atexit, gc\n"
           "atexit.register(lambda: print('thresholds', *gc.get_threshold()))\n"
           "from portable.cli import main\n"
           "main(['--version'])\n")


def test_the_console_script_collects_the_young_generation_less_often() -> None:
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    line = next(x for x in done.stdout.splitlines() if x.startswith("thresholds"))
    assert tuple(int(v) for v in line.split()[1:]) == CLI_GC_THRESHOLDS
    assert CLI_GC_THRESHOLDS[0] > gc.get_threshold()[0]


def test_the_click_group_run_in_process_leaves_the_callers_collector_alone() -> None:
    before = gc.get_threshold()
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert gc.get_threshold() == before
