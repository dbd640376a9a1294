"""Rows of an ``nvidia-smi topo -m`` / ``topo -p2p`` matrix that a mail client hard-wrapped, joined again.

A mail client (or a terminal narrower than the matrix) breaks a long line at a space or a tab and carries the
rest onto the next line: ``GPU0  X  NS  NS  NS`` / ``NS  NS  NS  NS``. Wrapping never cuts inside a cell (it
breaks at whitespace), and every line of the matrix starts with a device name of the header (``GPU3``,
``NIC0``) or, for the header itself, with its empty first cell. So a line inside the matrix that starts with
no device name, and holds only cells a matrix prints, is the rest of the line above. The header's own
continuation holds only further column names (``GPU6  GPU7  CPU Affinity``).

The header's column count tells how many cells a row has: a ``topo -p2p`` row is joined only up to exactly
as many codes as the header names GPUs, and a continuation that would overshoot is left alone, so the parser
refuses the row with its own message rather than read cells in the wrong columns. ``topo -m`` rows end in
attribute values of varying count; the parser's row checks (nvidia_smi_topo.py) judge the joined row.

The break consumed one whitespace character; a tab-separated row gets a tab back, which keeps the empty cell
between ``NUMA Affinity`` and ``GPU NUMA ID`` where it was.
"""

from __future__ import annotations

import re

# A cell a matrix prints: link labels (X, PIX, NV18, SYS), P2P codes (OK, NS, CNS), attribute values (0-55,112-167,
# 0, N/A). Anything else on a line of its own is not the rest of a row.
_CELL_RE = re.compile(r"^(?:[A-Z][A-Z0-9#]{0,15}|N/A|\d{1,6}(?:[-,]\d{1,6})*)$")
_DEVICE_RE = re.compile(r"^(?:GPU|NIC)\d{1,4}$")
_DEVICE_START_RE = re.compile(r"^(?:GPU|NIC)\d")
# A device column of the header: GPUn, NICn, or an older driver's RDMA device (mlx5_0), never an upper-case link
# label, so that a row (which holds link labels) is never taken for the header's continuation.
_COLUMN_RE = re.compile(r"^(?:(?:GPU|NIC)\d{1,4}|[a-z][a-z0-9_.:-]*\d)$")
# Words of the header's attribute columns (CPU Affinity, NUMA Affinity, GPU NUMA ID).
_HEADER_WORDS = frozenset({"CPU", "Affinity", "NUMA", "GPU", "ID"})
_PHRASES = frozenset({"CPU Affinity", "NUMA Affinity", "GPU NUMA", "NUMA ID"})


def is_matrix_end(line: str) -> bool:
    """The blank line or the legend that ends a matrix's rows."""
    stripped = line.strip()
    return not stripped or stripped.startswith("Legend") or stripped.startswith("NIC Legend")


def rejoin_wrapped(lines: list[str], header_at: int, width_from_header: bool = False) -> tuple[list[str], list[str]]:
    """The lines with the header's and each row's wrapped continuation joined to them, and a note per join.
    ``width_from_header``: a row has exactly as many cells after its label as the header names GPUs (``topo
    -p2p``), which a join never exceeds; otherwise rows vary (``topo -m``'s attribute values)."""
    out, notes = _rejoin_header(list(lines), header_at)
    names = out[header_at].split()
    devices = [name for name in names if _COLUMN_RE.match(name)]
    width = sum(1 for name in names if name.startswith("GPU") and _DEVICE_RE.match(name)) if width_from_header \
        else None
    at = header_at + 1
    while at < len(out) and not is_matrix_end(out[at]):
        tokens = out[at].split()
        # A row whose label a lost tab glued to its first cell (NIC10PXB) starts with a device name all the same.
        if at > header_at + 1 and tokens and tokens[0] not in devices and not _DEVICE_START_RE.match(tokens[0]) \
                and all(_CELL_RE.match(t) for t in tokens):
            above = out[at - 1].split()
            if above and above[0] in devices and (width is None or len(above) - 1 + len(tokens) <= width):
                out[at - 1] = _join(out[at - 1], out.pop(at))
                notes.append(f"row {above[0]} was wrapped onto the next line ({' '.join(tokens)}): joined")
                continue
        at += 1
    return out, notes


def _rejoin_header(out: list[str], header_at: int) -> tuple[list[str], list[str]]:
    notes: list[str] = []
    names = out[header_at].split()
    while header_at + 1 < len(out):
        tokens = out[header_at + 1].split()
        repeated = tokens and tokens[0] in names and tokens[0] not in _HEADER_WORDS  # a row, or a second header
        if not tokens or repeated or not all(_COLUMN_RE.match(t) or t in _HEADER_WORDS for t in tokens):
            break
        out[header_at] = _join(out[header_at], out.pop(header_at + 1), header=True)
        names += tokens
        notes.append(f"the header was wrapped onto the next line ({' '.join(tokens)}): joined")
    return out, notes


def _join(first: str, rest: str, header: bool = False) -> str:
    """The two pieces with the whitespace the break consumed: a tab in a tab-separated matrix, else a space, and
    a space inside a column name of two words (``CPU`` / ``Affinity``), which a tab never separates."""
    separator = "\t" if "\t" in first or "\t" in rest else " "
    # The self cell is padded (" X "): a break inside its padding consumed a space, and the tab is still there.
    if (first.endswith("\t") and rest.startswith("X ")) or (first.endswith(" X") and rest.startswith("\t")):
        separator = " "
    if header and first.split() and rest.split() and f"{first.split()[-1]} {rest.split()[0]}" in _PHRASES:
        separator = " "
    return first.rstrip(" ") + separator + rest.lstrip(" ")
