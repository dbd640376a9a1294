"""The findings catalog: well formed, the only maker of findings, and its page docs/reference/findings.md."""

from __future__ import annotations

import ast
import importlib
import re
import sys

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings import catalog
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.actions import ACTIONS
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import (
    CATALOG,
    CATEGORIES,
    CatalogError,
    Entry,
    make,
    text,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import SEVERITIES

from tests.paths import ROOT

ID = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def _findings_page():
    """scripts/docsref/findings_page.py, the part of the reference generator that renders the catalog."""
    scripts = str(ROOT / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module("docsref.findings_page")


@pytest.mark.parametrize("entry", CATALOG.values(), ids=lambda e: e.id)
def test_every_entry_is_complete(entry: Entry) -> None:
    assert ID.match(entry.id), entry.id
    assert entry.category in CATEGORIES
    assert entry.severity in SEVERITIES and all(s in SEVERITIES for s in entry.also)
    assert entry.severity not in entry.also
    assert entry.title.strip() and "\n" not in entry.title
    assert entry.remedy.strip(), f"{entry.id} has no remedy text"
    for which, template in entry.texts.items():
        assert which != "remedy" and template.strip(), (entry.id, which)


@pytest.mark.parametrize("entry", CATALOG.values(), ids=lambda e: e.id)
def test_every_remedy_text_renders_with_its_own_fields(entry: Entry) -> None:
    for which, template in {"remedy": entry.remedy, **entry.texts}.items():
        fields = {name: f"<{name}>" for name in catalog.fields_of(template)}
        rendered = text(entry.id, which, **fields)
        assert "{" not in rendered.replace("{" + "}", ""), (entry.id, which, rendered)
        assert all(f"<{name}>" in rendered for name in fields)


def test_make_fills_the_remedy_from_the_catalog() -> None:
    finding = make("proxmox_vm_mmio_window_small", "small window", {"vmid": 101}, recommended_mb=262144,
                   commands="On the Proxmox host:\n  qm set 101 --args '...'")
    assert finding.as_dict() == {
        "id": "proxmox_vm_mmio_window_small", "severity": "warning", "summary": "small window",
        "evidence": {"vmid": 101},
        "remedy": "Set the window to 262144 MiB (the next power of two) in args:\nOn the Proxmox host:\n"
                  "  qm set 101 --args '...'",
        "action": "fix_hypervisor"}


def test_make_refuses_what_the_catalog_does_not_say() -> None:
    with pytest.raises(CatalogError, match="'no_such_finding' is not in the findings catalog"):
        make("no_such_finding", "x")
    with pytest.raises(CatalogError, match="raised as 'critical'; the catalog allows warning"):
        make("pcie_link_narrow", "x", severity="critical")
    with pytest.raises(CatalogError, match="needs the field 'commands'"):
        make("proxmox_cpu_not_host", "x")
    with pytest.raises(CatalogError, match="has no remedy text 'nope'"):
        text("small_bar1", "nope")


def test_a_retired_id_cannot_be_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    retired = Entry("old_check", "audit", "info", "an old check", "nothing", retired="replaced by new_check")
    monkeypatch.setattr(catalog, "CATALOG", {**CATALOG, "old_check": retired})
    with pytest.raises(CatalogError, match="retired"):
        make("old_check", "x")


def test_the_renamed_comm_floor_stays_retired_beside_its_successor() -> None:
    old, new = CATALOG["comm_floor"], CATALOG["communication_ceiling"]
    assert old.retired == "renamed communication_ceiling" and old.renamed_to == "communication_ceiling"
    assert not new.retired and not new.renamed_to
    assert (old.category, old.severity, catalog.ACTION_OF[old.id]) == (new.category, new.severity,
                                                                       catalog.ACTION_OF[new.id])
    assert "communication ceiling" in new.title
    with pytest.raises(CatalogError, match="retired"):
        make("comm_floor", "x")


def test_the_renamed_model_profile_invalid_stays_retired_beside_its_successor() -> None:
    old, new = CATALOG["model_profile_invalid"], CATALOG["model_invalid"]
    assert old.retired == "renamed model_invalid" and old.renamed_to == "model_invalid"
    assert not new.retired and not new.renamed_to
    assert (old.category, old.severity, catalog.ACTION_OF[old.id]) == (new.category, new.severity,
                                                                       catalog.ACTION_OF[new.id])
    with pytest.raises(CatalogError, match="retired"):
        make("model_profile_invalid", "x")


@pytest.mark.parametrize(("renamed_to", "retired"), [
    ("no_such_id", "renamed no_such_id"),  # a successor the catalog does not have
    ("p2p_not_supported", ""),  # an id still raised has no successor
    ("old_check", "renamed old_check"),  # a successor that is retired itself
])
def test_a_successor_must_be_a_live_catalog_id(renamed_to: str, retired: str) -> None:
    entry = Entry("old_check", "audit", "info", "an old check", "nothing", retired=retired, renamed_to=renamed_to)
    with pytest.raises(CatalogError, match="renamed_to names"):
        catalog._check({**CATALOG, "old_check": entry})


def test_an_id_given_twice_is_refused() -> None:
    with pytest.raises(CatalogError, match="twice"):
        catalog._entries(Entry("a", "audit", "info", "t", "r"), Entry("a", "audit", "info", "t", "r"))


def test_categories_of_known_and_unknown_ids() -> None:
    assert catalog.category_of("p2p_not_supported") == "p2p"
    assert catalog.category_of("nccl_timeout") == "nccl"
    assert catalog.category_of("something_from_an_older_report") is None
    assert catalog.category_of(None) is None


def _finding_constructions(path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "Finding":
                lines.append(node.lineno)
        if isinstance(node, ast.Dict):
            # A dict that names a new id (a literal or an f-string) is a finding made by hand; one
            # that copies an id from a variable quotes a finding made elsewhere (the gate does).
            values = {k.value: v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)}
            if {"id", "severity", "summary"} <= set(values) and isinstance(values["id"], (ast.Constant, ast.JoinedStr)):
                lines.append(node.lineno)
    return lines


def test_only_the_catalog_makes_findings() -> None:
    """No Finding(...) and no finding-shaped dict literal outside findings/catalog.py."""
    makers = {ROOT / "plugins" / "module_utils" / "findings" / "catalog.py"}
    files = [*(ROOT / "plugins").rglob("*.py")]
    found = {str(p.relative_to(ROOT)): _finding_constructions(p) for p in files if p not in makers}
    assert {p: lines for p, lines in found.items() if lines} == {}


def test_the_findings_page_is_the_catalog() -> None:
    page = (ROOT / "docs" / "reference" / "findings.md").read_text(encoding="utf-8")
    assert page == _findings_page().page(ROOT), "docs/reference/findings.md differs from the catalog: run `make docs`"


def test_the_table_lists_every_id_once() -> None:
    rows = [line for line in _findings_page().findings_table(catalog).splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == sorted(CATALOG, key=lambda i: (list(CATEGORIES).index(
        CATALOG[i].category), list(CATALOG).index(i)))


def test_the_page_gives_every_id_its_remedy_and_every_action_its_meaning() -> None:
    page = (ROOT / "docs" / "reference" / "findings.md").read_text(encoding="utf-8")
    sections = re.split(r"^#### ", page, flags=re.MULTILINE)[1:]
    remedies = {section.split("`")[1]: section for section in sections}
    assert list(remedies) == [i for category in CATEGORIES for i in CATALOG if CATALOG[i].category == category]
    for finding_id, section in remedies.items():
        entry = CATALOG[finding_id]
        assert "**Remedy**: " in section and entry.remedy.split()[0] in section, finding_id
        assert all(f"**Remedy when {which}**" in section for which in entry.texts), finding_id
    for action in ACTIONS:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{action}` |"))
        assert len(row.split("|")[2].strip()) > 10, f"the action {action} has no meaning on the page"
