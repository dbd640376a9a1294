"""The P2P status matrices of a host's Markdown report: the read matrix first, identical ones folded.

The summary's P2P verdict and the rules read the read matrix, so it comes first; then write, nvlink,
atomics and pci (nvidia-smi's "prop"), the order nvidia-smi topo -p2p lists them in. Most hosts give five
identical matrices: each is shown once, with a line naming the others that are identical to it.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_capability import NOT_STATED
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import matrix_table

P2P_ORDER = ("read", "write", "nvlink", "atomics", "pci")


def _ordered(p2p: dict[str, Any]) -> list[tuple[str, list[list[Any]]]]:
    """The non-empty matrices, in P2P_ORDER; any other name (a newer audit's) after them, by name."""
    names = [n for n in P2P_ORDER if n in p2p] + sorted(n for n in p2p if n not in P2P_ORDER)
    return [(name, p2p[name]) for name in names if isinstance(p2p[name], list) and p2p[name]]


def matrix_title(name: str) -> str:
    """``P2P read matrix``; a pasted matrix of no stated capability says so (rules/p2p_evidence.py)."""
    if name == NOT_STATED:
        return "P2P matrix (capability not stated in the material)"
    return f"P2P {name} matrix"


def _spoken(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def p2p_sections(p2p: Any, picture: str | None = None) -> list[str]:
    """One "## P2P <name> matrix" section per distinct matrix; rows and columns are NVML indexes. ``picture``
    (the heatmap's image link) goes under the first heading, before the text matrices."""
    if not isinstance(p2p, dict):
        return []
    shown: list[tuple[str, list[list[Any]], list[str]]] = []
    for name, matrix in _ordered(p2p):
        same = next((entry for entry in shown if entry[1] == matrix), None)
        if same is None:
            shown.append((name, matrix, []))
        else:
            same[2].append(name)
    out: list[str] = []
    for name, matrix, identical in shown:
        # "-" marks pairs with a GPU NVML could not open.
        drawn = [picture, ""] if picture and not out else []
        out += [f"## {matrix_title(name)}", "", *drawn, *matrix_table([f"GPU{i}" for i in range(len(matrix))], matrix)]
        if identical:
            out += [f"The {_spoken(identical)} {'matrix is' if len(identical) == 1 else 'matrices are'} identical "
                    f"to {name}.", ""]
    return out
