"""docs/cli.md is generated from the click commands (``make cli-docs``, :mod:`portable.cli.docs`): it must
be what they say now, and name every option each command's ``--help`` shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT

from portable.cli.docs import REGENERATE, drifted, render, sections

PAGE = ROOT / "docs" / "cli.md"
# An option as --help lists it: "  -o, --output FILE  ...", "  --verify / --no-verify  ..."
_OPTION_LINE = re.compile(r"^  (-[^ ].*?)(?:  |$)")
_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
EVERYWHERE = {"--debug", "-h", "--help"}  # listed once, in the `portable` section


def check_page(path: Path, generated: str) -> None:
    drift = drifted(path.read_text(), generated)
    assert not drift, (f"{path.name} drifted from the commands (their --help, the vocabulary) in: {', '.join(drift)}; "
                       f"regenerate it with `{REGENERATE}`")


@pytest.fixture(scope="module")
def generated() -> str:
    return render()


def test_the_page_is_what_the_commands_say(generated):
    check_page(PAGE, generated)


def test_a_stale_page_fails_naming_the_command_that_drifted(tmp_path, generated):
    stale = tmp_path / "cli.md"
    stale.write_text(generated.replace("- `--weight-type [uint8|int8]`:", "- `--weights [uint8|int8]`:"))
    with pytest.raises(AssertionError, match=r"in: `portable quantize`; regenerate it with `make cli-docs`"):
        check_page(stale, generated)
    stale.write_text(generated + "\n## `portable gone`\n\nA command that is no more.\n")
    with pytest.raises(AssertionError, match="in: `portable gone`"):
        check_page(stale, generated)


def _help_flags(output: str) -> set[str]:
    section = output.split("\nOptions:\n", 1)[1].split("\nCommands:\n", 1)[0]
    return {flag for line in section.splitlines() if (m := _OPTION_LINE.match(line)) for flag in _FLAG.findall(m[1])}


def missing_flags(page: str, command: tuple[str, ...], help_output: str) -> set[str]:
    """The flags ``--help`` lists for ``command`` that its section's option list on the page does not name."""
    body = sections(page).get(f"`{' '.join(('portable', *command))}`", "")
    listed = {flag for line in body.splitlines() if line.startswith("- `")
              for flag in _FLAG.findall(line.split("`")[1])}
    return _help_flags(help_output) - (EVERYWHERE if command else set()) - listed


COMMANDS = [(), ("validate",), ("rules",), ("explain",), ("inspect",), ("export",), ("precheck",), ("fix",),
            ("quantize",), ("compare",), ("matrix",), ("report",), ("report", "merge"), ("fleet",), ("fleet", "run"),
            ("fleet", "report")]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "portable")
def test_the_page_names_every_option_its_help_shows(cli, command):
    result = cli(*command, "--help")
    assert result.exit_code == 0, result.output
    assert missing_flags(PAGE.read_text(), command, result.output) == set()


def test_every_command_has_a_section(cli, generated):
    from portable.cli import COMMANDS as NAMES

    titles = set(sections(generated))
    assert {f"`portable {name}`" for name in NAMES} <= titles
    groups = {"report merge", "fleet run", "fleet report"}
    assert {" ".join(c) for c in COMMANDS if c} == set(NAMES) | groups  # this file's list is whole


def test_a_missing_option_is_named(cli):
    result = cli("quantize", "--help")
    page = PAGE.read_text().replace("- `--weight-type [uint8|int8]`:", "- `--kind`:")
    assert missing_flags(page, ("quantize",), result.output) == {"--weight-type"}


def test_the_vocabulary_is_on_the_page(generated):
    from portable.quantization.targets import TARGETS as QUANTIZE_TARGETS
    from portable.validators.targets import TARGETS

    assert set(QUANTIZE_TARGETS) <= set(TARGETS)  # what the page says of quantize's names
    vocabulary = sections(generated)["Vocabulary"]
    assert all(f"| {code} |" in vocabulary for code in range(4))
    assert "`portable quantize --activations`: now `--activation-type`" in vocabulary
    assert "`portable quantize --target cpu`: now `--target ort-cpu`" in vocabulary
    assert "`ort-cpu`, `ort-cuda`" in vocabulary
