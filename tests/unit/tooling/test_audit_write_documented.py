"""The audit's one write on a host is said wherever the audit is described (issue 29).

The README, the gpu_audit role's README and playbooks/audit.yml called the audit read-only, while the role writes
each host's node_exporter textfile where that collector's directory exists (gpu_audit_metrics: auto). Each of them
now names that file where it says what the audit changes; no paragraph about the audit calls it read-only.
"""

from __future__ import annotations

import re

import pytest

from tests.paths import ROOT

DESCRIPTIONS = ["README.md", "docs/getting-started.md", "roles/gpu_audit/README.md", "playbooks/audit.yml"]


def paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*#?\s*\n", text)]


@pytest.mark.parametrize("path", DESCRIPTIONS)
def test_no_paragraph_calls_the_audit_read_only(path: str) -> None:
    for paragraph in paragraphs((ROOT / path).read_text()):
        if re.search(r"\baudit", paragraph, re.IGNORECASE):
            said = re.findall(r"[^.]*\bread-only\b[^.]*", paragraph)
            # The Proxmox configs are read read-only (with become): about a read, not about the audit's writes.
            assert [s for s in said if "/etc/pve" not in s] == [], f"{path}: {paragraph[:300]}"


@pytest.mark.parametrize("path", DESCRIPTIONS)
def test_the_description_names_the_metrics_textfile_and_how_to_turn_it_off(path: str) -> None:
    text = " ".join((ROOT / path).read_text().replace("#", " ").split())
    assert "textfile" in text and "gpu_audit_metrics" in text and ("false" in text)
