"""NCCL versions with known bugs on known hardware, and the finding that names the version to move to.

The NCCL that the serving venv's torch bundles (torch.cuda.nccl.version()) decides how the GPUs
talk during serving, and the one nccl-tests ran with decides what the benchmark saw; both are
checked. Each entry of the table holds the versions reported failing (exact versions: a version
between a failing and a working one that nobody tested is not claimed), the GPUs and conditions it
was reported on, the symptom, the version reported working (the fix), and the public sources. An
entry matches when a version in use is one of its affected versions and a GPU of the host has a
matching name; it is critical when the rank count is one the bug was reported with, a warning
otherwise (the same NCCL on the same GPUs, a configuration nobody reported).

Pure data and functions; ids only ever added here, like the findings catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding

_VERSION_RE = re.compile(r"^\s*(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:[+-][0-9A-Za-z.+-]*)?\s*$")


@dataclass(frozen=True)
class KnownIssue:
    id: str
    affected: tuple[str, ...]  # NCCL versions reported failing, exactly
    gpus: str  # regular expression over GPU names (nvidia-smi / torch spelling)
    gpu_text: str  # the GPUs, in words
    ranks: tuple[int, ...] | None  # rank counts it was reported with; None: any
    conditions: str
    symptom: str
    fixed_in: str  # the version reported working: the one to move to
    sources: tuple[str, ...]


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        id="nccl-2418",
        affected=("2.26.2",),
        gpus=r"RTX PRO 6000 Blackwell",
        gpu_text="RTX PRO 6000 Blackwell (reported on the Workstation Edition)",
        ranks=(2,),
        conditions="two GPUs of one host on PCIe (no NVLink), bare metal, driver 580.173.02, torch 2.7.0+cu128",
        symptom="collectives of 512 KiB or more fail with an illegal memory access (all_reduce_perf -g 2 stops at "
                "524288 bytes); smaller messages work",
        fixed_in="2.31.2",
        sources=("https://github.com/NVIDIA/nccl/issues/2418",),
    ),
    KnownIssue(
        id="nccl-1637",
        affected=("2.25.1",),
        gpus=r"RTX 5090",
        gpu_text="GeForce RTX 5090",
        ranks=None,
        conditions="GeForce RTX 5090 (Blackwell consumer) with the NCCL 2.25.1 release",
        symptom="NCCL fails on these GPUs ('ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856' in its "
                "log): collectives and alltoall error out",
        fixed_in="2.26.2",
        sources=("https://github.com/NVIDIA/nccl/issues/1637", "https://github.com/NVIDIA/nccl-tests/issues/291"),
    ),
)

# Where each version came from, in the finding's words.
WHICH = {"torch": "the NCCL that torch in the serving venv bundles", "ran": "the NCCL the benchmark ran with"}


def parse_version(text: object) -> tuple[int, int, int] | None:
    """(2, 26, 2) from "2.26.2", "2.26.2+cuda12.2" or "2.26.2-1"; None for anything else."""
    if not isinstance(text, str):
        return None
    match = _VERSION_RE.match(text)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def at_least(version: object, minimum: tuple[int, int, int]) -> bool | None:
    """Whether a version is ``minimum`` or later; None when it is unknown."""
    parsed = parse_version(version)
    return None if parsed is None else parsed >= minimum


def known_issue_findings(versions: dict[str, str | None], gpu_names: list[str], nranks: int | None) -> list[Finding]:
    """One finding per known issue that a version in use and a GPU of the host match.

    ``versions``: which NCCL (``torch``, ``ran``) -> its version, None when unknown; ``gpu_names``: the
    host's GPUs as named by nvidia-smi or torch; ``nranks``: the ranks the benchmark ran with."""
    findings = []
    for issue in KNOWN_ISSUES:
        affected = {parse_version(v) for v in issue.affected}
        matched = [which for which, version in versions.items() if parse_version(version) in affected]
        gpus = sorted({name for name in gpu_names if isinstance(name, str) and re.search(issue.gpus, name)})
        if not matched or not gpus:
            continue
        version = str(versions[matched[0]]).strip()
        as_reported = issue.ranks is None or nranks in issue.ranks
        ranks_text = "" if as_reported else (
            f" It was reported with {' or '.join(map(str, issue.ranks or ()))} ranks; this run used "
            f"{nranks if nranks is not None else 'an unknown number of'}: the same NCCL on the same GPUs.")
        findings.append(make(
            "nccl_known_bad_version",
            f"NCCL {version} ({' and '.join(WHICH.get(w, w) for w in matched)}) has a known bug on {issue.gpu_text}: "
            f"{issue.symptom}. NCCL {issue.fixed_in} does not.{ranks_text}",
            {"issue": issue.id, "nccl_version": version, "which": ", ".join(matched), "gpus": gpus, "nranks": nranks,
             "affected": list(issue.affected), "conditions": issue.conditions, "symptom": issue.symptom,
             "fixed_in": issue.fixed_in, "sources": list(issue.sources)},
            severity="critical" if as_reported else "warning",
            fixed_in=issue.fixed_in, sources=", ".join(issue.sources)))
    return findings
