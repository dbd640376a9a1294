"""An SVG heatmap of a host's GPU pairs by P2P state: one glance tells "no pair can peer" from "two islands".

Drawn from the host's judged record: the matrix the P2P verdict was judged from (rules/p2p_evidence.py, the same
judgement the rule and the summary read) and, where the benchmark's P2P probe ran, its proof of each direction
(a write checked at the destination), which outranks what the driver grants:

- ``proven``: the probe wrote into peer memory and every value arrived;
- ``wrong data``: peer access was granted, but values arrived wrong or as zeros (a private mirror);
- ``granted``: the driver grants peer access (OK), no probe proved it;
- ``refused``: the driver (or the probe) says no peer access;
- ``unknown``: the cell proves nothing either way, or was not read.

Rows are the source GPU, columns the destination, by NVML index; each cell is a ``rect`` of class ``cell``
with ``data-state`` and the label the tool printed, so that a browser test can read what is drawn.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.plot import escape
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import NCCL_LOG, p2p_evidence

STATES = {  # state: (fill, what the legend says)
    "proven": ("#1a7f37", "proven: written and checked at the peer"),
    "granted": ("#8fd19e", "granted by the driver, not proven"),
    "wrong data": ("#8250df", "granted, but data arrived wrong"),
    "refused": ("#d73a49", "no peer access"),
    "unknown": ("#d0d7de", "not known"),
}
_FROM_EVIDENCE = {"ok": "granted", "none": "refused", "unknown": "unknown"}
CELL, LEFT, TOP, LEGEND_W = 34, 60, 70, 300


def _proof_state(cell: Any) -> str | None:
    """What the probe proved of one direction; None where it says nothing."""
    if not isinstance(cell, dict) or not isinstance(cell.get("peer_access"), bool):
        return None
    if not cell["peer_access"]:
        return "refused"
    wrong = [cell.get(key) for key in ("ce_wrong", "sm_wrong", "zeros_at_destination")]
    if any(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in wrong):
        return "wrong data"
    return "proven" if all(isinstance(n, int) for n in wrong) else None


def pair_states(facts: dict[str, Any]) -> tuple[str, list[list[tuple[str, str]]]] | None:
    """(what the matrix is, rows of (state, label) per cell; the diagonal ("self", "X")); None without a
    matrix."""
    decided = p2p_evidence(facts)
    if decided is None:
        return None
    probe = (facts.get("bench") or {}).get("probe") if isinstance(facts.get("bench"), dict) else None
    proof = probe.get("proof") if isinstance(probe, dict) and isinstance(probe.get("proof"), list) else []
    size = max(len(decided.matrix), len(proof))
    rows = []
    for i in range(size):
        row = decided.matrix[i] if i < len(decided.matrix) and isinstance(decided.matrix[i], list) else []
        proved = proof[i] if i < len(proof) and isinstance(proof[i], list) else []
        cells = []
        for j in range(size):
            label = row[j] if j < len(row) and isinstance(row[j], str) else None
            if i == j:
                cells.append(("self", "X"))
                continue
            state = _proof_state(proved[j] if j < len(proved) else None)
            if state is None:
                state = _FROM_EVIDENCE[decided.state(label)] if label is not None else "unknown"
            cells.append((state, label or "?"))
        rows.append(cells)
    source = "transports the NCCL INFO log shows" if decided.capability == NCCL_LOG else f"{decided.capability} matrix"
    what = source + (", the probe's proof over it" if proof else "")
    return what, rows


def headline(rows: list[list[tuple[str, str]]]) -> str:
    """One line a person reads first: how many directions can peer, of how many."""
    states = Counter(state for row in rows for state, _label in row if state != "self")
    total = sum(states.values())
    can = states["proven"] + states["granted"]
    if total == 0:
        return "one GPU: no pairs"
    if can == 0:
        return f"no GPU pair can peer ({total} directions)"
    if can == total:
        return f"every GPU pair can peer ({total} directions)"
    return f"{can} of {total} directions can peer"


def p2p_heatmap(host: str, facts: dict[str, Any]) -> str | None:
    """The heatmap of a host's judged record; None without a P2P matrix."""
    found = pair_states(facts)
    if found is None:
        return None
    what, rows = found
    n = len(rows)
    counts = Counter(state for row in rows for state, _label in row if state != "self")
    width = max(LEFT + n * CELL + 30 + LEGEND_W, 520)
    height = max(TOP + n * CELL + 30, TOP + 24 * len(STATES) + 30)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="20" font-size="14">{escape(host)}: GPU peer-to-peer, {escape(headline(rows))}</text>',
           f'<text x="10" y="38" font-size="11" fill="#555">from the {escape(what)}; row: from, column: to</text>']
    for j in range(n):
        out.append(f'<text x="{LEFT + j * CELL + CELL / 2}" y="{TOP - 6}" text-anchor="middle" font-size="10">'
                   f"GPU{j}</text>")
    for i, row in enumerate(rows):
        y = TOP + i * CELL
        out.append(f'<text x="{LEFT - 6}" y="{y + CELL / 2 + 4}" text-anchor="end" font-size="10">GPU{i}</text>')
        for j, (state, label) in enumerate(row):
            x = LEFT + j * CELL
            fill = "#ffffff" if state == "self" else STATES[state][0]
            dark = state in ("proven", "refused", "wrong data")
            out += [f'<rect class="cell" data-state="{state}" data-from="{i}" data-to="{j}" x="{x}" y="{y}" '
                    f'width="{CELL - 2}" height="{CELL - 2}" fill="{fill}" stroke="#999" stroke-width="0.5">'
                    f"<title>GPU{i} to GPU{j}: {escape(label)} ({state})</title></rect>",
                    f'<text x="{x + CELL / 2 - 1}" y="{y + CELL / 2 + 3}" text-anchor="middle" font-size="9" '
                    f'fill="{"#fff" if dark else "#222"}">{escape(label)[:4]}</text>']
    legend_x = LEFT + n * CELL + 30
    for k, (state, (fill, says)) in enumerate(STATES.items()):
        y = TOP + 24 * k
        out += [f'<rect x="{legend_x}" y="{y}" width="16" height="16" fill="{fill}" stroke="#999"/>',
                f'<text class="legend" x="{legend_x + 22}" y="{y + 12}">{escape(says)}: {counts[state]}</text>']
    return "\n".join([*out, "</svg>"]) + "\n"
