"""docs/reference/findings.md: the findings catalog (plugins/module_utils/findings/catalog.py) for readers:
the table of every id, then each one's remedy and other texts, the categories and the actions."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

from docsref.markdown import header, table
from docsref.markup import code_span, escape_markdown
from docsref.sources import use_collection

CATALOG_SOURCE = "plugins/module_utils/findings/catalog.py"
# actions.py's docstring describes each action as "- ``name``: what it asks", possibly over several lines.
ACTION_LINE = re.compile(r"^- ``(\w+)``: (.*?)(?=^- ``|^\s*$)", re.MULTILINE | re.DOTALL)


def catalog_modules(root: Path) -> tuple[ModuleType, ModuleType]:
    """The catalog and the actions modules, importable as Ansible ships them (as tests/conftest.py does)."""
    use_collection(root)
    from ansible_collections.gpuhost.gpu.plugins.module_utils.findings import actions, catalog

    return catalog, actions


def findings_table(catalog: ModuleType) -> str:
    """The table of every id by category: id, category, severity, action, when (README.md's columns)."""
    lines = ["| id | category | severity | action | when |", "|---|---|---|---|---|"]
    for category in catalog.CATEGORIES:
        for entry in catalog.CATALOG.values():
            if entry.category != category:
                continue
            when = entry.title.replace("|", "\\|") + (f" (retired: {entry.retired})" if entry.retired else "")
            lines.append(f"| `{entry.id}` | {category} | {entry.severity_text()} | {catalog.ACTION_OF[entry.id]} "
                         f"| {when} |")
    return "\n".join(lines)


def action_meanings(actions: ModuleType) -> dict[str, str]:
    return {name: " ".join(text.split()) for name, text in ACTION_LINE.findall(actions.__doc__ or "")}


def entry_section(catalog: ModuleType, entry: Any) -> str:
    facts = (f"Category {code_span(entry.category)}, severity {entry.severity_text()}, "
             f"action {code_span(catalog.ACTION_OF[entry.id])}.")
    parts = [f"#### {code_span(entry.id)}", f"{escape_markdown(entry.title)}. {facts}"]
    if entry.retired:
        parts.append(f"**Retired**: {escape_markdown(entry.retired)}. It is no longer raised; older reports may "
                     "still carry it.")
    parts.append(f"**Remedy**: {escape_markdown(entry.remedy)}")
    parts += [f"**Remedy when {escape_markdown(which)}**: {escape_markdown(text)}"
              for which, text in entry.texts.items()]
    return "\n\n".join(parts)


def page(root: Path) -> str:
    catalog, actions = catalog_modules(root)
    meanings = action_meanings(actions)
    sections = [
        header(f"{CATALOG_SOURCE} (and findings/actions.py)"),
        "# Findings catalog",
        "Every finding a report can carry, from the one catalog the audit rules, the benchmark judges and the "
        "deployment gate raise them through. Ids are only ever added; one no longer raised stays, marked retired. "
        "Words in braces in a remedy, such as `{vmid}`, are filled in from what the audit saw on the host.",
        "## Actions",
        "What a finding asks of the host, in order of disruption. A finding raised critical asks at least "
        f"{code_span(actions.CRITICAL_AT_LEAST)} (except the gate's own reasons); one raised info asks "
        "`none`. A host's action is the most disruptive of its findings' actions.",
        table(["action", "what it asks"], [[code_span(name), escape_markdown(meanings.get(name, ""))]
                                           for name in actions.ACTIONS]),
        "## Categories",
        table(["category", "what it covers"],
              [[code_span(name), escape_markdown(text)] for name, text in catalog.CATEGORIES.items()]),
        "## All findings",
        findings_table(catalog),
        "## Remedies",
    ]
    for category in catalog.CATEGORIES:
        entries = [entry for entry in catalog.CATALOG.values() if entry.category == category]
        if entries:
            sections.append(f"### {category}")
            sections += [entry_section(catalog, entry) for entry in entries]
    return "\n\n".join(sections) + "\n"
