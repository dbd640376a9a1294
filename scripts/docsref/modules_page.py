"""One page per module of plugins/modules/ from its DOCUMENTATION, EXAMPLES and RETURN, and their index."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from docsref.markdown import bullets, code_span, described, header, options_table, table, type_of, value
from docsref.markup import COLLECTION, escape_plain, module_page_link, render
from docsref.sources import ModuleDoc

# What the attributes of ansible.builtin.action_common_attributes mean, said once for every page.
ATTRIBUTE_MEANING = {
    "check_mode": "Runs in check mode (--check) and says what it would change without changing it.",
    "diff_mode": "Returns what changed (or would, in check mode) as a diff with --diff.",
    "platform": "The target platforms it runs on.",
}
LINK = module_page_link("")


def page(doc: ModuleDoc, source: str) -> str:
    meta = doc.documentation
    sections = [
        header(source),
        f"# {COLLECTION}{doc.name}",
        render(str(meta.get("short_description", "")), LINK),
        "[All modules](README.md)",
        "## Synopsis",
        bullets(meta.get("description"), LINK),
    ]
    if meta.get("requirements"):
        sections += ["## Requirements", bullets(meta["requirements"], LINK)]
    sections += ["## Parameters", options_table(meta.get("options"), LINK)]
    if meta.get("attributes"):
        sections += ["## Attributes", attributes_table(meta["attributes"])]
    if meta.get("notes"):
        sections += ["## Notes", bullets(meta["notes"], LINK)]
    if meta.get("seealso"):
        sections += ["## See also", "\n".join(seealso_lines(meta["seealso"]))]
    if doc.examples:
        sections += ["## Examples", f"```yaml\n{doc.examples}\n```"]
    sections += ["## Return values", returns_table(doc.returns)]
    return "\n\n".join(section for section in sections if section) + "\n"


def attributes_table(attributes: Mapping[str, Any]) -> str:
    rows = []
    for name, spec in attributes.items():
        spec = spec or {}
        support = spec.get("support") or ""
        if name == "platform" and spec.get("platforms"):
            platforms = spec["platforms"]
            support = ", ".join(platforms) if isinstance(platforms, list) else str(platforms)
        meaning = described(spec.get("description") or ATTRIBUTE_MEANING.get(name, ""), LINK)
        details = described(spec.get("details"), LINK)
        rows.append([code_span(name), support, " ".join(part for part in (meaning, details) if part)])
    return table(["attribute", "support", "description"], rows)


def seealso_lines(entries: list[Any]) -> Iterator[str]:
    for item in entries:
        item = item or {}
        description = f": {render(str(item['description']), LINK)}" if item.get("description") else ""
        if "module" in item:
            link = LINK(item["module"])
            name = code_span(item["module"])
            yield f"- [{name}]({link}){description}" if link else f"- {name}{description}"
        elif "link" in item:
            yield f"- [{escape_plain(str(item.get('name', item['link'])))}]({item['link']}){description}"
        elif "ref" in item:
            yield f"- {escape_plain(str(item.get('name', item['ref'])))} (Ansible docs: {code_span(item['ref'])})" \
                  f"{description}"
        elif "plugin" in item:
            yield f"- {code_span(item['plugin'])} ({item.get('plugin_type', 'plugin')}){description}"


def walk_returns(returns: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, spec) of every return key, contained ones after their parent (``key.sub``, ``key[].sub``)."""
    for name, spec in returns.items():
        spec = spec or {}
        path = f"{prefix}{name}"
        yield path, spec
        if isinstance(spec.get("contains"), Mapping):
            joint = "[]." if spec.get("type") == "list" else "."
            yield from walk_returns(spec["contains"], path + joint)


def returns_table(returns: Mapping[str, Any], link: Callable[[str], str | None] = LINK) -> str:
    rows = []
    for path, spec in walk_returns(returns):
        description = described(spec.get("description"), link)
        if spec.get("choices"):
            description += f"<br><br>Choices: {', '.join(value(choice) for choice in spec['choices'])}."
        if "sample" in spec:
            description += f"<br><br>Sample: {value(spec['sample'])}"
        rows.append([code_span(path), render(str(spec.get("returned", "")), link), type_of(spec), description])
    if not rows:
        return "None."
    return table(["key", "returned", "type", "description"], rows)


def index(docs: list[ModuleDoc]) -> str:
    lines = [
        header("the short_description of each module in plugins/modules/"),
        "# Modules of the gpuhost.gpu collection",
        "Each page is generated from the module's own documentation, as `ansible-doc gpuhost.gpu.<module>` shows it.",
        table(["module", "what it does"],
              [[f"[{code_span(COLLECTION + doc.name)}]({doc.name}.md)",
                render(str(doc.documentation.get("short_description", "")), LINK)] for doc in docs]),
    ]
    return "\n\n".join(lines) + "\n"
