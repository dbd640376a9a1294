"""A ``LiveSource`` that reads sysfs from another directory: a test's fake tree, or a copy of a host's.

What moves is what the passthrough plan reads of the kernel: ``/sys``, ``/proc/cmdline`` and
``/proc/cpuinfo``; the rest of ``/proc`` and every other path stay the running system's. Paths come
back as the host would show them (``realpath`` drops the root), so the readers cannot tell the
difference.
"""

from __future__ import annotations

import os

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource

MOVED_TREES = ("/sys",)
MOVED_FILES = ("/proc/cmdline", "/proc/cpuinfo")


class RootedSource(LiveSource):
    def __init__(self, root: str = "/", **kwargs) -> None:
        super().__init__(**kwargs)
        self.root = os.path.abspath(root)

    def _moved(self, path: str) -> str:
        moved = path in MOVED_FILES or any(path == tree or path.startswith(tree + "/") for tree in MOVED_TREES)
        return self.root + path if moved and self.root != "/" else path

    def read_bytes(self, path: str) -> bytes | None:
        return super().read_bytes(self._moved(path))

    def listdir(self, path: str) -> list[str] | None:
        return super().listdir(self._moved(path))

    def readlink(self, path: str) -> str | None:
        return super().readlink(self._moved(path))

    def realpath(self, path: str) -> str | None:
        resolved = super().realpath(self._moved(path))
        if resolved is None or self.root == "/" or not resolved.startswith(self.root + "/"):
            return resolved
        return resolved[len(self.root):]
