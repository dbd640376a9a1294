"""Which command a pasted ``nvidia-smi topo -p2p`` matrix is filed under in a capture (material/capture.py).

The matrix does not say its capability (parsers/p2p_capability.py), so the hint decides: the command line
pasted with it, else the file name, else none, and the matrix goes under ``nvidia-smi topo -p2p`` (a command
nvidia-smi refuses, so no live audit records it), which the audit reads as a matrix of a capability not
stated. A matrix of several capabilities (``topo -p2p rw``) keeps its own command.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import TOPO_P2P, TOPO_P2P_MATERIAL, Command
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import p2p_capability


def p2p_command(command: str | None, name: str, command_from: str = "command line") \
        -> tuple[Command | None, dict[str, Any] | str]:
    """(the command to file the matrix under, ``{letters, from}``), or (None, why not) when its command line
    names no capability nvidia-smi takes. ``command_from`` is what gave the command: a "command line" pasted
    with the matrix, or a "heading" of a paste of several outputs that names it."""
    letters, told_by = p2p_capability.from_command(command), command_from
    if letters is None and command and command.startswith("nvidia-smi topo"):
        return None, (f"an nvidia-smi topo -p2p matrix pasted with the command '{command}', whose capability is none "
                      "of r, w, n, a, p (or a combination of them): paste the command that printed it")
    if letters is None:
        letters, told_by = p2p_capability.from_name(name), "file name"
    if letters is None:
        told_by = "not stated"
    return TOPO_P2P.get(letters or "") or TOPO_P2P_MATERIAL[letters or ""], {"letters": letters, "from": told_by}
