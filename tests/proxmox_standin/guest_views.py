#!/usr/bin/env python3
"""Write the guest views the `qm` stand-in shows its guest (see QM_STANDIN_GUEST_VIEWS in ./qm).

Usage: guest_views.py DEST. Each view is a directory of the files the guest's audit and benchmark
replay: `capture.json` (gpu_audit_capture), `probe.jsonl` (gpu_bench_probe_log) and, where one was
measured, `nccl.txt` (gpu_bench_nccl_log). All come from the repository's captures and fixtures, the
incident's 8x RTX PRO 6000 throughout:

- p2p-ns: the incident guest as captured (P2P NS for every pair), its probe log (no peer access) and
  its all-reduce log.
- p2p-ok: the same guest once its VM gives every GPU the clique: the capture with the P2P read, write
  and PCI statuses OK for every pair (what the bare-metal capture of the same GPUs reports; NVLink and
  atomics stay NS), and the bare-metal probe log of the same GPUs (peer access granted, every write
  arrived). No all-reduce log: none was measured for these GPUs with P2P, so the report says so.
- p2p-data-wrong: p2p-ok with one peer write that did not arrive (the probe's data check fails).
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "captures" / "proxmox-q35-guest-8xRTXPRO6000-p2p-NS.json"
PROBE_NS = ROOT / "tests" / "fixtures" / "p2p" / "p2p-probe_8xRTXPRO6000-vm-no-p2p_constructed.jsonl"
PROBE_OK = ROOT / "tests" / "fixtures" / "p2p" / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl"
NCCL_NS = (ROOT / "tests" / "fixtures" / "nccl"
           / "transfer-test-in-all_reduce_perf-layout_incident-reconstructed_8xRTXPRO6000-vm-no-p2p.txt")
# NVML's P2P capabilities that the clique turns on between PCIe GPUs; 0 is NVML_P2P_STATUS_OK.
GRANTED = ("read", "write", "pci")


def with_p2p(capture: dict) -> dict:
    granted = copy.deepcopy(capture)
    p2p = granted["nvml"]["p2p"]
    for key in GRANTED:
        p2p[key] = [[None if i == j else 0 for j in range(len(row))] for i, row in enumerate(p2p[key])]
    granted["note"] = (capture["note"] + " Derived by tests/proxmox_standin/guest_views.py: the P2P read, write and "
                       "PCI statuses OK for every pair, as the guest driver reports them once the VM gives every GPU "
                       "its x-nv-gpudirect-clique; nothing else changed.")
    return granted


def with_wrong_write(probe_log: str) -> str:
    """The log with the first granted peer write's data not arriving (every element wrong, by both engines)."""
    lines, done = [], False
    for line in probe_log.splitlines():
        event = json.loads(line) if line.strip() else None
        if not done and event and event.get("event") == "proof" and event.get("peer_access"):
            event.update(ce_wrong=event["elements"], sm_wrong=event["elements"], zeros_at_destination=event["elements"])
            line, done = json.dumps(event), True
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_views(dest: Path) -> None:
    capture = json.loads(CAPTURE.read_text(encoding="utf-8"))
    views = {
        "p2p-ns": {"capture.json": json.dumps(capture), "probe.jsonl": PROBE_NS.read_text(encoding="utf-8"),
                   "nccl.txt": NCCL_NS.read_text(encoding="utf-8")},
        "p2p-ok": {"capture.json": json.dumps(with_p2p(capture)), "probe.jsonl": PROBE_OK.read_text(encoding="utf-8")},
        "p2p-data-wrong": {"capture.json": json.dumps(with_p2p(capture)),
                           "probe.jsonl": with_wrong_write(PROBE_OK.read_text(encoding="utf-8"))},
    }
    for name, files in views.items():
        directory = dest / name
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        for file_name, text in files.items():
            (directory / file_name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: guest_views.py DEST (a directory; its p2p-ns, p2p-ok and p2p-data-wrong are replaced)")
    write_views(Path(sys.argv[1]))
