"""README.md stays one screen for a newcomer (under 120 lines; every command and option is docs/cli.md's), and
every relative link in it, and in the docs it links, leads to a file that exists (and a heading, for an anchor)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 120
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` (outside code blocks) whose file, or whose anchor's heading, is absent."""
    text = _CODE_BLOCK.sub("", page.read_text())
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        headings = {slug(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), re.M)} if file.is_file() else set()
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in headings):
            broken.append(target)
    return broken


def test_the_readme_is_under_120_lines():
    lines = len(README.read_text().splitlines())
    assert lines < MAX_LINES, f"README.md has {lines} lines; it must stay under {MAX_LINES}: move detail to docs/"


def _linked_docs() -> list[Path]:
    text = _CODE_BLOCK.sub("", README.read_text())
    targets = {(ROOT / t.partition("#")[0]).resolve() for t in _LINK.findall(text) if t.endswith(".md") or ".md#" in t}
    return sorted(t for t in targets if t.is_file())


@pytest.mark.parametrize("page", [README, *_linked_docs()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_readme_links_the_cli_page_and_the_layout():
    links = set(_LINK.findall(README.read_text()))
    assert {"docs/cli.md", "docs/layout.md"} <= links


def test_a_broken_link_is_named(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# There\n\n## A heading\n")
    page = tmp_path / "README.md"
    page.write_text("[ok](docs/there.md) [anchor](docs/there.md#a-heading) [web](https://example.org/x)\n"
                    "[gone](docs/gone.md) [bad anchor](docs/there.md#nowhere)\n"
                    "```\n[in code](not/checked.md)\n```\n")
    assert broken_links(page) == ["docs/gone.md", "docs/there.md#nowhere"]
