"""A Proxmox node's own outputs in a guest's material: a kernel log or command line of a Proxmox kernel, given with
a guest's nvidia-smi output and its VM's config, is the node's, not the guest's (a guest runs its own distribution's
kernel). Judged with the guest, it would make one host of two: material/capture.py sets it apart, lists it as not
used with why, and warns that the material holds two hosts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# A Proxmox node's own kernel: "Linux version 6.8.12-5-pve" (dmesg), "vmlinuz-6.8.12-5-pve" (/proc/cmdline).
_PVE_KERNEL_RE = re.compile(r"(?:Linux version |vmlinuz-)(\d[\w.+~-]{0,60}-pve)\b")

TWO_HOSTS = ("the material holds two hosts: a Proxmox node's own outputs (a -pve kernel; listed as not used) and a "
             "guest's with its VM's config; only the guest is judged here, the node needs an input of its own")


def guest_with_its_vm(inputs: Iterable[dict[str, Any]]) -> bool:
    """The material (its inputs, as material/capture.py lists them) holds a VM config and a guest's nvidia-smi
    output: the guest and the VM it runs in."""
    kinds = {entry["kind"] for entry in inputs if entry["as"]}
    gpu_kinds = {kind for kind in kinds if kind and kind.startswith("nvidia-smi")} | ({"nvidia-bug-report"} & kinds)
    return "proxmox-vm-config" in kinds and bool(gpu_kinds)


def set_node_outputs_apart(built: Any, entries: Iterable[tuple[str, str]]) -> None:
    """Of the capture being built (material/capture.py ``_Built``), the ``entries`` ((section, key): the kernel log,
    the command line) that show a Proxmox kernel, where the rest is a guest's with its VM's config: removed, each
    input that gave one listed as not used with why and named in ``built.node_outputs``."""
    if not guest_with_its_vm(built.inputs):
        return
    for section, key in entries:
        store: dict[str, Any] = getattr(built, section)
        value = store.get(key)
        text = value.get("stdout") if isinstance(value, dict) else value
        match = _PVE_KERNEL_RE.search(text) if isinstance(text, str) else None
        if match is None:
            continue
        store.pop(key)
        label = f"{section}:{key}"
        for origin in built.sources.pop(label, []):
            built.skip(origin, f"a Proxmox node's own output (kernel {match.group(1)}), while the rest of the material "
                               "is a guest's with its VM's config: two hosts; it is not judged as the guest's. Give "
                               "the node's material as an input of its own")
        for entry in built.inputs:
            if label in entry["as"]:
                entry["as"].remove(label)
                built.node_outputs.append(entry["name"])
