"""NCCL releases whose topology model gives every AMD CPU interconnect a fixed 16 GB/s.

NCCL models each NUMA node as a CPU node and joins them with a link whose bandwidth it looks up by CPU
(src/graph/topo.cc ncclTopoGetInterCpuBw). For x86 AMD it is one constant for every generation,
``#define AMD_BW 16.0`` in src/graph/topo.h, while Intel gets per-model values. On a Zen 4/5 host whose
GPUs sit on several NUMA nodes (two sockets, or NPS2/NPS4 on one), NCCL then plans its rings and channels
for a 16 GB/s path that carries roughly twice that (dual EPYC 9575F with 8 RTX PRO 6000: 32 GB/s
cross-socket, NVIDIA/nccl#2036), and all-reduce runs below what the host can do.

Which releases: read in NVIDIA/nccl's release tags, the constant and its use for AMD CPUs are in v2.16.2-1
and in every release from v2.19.1-1 through v2.30.7-1 (the newest release read); v2.16.5-1 to v2.18.6-1 and
releases before v2.16.2-1 have no AMD case (the CPU link gets the local bandwidth, no cap). Per-generation
values (16/24/32 GB/s) were merged on the development branch towards 2.31 (commit 2f1c174c, from
NVIDIA/nccl#2036; #2113 and #2127 propose other Zen 5 values), and NVIDIA/nccl#2441 reports a 60% drop at
1 MB on AMD hosts with a library that calls itself 2.30.5, bisected to that very commit: so a version is
judged only when it is one of the releases read (the tables below), never by its place between them.

The workarounds the reports name: ``NCCL_GRAPH_FILE`` with a graph searched for the real bandwidth (dump
one with ``NCCL_GRAPH_DUMP_FILE``, raise the SYS links' speed, load it), and ``NCCL_MIN_NCHANNELS`` to keep
NCCL from cutting channels for the modelled 16 GB/s; both are measured with the benchmark before they
serve. Judged only with a PCIe Blackwell GPU (rules/pcie_blackwell.py), an AMD CPU and a known NCCL version.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.pcie_blackwell import pcie_blackwell_gpus
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import pci_gpus

_VERSION = re.compile(r"^\s*(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:[+-][0-9A-Za-z.+-]*)?\s*$")


SOURCES = ("https://github.com/NVIDIA/nccl/pull/2036", "https://github.com/NVIDIA/nccl/pull/2113",
           "https://github.com/NVIDIA/nccl/pull/2127", "https://github.com/NVIDIA/nccl/issues/2441")


def _version(text: Any) -> tuple[int, int, int] | None:
    match = _VERSION.match(text) if isinstance(text, str) else None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def _releases(*names: str) -> frozenset[tuple[int, int, int] | None]:
    return frozenset(_version(name) for name in names)


# Every release tag of NVIDIA/nccl up to v2.30.7-1, read one by one: those whose src/graph/topo.h defines
# AMD_BW 16.0 and whose topo.cc gives it to x86 AMD CPUs, and those that do not. A version in neither (a
# build between releases, a release after v2.30.7, a distribution's own) is not judged: unknown.
FIXED_AMD_BW = _releases(
    "2.16.2", "2.19.1", "2.19.3", "2.19.4", "2.20.3", "2.20.5", "2.21.5", "2.22.3", "2.23.4", "2.24.3", "2.25.1",
    "2.26.2", "2.26.3", "2.26.5", "2.26.6", "2.27.3", "2.27.5", "2.27.6", "2.27.7", "2.28.3", "2.28.7", "2.28.9",
    "2.29.2", "2.29.3", "2.29.7", "2.30.3", "2.30.4", "2.30.7")
NO_AMD_CASE = _releases(
    "2.3.7", "2.4.2", "2.4.6", "2.4.7", "2.4.8", "2.5.6", "2.5.7", "2.6.4", "2.7.3", "2.7.5", "2.7.6", "2.7.8",
    "2.8.3", "2.8.4", "2.9.6", "2.9.8", "2.9.9", "2.10.3", "2.11.4", "2.12.7", "2.12.10", "2.12.12", "2.13.4",
    "2.14.3", "2.15.1", "2.15.5", "2.16.5", "2.17.1", "2.18.1", "2.18.3", "2.18.5", "2.18.6")


def fixed_amd_bandwidth(version: Any) -> bool | None:
    """Whether this NCCL release models every AMD CPU link as 16 GB/s; None for a version not read."""
    parsed = _version(version)
    if parsed is None:
        return None
    if parsed in FIXED_AMD_BW:
        return True
    return False if parsed in NO_AMD_CASE else None


def nccl_versions(bench: dict[str, Any]) -> dict[str, str]:
    """Which NCCL -> its version, as the benchmark recorded them: the one that ran, torch's (what serves)."""
    nccl = bench.get("nccl") if isinstance(bench.get("nccl"), dict) else {}
    versions = nccl.get("versions") if isinstance(nccl.get("versions"), dict) else {}
    found = {"torch": versions.get("torch_nccl_version"), "ran": nccl.get("nccl_version")}
    return {which: version.strip() for which, version in found.items() if isinstance(version, str) and version.strip()}


def amd_topology_findings(facts: dict[str, Any], bench: dict[str, Any]) -> list[Finding]:
    """The finding for the merged report (report/render.py merge_bench): audit facts and benchmark together."""
    gpus = pcie_blackwell_gpus(facts)
    vendor = (facts.get("host_settings") or {}).get("cpu_vendor")
    versions = nccl_versions(bench or {})
    affected = {which: v for which, v in versions.items() if fixed_amd_bandwidth(v)}
    if not gpus or vendor != "amd" or not affected:
        return []
    read = [d["numa_node"] for d in pci_gpus(facts) if isinstance(d.get("numa_node"), int)]
    # sysfs says -1 where the platform gives no NUMA information: one node, as far as NCCL can tell too.
    nodes = sorted({node for node in read if node >= 0})
    if read and len(nodes) <= 1:
        return []  # one NUMA node: no CPU-to-CPU link on any GPU path, the constant is never used
    which = " and ".join(f"{v} ({'torch in the serving venv' if w == 'torch' else 'the benchmark run'})"
                         for w, v in sorted(affected.items()))
    spread = (f"the GPUs sit on NUMA nodes {', '.join(map(str, nodes))}" if nodes else
              "the GPUs' NUMA nodes were not read, so whether their paths cross a CPU link is unknown")
    return [make(
        "nccl_amd_inter_cpu_bandwidth",
        f"NCCL {which} models every AMD CPU-to-CPU link as 16 GB/s, and {spread}.",
        {"nccl_versions": affected, "cpu_vendor": vendor, "gpu_numa_nodes": nodes or None, "gpus": gpus,
         "sources": list(SOURCES)},
        severity="warning" if nodes else "info", sources=", ".join(SOURCES))]
