"""docs/reference/ against its sources: the pages are what scripts/docs_reference.py writes, and they cover
every module option, return key and role option, with links that lead somewhere.

The coverage checks read the sources their own way (a module's argument spec by importing it, RETURN and
meta/argument_specs.yml with yaml), not through the renderer, so a renderer that drops an option fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.paths import ROOT
from tests.source_files import load_source

REFERENCE = ROOT / "docs" / "reference"
MODULE_FILES = sorted(ROOT.glob("plugins/modules/*.py"))
ROLE_SPECS = sorted(ROOT.glob("roles/*/meta/argument_specs.yml"))
PLAYBOOKS = [ROOT / "site.yml", *sorted(ROOT.glob("playbooks/*.yml"))]
# A Markdown link's target; external ones (a scheme) are left to the reader.
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE_REFERENCE = re.compile(r"\bM\((gpuhost\.gpu\.\w+)\)")
FIRST_CELL = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_source(ROOT / "scripts" / "docs_reference.py", "docs_reference")


@pytest.fixture(scope="module")
def pages(generator: ModuleType) -> dict[Path, str]:
    return generator.expected_pages(ROOT)


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    after = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(heading):], re.MULTILINE)
    return text[start:start + len(heading) + after.start()] if after else text[start:]


def _paths(options: dict[str, Any] | None, nested: str, prefix: str = "") -> Iterator[str]:
    """Ansible's O() path of every option: parent.child under a dict, parent[].child under a list."""
    for name, spec in (options or {}).items():
        yield prefix + name
        if spec.get(nested):
            yield from _paths(spec[nested], nested, prefix + name + ("[]." if spec.get("type") == "list" else "."))


def test_every_page_is_what_the_generator_writes(generator: ModuleType, pages: dict[Path, str]) -> None:
    problems = generator.stale_pages(ROOT, pages)
    assert not problems, generator.check_message(problems)


def test_check_names_each_stale_missing_and_left_over_page(generator: ModuleType, pages: dict[Path, str],
                                                           tmp_path: Path) -> None:
    generator.write_pages(tmp_path, pages)
    assert generator.stale_pages(tmp_path, pages) == []
    (tmp_path / "docs/reference/roles.md").write_text("edited by hand\n", encoding="utf-8")
    (tmp_path / "docs/reference/modules/kernel_cmdline.md").unlink()
    (tmp_path / "docs/reference/modules/retired_module.md").write_text("old\n", encoding="utf-8")
    problems = generator.stale_pages(tmp_path, pages)
    assert problems == ["docs/reference/modules/kernel_cmdline.md: missing",
                        "docs/reference/roles.md: differs from its sources",
                        "docs/reference/modules/retired_module.md: no source generates it any more"]
    assert "Run `make docs`" in generator.check_message(problems)
    generator.write_pages(tmp_path, pages)
    assert generator.stale_pages(tmp_path, pages) == []
    assert not (tmp_path / "docs/reference/modules/retired_module.md").exists()


def test_the_command_line_check_fails_until_write(generator: ModuleType, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # tests/: the fleet of captures the pictures are drawn from.
    for name in ("plugins", "roles", "playbooks", "site.yml", "collections", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/reference/findings.md: missing" in err and "make docs" in err
    assert generator.main(["--write"]) == 0
    assert generator.main(["--check"]) == 0


def test_every_page_says_it_is_generated_and_how(pages: dict[Path, str]) -> None:
    first_lines = {str(path): text.splitlines()[0] for path, text in pages.items()}
    assert {path: line for path, line in first_lines.items()
            if not ("Generated from" in line and "`make docs`" in line and "Do not edit" in line)} == {}


def test_one_page_per_module_and_an_index_of_them(pages: dict[Path, str]) -> None:
    module_pages = {path.name for path in pages if path.parent == Path("docs/reference/modules")}
    assert module_pages == {f"{path.stem}.md" for path in MODULE_FILES} | {"README.md"}
    index = pages[Path("docs/reference/modules/README.md")]
    assert [line.count(f"]({path.stem}.md)") for path in MODULE_FILES for line in index.splitlines()
            if f"]({path.stem}.md)" in line] == [1] * len(MODULE_FILES)


@pytest.mark.parametrize("path", MODULE_FILES, ids=[path.stem for path in MODULE_FILES])
def test_every_option_and_return_key_of_a_module_is_on_its_page(path: Path, pages: dict[Path, str]) -> None:
    module = load_source(path, f"_docs_reference_{path.stem}")
    spec = module.get_argument_spec()
    page = pages[Path(f"docs/reference/modules/{path.stem}.md")]
    documented = set(FIRST_CELL.findall(_section(page, "## Parameters")))
    assert set(_paths(spec, "options")) - documented == set()
    returns = yaml.safe_load(module.RETURN) or {}
    listed = set(FIRST_CELL.findall(_section(page, "## Return values")))
    assert set(_paths(returns, "contains")) - listed == set()
    assert listed, "the page lists no return value"


@pytest.mark.parametrize("specs", ROLE_SPECS, ids=[path.parts[-3] for path in ROLE_SPECS])
def test_every_option_of_every_role_entry_point_is_in_roles_md(specs: Path, pages: dict[Path, str]) -> None:
    role = specs.parts[-3]
    text = _section(pages[Path("docs/reference/roles.md")], f"## {role}")
    assert f"](../../roles/{role}/README.md)" in text
    for entry_point, spec in yaml.safe_load(specs.read_text(encoding="utf-8"))["argument_specs"].items():
        section = _section(text, f"### {role}: entry point `{entry_point}`")
        assert set(_paths(spec.get("options"), "options")) - set(FIRST_CELL.findall(section)) == set(), entry_point


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=[path.name if path.parent == ROOT else f"playbooks/{path.name}"
                                                     for path in PLAYBOOKS])
def test_every_play_and_tag_of_a_playbook_is_in_playbooks_md(playbook: Path, pages: dict[Path, str]) -> None:
    text = playbook.read_text(encoding="utf-8")
    section = _section(pages[Path("docs/reference/playbooks.md")], f"## {playbook.relative_to(ROOT).as_posix()}")
    for play in yaml.safe_load(text):
        assert f"| {play['name']} |" in section
    for tags in re.findall(r"tags: \[([^\]]*)\]", text):
        assert all(f"`{tag.strip()}`" in section for tag in tags.split(",")), tags
    comment = next(line for line in text.splitlines() if line.startswith("# "))
    assert " ".join(comment[2:].split()[:4]) in section


def test_every_relative_link_leads_to_a_file_or_a_heading(pages: dict[Path, str]) -> None:
    broken = []
    for relative, text in pages.items():
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            if file_part:
                if not (ROOT / relative.parent / file_part).resolve().exists():
                    broken.append(f"{relative}: {target}")
            elif anchor not in {_slug(line) for line in text.splitlines() if line.startswith("#")}:
                broken.append(f"{relative}: {target}")
    assert broken == []


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("path", MODULE_FILES, ids=[path.stem for path in MODULE_FILES])
def test_every_module_reference_is_a_link_to_a_generated_page(path: Path, pages: dict[Path, str]) -> None:
    module = load_source(path, f"_docs_reference_refs_{path.stem}")
    documentation = yaml.safe_load(module.DOCUMENTATION)
    named = set(MODULE_REFERENCE.findall(module.DOCUMENTATION + (module.RETURN or "")))
    named |= {item["module"] for item in documentation.get("seealso") or [] if "module" in item}
    page = pages[Path(f"docs/reference/modules/{path.stem}.md")]
    for fqcn in named:
        short = fqcn.removeprefix("gpuhost.gpu.")
        assert f"]({short}.md)" in page, fqcn
        assert Path(f"docs/reference/modules/{short}.md") in pages, fqcn


def test_attributes_say_check_and_diff_mode_support(pages: dict[Path, str]) -> None:
    page = pages[Path("docs/reference/modules/kernel_cmdline.md")]
    attributes = _section(page, "## Attributes")
    assert "| `check_mode` | full |" in attributes and "| `diff_mode` | full |" in attributes


ANSIBLE_DOC = shutil.which("ansible-doc", path=str(Path(sys.executable).parent)) or shutil.which("ansible-doc")


@pytest.mark.skipif(ANSIBLE_DOC is None, reason="ansible-doc is not installed")
def test_attributes_are_those_ansible_doc_gives_after_merging_fragments(pages: dict[Path, str],
                                                                         tmp_path: Path) -> None:
    """The attributes come from doc fragments (plugins/doc_fragments/attributes.py): each page must show the
    support that ansible-doc resolves for the module, not only what its own DOCUMENTATION says."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_HOME": str(tmp_path)}
    names = [f"gpuhost.gpu.{path.stem}" for path in MODULE_FILES]
    result = subprocess.run([ANSIBLE_DOC, "--json", "-M", "plugins/modules", *names], capture_output=True,
                            text=True, env=env, cwd=ROOT, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    wrong = {}
    for name, doc in json.loads(result.stdout).items():
        attributes = doc["doc"]["attributes"]
        page = _section(pages[Path(f"docs/reference/modules/{name.rsplit('.', 1)[1]}.md")], "## Attributes")
        expected = [f"| `check_mode` | {attributes['check_mode']['support']} |",
                    f"| `diff_mode` | {attributes['diff_mode']['support']} |",
                    f"| `platform` | {attributes['platform']['platforms']} |"]
        if [row for row in expected if row not in page]:
            wrong[name] = expected
    assert wrong == {}


def test_markup_in_a_description_becomes_markdown(generator: ModuleType) -> None:
    markup = sys.modules["docsref.markup"]
    link = markup.module_page_link("modules/")
    rendered = markup.render("Set O(params[].value) to V(on) with C(a | b\\)) and I(care), B(never); see "
                             "M(gpuhost.gpu.kernel_cmdline), M(ansible.builtin.copy), U(https://example.org) and "
                             "L(the docs,https://example.org/x), E(HOME), RV(changed); a <host> *glob*.", link)
    assert rendered == ("Set `params[].value` to `on` with `a | b)` and *care*, **never**; see "
                        "[`gpuhost.gpu.kernel_cmdline`](modules/kernel_cmdline.md), [`ansible.builtin.copy`]"
                        "(https://docs.ansible.com/ansible/latest/collections/ansible/builtin/copy_module.html), "
                        "<https://example.org> and [the docs](https://example.org/x), `HOME`, `changed`; a "
                        "&lt;host&gt; \\*glob\\*.")


def test_an_unclosed_command_stays_text(generator: ModuleType) -> None:
    markup = sys.modules["docsref.markup"]
    assert markup.render("I(x) then C(never closed", markup.module_page_link("")) == "*x* then C(never closed"


FRAGMENT = '''
class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode: {support: full}
  diff_mode: {support: full, details: from the fragment}
notes: [From the fragment.]
"""
    DIFF_NONE = "attributes: {diff_mode: {support: none}}"
'''


def test_fragments_merge_as_ansible_doc_merges_them(generator: ModuleType, tmp_path: Path) -> None:
    fragments = sys.modules["docsref.fragments"]
    (tmp_path / "attributes.py").write_text(FRAGMENT, encoding="utf-8")
    documentation = {"extends_documentation_fragment": ["ansible.builtin.action_common_attributes",
                                                        "gpuhost.gpu.attributes"],
                     "attributes": {"diff_mode": {"support": "partial"}}, "notes": ["Own note."]}
    merged, used = fragments.merge(documentation, tmp_path)
    assert merged["attributes"] == {"check_mode": {"support": "full"},
                                    "diff_mode": {"support": "partial", "details": "from the fragment"}}
    assert merged["notes"] == ["Own note.", "From the fragment."]
    assert used == [tmp_path / "attributes.py"]
    merged, _used = fragments.merge({"extends_documentation_fragment": "gpuhost.gpu.attributes.diff_none"}, tmp_path)
    assert merged["attributes"] == {"diff_mode": {"support": "none"}}


@pytest.mark.parametrize(("name", "message"), [
    ("gpuhost.gpu.nothing", r"doc fragment gpuhost.gpu.nothing: expected .*nothing\.py; add it or fix"),
    ("gpuhost.gpu.attributes.diff_partial", "has no DIFF_PARTIAL; it has DIFF_NONE, DOCUMENTATION"),
])
def test_an_unknown_fragment_is_named_with_the_fix(generator: ModuleType, tmp_path: Path, name: str,
                                                   message: str) -> None:
    (tmp_path / "attributes.py").write_text(FRAGMENT, encoding="utf-8")
    with pytest.raises(sys.modules["docsref.sources"].SourceError, match=message):
        sys.modules["docsref.fragments"].merge({"extends_documentation_fragment": [name]}, tmp_path)


def test_a_module_without_documentation_is_a_message_not_a_traceback(generator: ModuleType, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plugins" / "modules").mkdir(parents=True)
    (tmp_path / "plugins" / "modules" / "bare.py").write_text("RETURN = ''\n", encoding="utf-8")
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 2
    assert "bare.py: no DOCUMENTATION string; every module documents itself" in capsys.readouterr().err


def test_every_kind_of_material_is_on_its_page() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import KINDS

    page = (ROOT / "docs" / "reference" / "material-kinds.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[0]: line for line in page.splitlines() if line.startswith("| `")}
    assert [kind for kind in KINDS if KINDS[kind].replace("|", "\\|") not in rows.get(f"| `{kind}`", "")] == []
