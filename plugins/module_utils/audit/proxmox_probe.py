"""Whether the host is a Proxmox VE node, told by one directory listing.

Apart from ``proxmox.py`` so that the audit of any other host, nearly every
one, loads none of the Proxmox code: modules reach a host as source, and the
host compiles every file it imports on every run.
"""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source

# parsers/proxmox_config.py's QEMU_SERVER_DIR; a test keeps the two equal.
QEMU_SERVER_DIR = "/etc/pve/qemu-server"


def is_proxmox_node(source: Source) -> bool:
    """A Proxmox VE node has the cluster file system's qemu-server directory (even with no VM yet)."""
    return source.listdir(QEMU_SERVER_DIR) is not None
