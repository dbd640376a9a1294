"""Report names for material: one per input, taken from its file or directory name.

An analysed input has no inventory name, so its report is named after what the engineer gave: the capture
``gpu-node-1.json`` reports as ``gpu-node-1``, the directory ``incident-42/`` as ``incident-42``, the bug
report ``nvidia-bug-report.log.gz`` as ``nvidia-bug-report``. Unlike an inventory name (which report_files
refuses rather than changes, since it must lead back to the inventory), a file name is only a label, so it
is made to pass report_files' rules: every run of characters other than letters, digits, ``.``, ``-`` and
``_`` becomes one ``-``; leading dots and dashes go (no hidden files); the result is cut to fit
``MAX_HOST_BYTES`` with room for a counter; an empty result, and a name the reports keep for themselves
(``fleet``), become ``input`` and ``fleet-input``. Inputs that come out with the same name (every bug
report is called ``nvidia-bug-report.log.gz``) get ``-2``, ``-3`` ... in the order given. A ``suffix`` (the
analysis's ``.analysis``, report/files_plan.py) ends every name, after the counter, within the length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import MAX_HOST_BYTES, host_name_problem

# Suffixes that say how the material was stored, not which host it is; the last one first (x.log.gz).
STORAGE_SUFFIXES = (".gz", ".json", ".jsonl", ".log", ".txt", ".out", ".csv", ".xml")
# Room left for "-<counter>" after a name cut to length.
COUNTER_ROOM = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def stem(path: str) -> str:
    """The last component of ``path`` (a trailing ``/`` ignored), without its storage suffixes."""
    name = path.rstrip("/").rpartition("/")[2]
    for suffix in STORAGE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[:-len(suffix)]
    return name


def safe_name(path: str, reserved: Iterable[str] = ("fleet",), room: int = 0) -> str:
    """A name report_files accepts, from the input's path, leaving ``room`` bytes more for a suffix."""
    name = _UNSAFE.sub("-", stem(path)).lstrip(".-")[:MAX_HOST_BYTES - COUNTER_ROOM - room] or "input"
    if name in set(reserved):
        name += "-input"
    return name


def report_names(paths: Iterable[str], reserved: Iterable[str] = ("fleet",), suffix: str = "") -> list[str]:
    """One distinct name per input, in order, each ending in ``suffix`` (safe characters only)."""
    reserved = tuple(reserved)
    taken: set[str] = set()
    names = []
    for path in paths:
        base = safe_name(path, reserved, len(suffix.encode("utf-8")))
        name, counter = base, 1
        while name in taken:
            counter += 1
            name = f"{base}-{counter}"
        taken.add(name)
        name += suffix
        # safe_name's output passes by construction; this keeps the two rules from drifting apart unnoticed.
        problem = host_name_problem(name, reserved)
        if problem:
            raise ValueError(f"report name {name!r} made from {path!r} is refused: {problem}")
        names.append(name)
    return names
