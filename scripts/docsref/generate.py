"""Every page under docs/reference/, rendered in memory, and how they differ from the files on disk."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from docsref import code_page, findings_page, material_page, modules_page, pictures_page, playbooks_page, roles_page
from docsref.fragments import merge
from docsref.markdown import FIX_COMMAND
from docsref.sources import ModuleDoc, read_module

OUT = Path("docs/reference")
MODULE_PAGES = OUT / "modules"


def module_files(root: Path) -> list[Path]:
    return sorted(path for path in (root / "plugins" / "modules").glob("*.py") if path.name != "__init__.py")


def role_dirs(root: Path) -> list[Path]:
    return sorted(path.parent.parent for path in (root / "roles").glob("*/meta/argument_specs.yml"))


def playbook_files(root: Path) -> list[Path]:
    return [root / "site.yml", *sorted((root / "playbooks").glob("*.yml"))]


def read_module_with_fragments(root: Path, path: Path) -> ModuleDoc:
    doc = read_module(path)
    documentation, used = merge(doc.documentation, root / "plugins" / "doc_fragments")
    return replace(doc, documentation=documentation, fragment_files=tuple(used))


def module_sources(root: Path, doc: ModuleDoc) -> str:
    """What a module page is generated from, for its header line."""
    sources = f"{doc.path.relative_to(root).as_posix()} (DOCUMENTATION, EXAMPLES, RETURN)"
    return " and ".join([sources, *(path.relative_to(root).as_posix() for path in doc.fragment_files)])


# Written by hand beside the generated pages: their index, which says what generates each.
HAND_WRITTEN = {OUT / "README.md"}


def expected_pages(root: Path) -> dict[Path, str]:
    """Relative path -> content of every generated page."""
    docs = [read_module_with_fragments(root, path) for path in module_files(root)]
    pages = {MODULE_PAGES / f"{doc.name}.md": modules_page.page(doc, module_sources(root, doc)) for doc in docs}
    pages[MODULE_PAGES / "README.md"] = modules_page.index(docs)
    pages[OUT / "roles.md"] = roles_page.page(role_dirs(root))
    pages[OUT / "playbooks.md"] = playbooks_page.page(root, playbook_files(root))
    pages[OUT / "findings.md"] = findings_page.page(root)
    pages[OUT / "material-kinds.md"] = material_page.page(root)
    pages[OUT / "code.md"] = code_page.page(root)
    pages.update(pictures_page.pages(root))
    return pages


def stale_pages(root: Path, pages: dict[Path, str]) -> list[str]:
    """One line per page that is missing, differs, or is left over from a source that is gone."""
    problems = []
    for relative, text in pages.items():
        path = root / relative
        if not path.is_file():
            problems.append(f"{relative}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{relative}: differs from its sources")
    generated = root / OUT
    on_disk = {path.relative_to(root) for path in generated.rglob("*.md")} if generated.is_dir() else set()
    problems += [f"{relative}: no source generates it any more"
                 for relative in sorted(on_disk - set(pages) - HAND_WRITTEN)]
    return problems


def write_pages(root: Path, pages: dict[Path, str]) -> list[Path]:
    """Write the pages that changed, remove the left-over ones; the paths touched."""
    touched = []
    for relative, text in pages.items():
        path = root / relative
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            touched.append(relative)
    for path in sorted((root / OUT).rglob("*.md")):
        if path.relative_to(root) not in pages and path.relative_to(root) not in HAND_WRITTEN:
            path.unlink()
            touched.append(path.relative_to(root))
    return touched


def check_message(problems: list[str]) -> str:
    return "\n".join([f"docs_reference: {len(problems)} generated page(s) out of date:",
                      *(f"  {problem}" for problem in problems),
                      f"Run `{FIX_COMMAND}` (python scripts/docs_reference.py --write) and commit the result."])
