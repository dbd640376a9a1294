#!/usr/bin/env python3
"""The reference documentation under docs/reference/, generated from its sources of truth.

    python scripts/docs_reference.py --write   # write the pages (what `make docs` runs)
    python scripts/docs_reference.py --check   # exit 1 naming each page that is stale, missing or left over

Pages: modules/<module>.md from each module's DOCUMENTATION, EXAMPLES and RETURN (read from the file's
AST, not imported), modules/README.md the index, roles.md from roles/*/meta/argument_specs.yml,
playbooks.md from site.yml and playbooks/*.yml, findings.md from the findings catalog, material-kinds.md
from the kinds of material/kinds.py, code.md from the docstring of every Python file under plugins/,
pictures/ the incident guest's P2P heatmap and NCCL chart as its report draws them (docsref/pictures_page.py).
tests/unit/tooling/test_docs_reference.py fails when a page differs from what this writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The page renderers live beside this script, in scripts/docsref/.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from docsref.generate import check_message, expected_pages, stale_pages, write_pages  # noqa: E402
from docsref.sources import SourceError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the pages under docs/reference/")
    mode.add_argument("--check", action="store_true", help="exit 1 when a page differs from its sources")
    args = parser.parse_args(argv)
    try:
        pages = expected_pages(ROOT)
    except SourceError as exc:
        print(f"docs_reference: {exc}", file=sys.stderr)
        return 2
    if args.check:
        problems = stale_pages(ROOT, pages)
        if problems:
            print(check_message(problems), file=sys.stderr)
            return 1
        print(f"docs_reference: {len(pages)} pages up to date")
        return 0
    touched = write_pages(ROOT, pages)
    print(f"docs_reference: {len(touched)} of {len(pages)} pages written or removed"
          + "".join(f"\n  {path}" for path in touched))
    return 0


if __name__ == "__main__":
    sys.exit(main())
