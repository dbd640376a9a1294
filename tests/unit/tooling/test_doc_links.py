"""The documentation a newcomer reads: a short README, every page reachable, every relative link and anchor real.

A README of 1,385 lines with no table of contents was what a newcomer met; its deeper parts now live in docs/.
The README stays short, every docs page is listed in docs/README.md, every role's README is linked from the
README, every relative link points at a file and heading that exist, and every collection name a page uses
(gpuhost.gpu.<name>) is a module, role, playbook or filter of the collection.
"""

from __future__ import annotations

import re

import pytest

from tests.docs_pages import anchors, broken_links, links, marked_blocks, pages, slug
from tests.paths import ROOT
from tests.source_files import load_source

README_MAX_LINES = 300
PAGES = pages()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page) -> None:
    assert broken_links(page) == []


def test_the_readme_is_read_in_minutes() -> None:
    count = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert count <= README_MAX_LINES, f"README.md has {count} lines: move the detail into docs/"


def test_every_docs_page_is_listed_in_the_docs_index() -> None:
    index = ROOT / "docs" / "README.md"
    listed = {(index.parent / target.partition("#")[0]).resolve()
              for _line, target in links(index.read_text(encoding="utf-8"))}
    top_pages = [p for p in (ROOT / "docs").glob("*.md") if p.name != "README.md"]
    assert [p.name for p in top_pages if p.resolve() not in listed] == []
    assert (ROOT / "docs" / "reference" / "README.md").resolve() in listed


def test_every_role_readme_is_linked_from_the_readme() -> None:
    readme = ROOT / "README.md"
    linked = {(ROOT / target.partition("#")[0]).resolve() for _line, target in links(readme.read_text())}
    roles = sorted(ROOT.glob("roles/*/README.md"))
    assert roles and [str(r.relative_to(ROOT)) for r in roles if r.resolve() not in linked] == []


def collection_names() -> set[str]:
    names = {p.stem for p in (ROOT / "plugins" / "modules").glob("*.py")}
    names |= {p.name for p in (ROOT / "roles").iterdir() if p.is_dir()}
    names |= {p.stem for p in (ROOT / "playbooks").glob("*.yml")}
    names |= {p.stem for p in (ROOT / "plugins" / "lookup").glob("*.py")}
    for plugin in (ROOT / "plugins" / "filter").glob("*.py"):
        names |= set(load_source(plugin, f"doc_links_filter_{plugin.stem}").FilterModule().filters())
    return names


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_collection_name_a_page_uses_exists(page) -> None:
    used = set(re.findall(r"(?<!ansible_collections\.)\bgpuhost\.gpu\.(\w+)", page.read_text(encoding="utf-8")))
    assert sorted(used - collection_names()) == []


def test_no_page_gives_the_pre_collection_module_path() -> None:
    # `ansible-doc -M library <module>` stopped working when library/ became plugins/modules/.
    stale = [str(p.relative_to(ROOT)) for p in PAGES if "-M library" in p.read_text(encoding="utf-8")]
    assert stale == []


def test_marked_blocks_hold_no_placeholder() -> None:
    # A block run as written cannot hold `<inventory>`-style placeholders; those blocks are not marked tested.
    blocks = [block for page in PAGES for block in marked_blocks(page)]
    assert blocks, "no page marks a command block as tested"
    assert [b.name for b in blocks if re.search(r"<[a-z][\w-]*>", b.code)] == []


# The checker itself must be able to fail: a page with a missing file, a missing anchor and a good link.
def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path, monkeypatch) -> None:
    import tests.docs_pages as docs_pages

    monkeypatch.setattr(docs_pages, "ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other page\n\n## The `gpuhost.gpu` collection: setup\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nSee [gone](missing.md), [bad anchor](other.md#nowhere),\n"
                    "[good](other.md#the-gpuhostgpu-collection-setup), [self](#page), [web](https://example.org/x),\n"
                    "`[in code](also-missing.md)`.\n\n```sh\n[in a block](missing-too.md)\n```\n")
    problems = docs_pages.broken_links(page)
    assert problems == ["page.md:3: missing.md (no such file)",
                        "page.md:3: other.md#nowhere (no heading with that anchor in other.md)"]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("As an installed collection: `gpuhost.gpu`", "as-an-installed-collection-gpuhostgpu"),
    ("JSON schema (`schema_version: 6`)", "json-schema-schema_version-6"),
    ("DCGM's diagnostic (`dcgmi diag`)", "dcgms-diagnostic-dcgmi-diag"),
    ("How to add ...", "how-to-add-"),
])
def test_anchors_are_githubs(heading, anchor) -> None:
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor() -> None:
    assert anchors("# A\n## Notes\n## Notes\n") == {"a", "notes", "notes-1"}
