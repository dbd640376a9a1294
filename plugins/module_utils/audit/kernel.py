"""The running kernel: its release and its command line, as the audit's drift check compares them.

Both are read as they are; a source that lacks one (material, a capture made before the audit
read it) leaves it null, never a value made up from elsewhere (the BOOT_IMAGE word names a file, not
the kernel that runs).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source

RELEASE_FILE = "/proc/sys/kernel/osrelease"
CMDLINE_FILE = "/proc/cmdline"


def gather_kernel(source: Source) -> dict[str, Any]:
    return {"release": source.read_value(RELEASE_FILE), "cmdline": source.read_value(CMDLINE_FILE)}
