"""The corpus of bad inputs (fixtures/bad/generate.py): exact exit code, one clear line, no traceback,
and nothing outside the model's folder opened."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import ROOT

_spec = importlib.util.spec_from_file_location("portable_bad_corpus", ROOT / "fixtures" / "bad" / "generate.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = corpus
_spec.loader.exec_module(corpus)

# Runs the CLI with an audit hook that records every file Python opens.
_AUDITED = textwrap.dedent("""
    import json, sys
    opened = []
    def audit(event, args):
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            opened.append(str(args[0]))
    sys.addaudithook(audit)
    from portable.cli import cli
    try:
        cli.main(args=sys.argv[2:], prog_name="portable")
    finally:
        with open(sys.argv[1], "w") as out:
            json.dump(opened, out)
""")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    return folder, corpus.generate(folder)


def test_corpus_has_at_least_30_cases(cases):
    assert len(cases[1]) >= 30


def _run(folder: Path, case, log: Path) -> subprocess.CompletedProcess:
    args = [a.replace("{dir}", str(folder)) for a in case.args]
    return subprocess.run([sys.executable, "-c", _AUDITED, str(log), *args], capture_output=True, text=True,
                          timeout=120)




def test_every_case(cases, tmp_path):
    folder, all_cases = cases
    failures = []
    for case in all_cases:
        log = tmp_path / f"{case.name}.json"
        result = _run(folder, case, log)
        output = result.stdout + result.stderr
        problems = []
        if result.returncode != case.exit_code:
            problems.append(f"exit {result.returncode}, expected {case.exit_code}")
        if case.message not in output:
            problems.append(f"no {case.message!r} in output")
        if "Traceback" in output:
            problems.append("traceback")
        if case.exit_code == 3:
            named = case.names.replace("{dir}", str(folder))
            lines = [line for line in output.splitlines() if case.message in line]
            if not lines or not any(named in line for line in lines):
                problems.append(f"the message line does not name {named!r}")
        opened = json.loads(log.read_text()) if log.exists() else []
        outside = [p for p in opened if "passwd" in p or p.endswith(("missing.bin", "pipe.bin", "link.bin"))]
        if outside:
            problems.append(f"opened {outside}")
        if problems:
            failures.append(f"{case.name}: {'; '.join(problems)}\n{output[-600:]}")
    assert not failures, "\n\n".join(failures)
