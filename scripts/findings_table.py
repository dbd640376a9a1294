#!/usr/bin/env python3
"""The findings table, rendered from the catalog (plugins/module_utils/findings/catalog.py).

    python scripts/findings_table.py           # print the table
    python scripts/findings_table.py --write   # write docs/reference/ (findings.md holds the table), as `make docs`

The table and the rest of the findings page are rendered by scripts/docsref/findings_page.py, part of the
reference generator (scripts/docs_reference.py); tests/unit/findings/test_catalog.py fails when
docs/reference/findings.md differs from the catalog.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from docsref import findings_page  # noqa: E402


def render() -> str:
    catalog, _actions = findings_page.catalog_modules(ROOT)
    return findings_page.findings_table(catalog)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write docs/reference/, findings.md among them")
    args = parser.parse_args()
    if not args.write:
        print(render())
        return 0
    import docs_reference

    return docs_reference.main(["--write"])


if __name__ == "__main__":
    sys.exit(main())
