"""Whether the host is a Proxmox VE node, told by its own tool or kernel, never by a directory alone.

Apart from ``proxmox.py`` so that the audit of any other host, nearly every
one, loads none of the Proxmox code: modules reach a host as source, and the
host compiles every file it imports on every run.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import PVEVERSION
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source

# parsers/proxmox_config.py's QEMU_SERVER_DIR; a test keeps the two equal.
QEMU_SERVER_DIR = "/etc/pve/qemu-server"


def has_vm_configs(source: Source) -> bool:
    """Whether the host (or the material) holds a qemu-server directory: VM configs to read, not yet a node."""
    return source.listdir(QEMU_SERVER_DIR) is not None


def node_evidence(source: Source, kernel: dict[str, Any] | None = None) -> str | None:
    """What says this host is a Proxmox VE node, or None. Only the node's own tools say so: ``pveversion`` answering
    (pve-manager is installed) or a Proxmox kernel running (``6.8.12-5-pve``). A qemu-server directory alone does
    not: a config copied to another machine, or pasted into material beside a guest's outputs, is no node."""
    if not has_vm_configs(source):
        return None
    # Imported only here, past the directory check: nearly every audited host has no qemu-server directory.
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pveversion import looks_like_pveversion

    version = source.run(PVEVERSION.argv)
    if version.ok and looks_like_pveversion(version.stdout or ""):
        return "pveversion"
    release = str((kernel or {}).get("release") or "")
    if release.endswith("-pve"):
        return f"kernel {release}"
    return None
