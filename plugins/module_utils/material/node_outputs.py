"""A Proxmox node's own outputs in a guest's material: a kernel log or command line of a Proxmox kernel, or
pveversion's output, given with a guest's nvidia-smi output and its VM's config, is the node's, not the guest's (a
guest runs its own distribution's kernel, and only a node has pveversion). Judged with the guest, it would make one
host of two (pveversion would make the guest a node): material/capture.py sets it apart, lists it as not used with
why, names it in the material's ``node_outputs`` and warns that the material holds two hosts
(report/scope.py ``two_hosts``, the sentence the report's first screen shows too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pveversion import looks_like_pveversion

# A Proxmox node's own kernel: "Linux version 6.8.12-5-pve" (dmesg), "vmlinuz-6.8.12-5-pve" (/proc/cmdline),
# "(running kernel: 6.8.12-5-pve)" (pveversion).
_PVE_KERNEL_RE = re.compile(r"(?:Linux version |vmlinuz-|running kernel: )(\d[\w.+~-]{0,60}-pve)\b")


def guest_with_its_vm(inputs: Iterable[dict[str, Any]]) -> bool:
    """The material (its inputs, as material/capture.py lists them) holds a VM config and a guest's nvidia-smi
    output: the guest and the VM it runs in."""
    kinds = {entry["kind"] for entry in inputs if entry["as"]}
    gpu_kinds = {kind for kind in kinds if kind and kind.startswith("nvidia-smi")} | ({"nvidia-bug-report"} & kinds)
    return "proxmox-vm-config" in kinds and bool(gpu_kinds)


def set_node_outputs_apart(built: Any, entries: Iterable[tuple[str, str]]) -> None:
    """Of the capture being built (material/capture.py ``_Built``), the ``entries`` ((section, key): the kernel log,
    the command line, pveversion's output) that show a Proxmox kernel or pveversion, where the rest is a guest's with
    its VM's config: removed, each input that gave one listed as not used with why and named in
    ``built.node_outputs``."""
    if not guest_with_its_vm(built.inputs):
        return
    for section, key in entries:
        store: dict[str, Any] = getattr(built, section)
        value = store.get(key)
        text = value.get("stdout") if isinstance(value, dict) else value
        sign = _node_sign(text) if isinstance(text, str) else None
        if sign is None:
            continue
        store.pop(key)
        label = f"{section}:{key}"
        for origin in built.sources.pop(label, []):
            built.skip(origin, f"a Proxmox node's own output ({sign}), while the rest of the material "
                               "is a guest's with its VM's config: two hosts; it is not judged as the guest's. Give "
                               "the node's material as an input of its own")
        for entry in built.inputs:
            if label in entry["as"]:
                entry["as"].remove(label)
                built.node_outputs.append(entry["name"])


def _node_sign(text: str) -> str | None:
    """What shows the output is a Proxmox node's: pveversion's own lines, a -pve kernel; None for neither."""
    kernel = _PVE_KERNEL_RE.search(text)
    signs = ["pveversion"] if looks_like_pveversion(text) else []
    signs += [f"kernel {kernel.group(1)}"] if kernel else []
    return ", ".join(signs) or None
