"""docs/reference/roles.md: every role's entry points and options from its meta/argument_specs.yml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docsref.markdown import bullets, header, options_table
from docsref.markup import COLLECTION, code_span, module_page_link, render
from docsref.sources import SourceError, read_yaml_file

LINK = module_page_link("modules/")


def role_section(role: Path) -> str:
    specs_file = role / "meta" / "argument_specs.yml"
    data = read_yaml_file(specs_file) or {}
    entry_points = data.get("argument_specs") if isinstance(data, dict) else None
    if not isinstance(entry_points, dict):
        raise SourceError(f"{specs_file}: expected a mapping under argument_specs (one key per entry point)")
    sections = [f"## {role.name}",
                f"{code_span(COLLECTION + role.name)}: see its [README](../../roles/{role.name}/README.md) for how "
                "to use it."]
    for name, spec in entry_points.items():
        spec = spec or {}
        sections.append(f"### {role.name}: entry point `{name}`")
        if spec.get("short_description"):
            sections.append(render(str(spec["short_description"]), LINK))
        if spec.get("description"):
            sections.append(bullets(spec["description"], LINK))
        sections.append(options_table(spec.get("options"), LINK))
    return "\n\n".join(sections)


def page(roles: list[Path]) -> str:
    lines: list[Any] = [
        header("roles/*/meta/argument_specs.yml"),
        "# Roles of the gpuhost.gpu collection",
        "Every role's entry points and options, as Ansible checks them (meta/argument_specs.yml). Nested options "
        "are named by their path: `parent.child` under a dict, `parent[].child` under a list.",
        "\n".join(f"- [{role.name}](#{role.name})" for role in roles),
    ]
    lines += [role_section(role) for role in roles]
    return "\n\n".join(lines) + "\n"
