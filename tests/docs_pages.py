"""What the documentation pages hold, read the way a reader's browser and shell read them.

Shared by the link test (tests/unit/tooling/test_doc_links.py) and the command test (tests/docs/): the pages,
the links in them, the headings' anchors as GitHub renders them, and the command blocks marked as tested.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.paths import ROOT

# A block preceded by this comment is run as written by `make docs-test` (tests/docs/test_doc_commands.py).
TESTED_MARKER = "<!-- tested"
FENCE = re.compile(r"^(\s*)(```|~~~)(\w*)\s*$")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`[^`]*`")


def pages() -> list[Path]:
    """Every page a reader reaches from the README: the README, docs/, the roles' and other READMEs."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("roles/*/README.md")),
             *sorted(ROOT.glob("monitoring/**/*.md")), ROOT / "CHANGELOG.md"]
    return [path for path in found if path.is_file()]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the text outside fenced code blocks."""
    kept, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match and (fence is None or match.group(2) == fence):
            fence = None if fence else match.group(2)
            continue
        if fence is None:
            kept.append((number, line))
    return kept


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link outside code blocks and code spans."""
    return [(number, match.group(1)) for number, line in prose_lines(text)
            for match in LINK.finditer(CODE_SPAN.sub("", line))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a page, with GitHub's -1, -2 suffixes for repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    for _number, line in prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """Each relative link of a page whose file or heading does not exist, as 'page:line: target (why)'."""
    problems = []
    text = page.read_text(encoding="utf-8")
    for number, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... are not checked offline
            continue
        path_part, _, anchor = target.partition("#")
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            problems.append(f"{where} (no such file)")
            continue
        if anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text(encoding="utf-8")):
            problems.append(f"{where} (no heading with that anchor in {linked.name})")
    return problems


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def marked_blocks(page: Path) -> list[Block]:
    """The code blocks of a page that follow a `<!-- tested ... -->` comment line, dedented."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks = []
    for index, line in enumerate(lines):
        if not line.strip().startswith(TESTED_MARKER):
            continue
        opening = FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
        if not opening:
            raise ValueError(f"{page.relative_to(ROOT)}:{index + 1}: a tested comment must stand right above a "
                             "```sh block")
        body = []
        for inner in lines[index + 2:]:
            if FENCE.match(inner):
                break
            body.append(inner)
        blocks.append(Block(page, index + 3, textwrap.dedent("\n".join(body)).strip() + "\n"))
    return blocks
