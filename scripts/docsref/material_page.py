"""docs/reference/material-kinds.md: every kind of material the offline analysis recognises, from
KINDS in plugins/module_utils/material/kinds.py, in the order a text carrying two kinds is named."""

from __future__ import annotations

from pathlib import Path

from docsref.markdown import header, table
from docsref.markup import code_span
from docsref.sources import use_collection

KINDS_SOURCE = "plugins/module_utils/material/kinds.py"


def kinds(root: Path) -> dict[str, str]:
    """KINDS as Ansible ships it, imported the way tests/conftest.py imports the collection."""
    use_collection(root)
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import KINDS

    return KINDS


def page(root: Path) -> str:
    rows = [[code_span(kind), what] for kind, what in kinds(root).items()]
    return "\n".join([
        header(f"{KINDS_SOURCE} (KINDS)"), "",
        "# Material the analysis recognises", "",
        "`make analyze` (`gpu_analyze`) tells each file (or each piece of a paste holding several "
        "outputs) by its content, never by its name alone, as one of these kinds; a text that shows none of "
        "them is listed under \"Not used\" in the report, with why. See "
        "[offline analysis](../offline-analysis.md).", "",
        table(["kind", "what it is"], rows), "",
    ])
