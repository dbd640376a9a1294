"""Every command block the documentation marks as tested runs as written (`make docs-test`).

A walkthrough that cannot mislead: each block after a `<!-- tested ... -->` comment (tests/docs_pages.py) runs
with bash, errexit and pipefail, in a fresh copy of the checkout (its tracked and new files, the venv and the
caches linked in), from the copy's root, with the venv active as the pages ask, and without the caller's
ANSIBLE_* settings. It must exit 0 and leave no failed host in a recap. The README's picture of a report is
checked against the report the getting-started fleet audit writes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docs_pages import Block, marked_blocks, pages
from tests.paths import ROOT

BLOCKS = [block for page in pages() for block in marked_blocks(page)]
LINKED = (".venv", ".cache")  # built once per machine; a copy reuses them, never writes the checkout's


def checkout_copy(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked, and new ones not ignored), links kept as links."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = ROOT / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    for name in LINKED:
        if (ROOT / name).exists():
            (dest / name).symlink_to(ROOT / name)
    return dest


def run(block: Block, where: Path) -> subprocess.CompletedProcess[str]:
    venv = where / ".venv"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "PYTEST_", "VIRTUAL_ENV", "MAKE", "MFLAGS"))}
    env.update({"PWD": str(where), "VIRTUAL_ENV": str(venv), "PATH": f"{venv}/bin:{os.environ['PATH']}",
                "ANSIBLE_NOCOLOR": "1"})
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=where, env=env,
                          capture_output=True, text=True, timeout=900)


_RUNS: dict[str, tuple[subprocess.CompletedProcess[str], Path]] = {}


def ran(block: Block, tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    if block.name not in _RUNS:
        where = checkout_copy(tmp_path_factory.mktemp("checkout"))
        _RUNS[block.name] = (run(block, where), where)
    return _RUNS[block.name]


def test_the_pages_mark_blocks_as_tested() -> None:
    assert len(BLOCKS) >= 4, [b.name for b in BLOCKS]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_the_block_runs_as_written(block: Block, tmp_path_factory) -> None:
    result, _where = ran(block, tmp_path_factory)
    said = f"{block.name}:\n{block.code}\nexit {result.returncode}\n{result.stdout[-5000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, said
    recap = re.findall(r"^(\S+)\s+: ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)", result.stdout, re.M)
    assert [host for host, unreachable, failed in recap if unreachable != "0" or failed != "0"] == [], said


def excerpt(readme: str) -> list[str]:
    start = readme.index("<!-- report excerpt:")
    body = readme[start:].split("```text\n", 1)[1].split("\n```", 1)[0]
    return body.splitlines()


def test_the_readmes_report_excerpt_is_what_the_audit_writes(tmp_path_factory) -> None:
    audit = [b for b in BLOCKS if b.page.name == "getting-started.md" and "playbooks/audit.yml" in b.code]
    assert audit, "docs/getting-started.md lost its tested fleet audit"
    result, where = ran(audit[0], tmp_path_factory)
    assert result.returncode == 0, result.stdout[-3000:]
    report = (where / "reports" / "incident-guest.md").read_text().splitlines()
    # "..." alone marks a cut; a line ending in " ..." is the start of the report's line.
    missing = [line for line in excerpt((ROOT / "README.md").read_text())
               if line.strip() and line != "..."
               and not any(r == line or (line.endswith(" ...") and r.startswith(line[:-4])) for r in report)]
    assert missing == [], "README.md's report excerpt differs from reports/incident-guest.md"
