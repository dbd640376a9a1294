"""Byte units and their display, shared by the benchmark judges. Pure."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


def human_bytes(size: int) -> str:
    """A size in the largest binary unit that divides it exactly: ``16 KiB``, ``1 GiB``, ``12 B``."""
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"
