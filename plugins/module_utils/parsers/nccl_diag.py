"""Parser for NCCL's diagnostics report: the ``NCCL DIAG`` lines that ``NCCL_RUN_DIAGNOSTICS=1`` prints.

From NCCL 2.31, NCCL checks at communicator start that every GPU pair it means to connect directly
can read and write the other's memory, and rank 0 prints a report on its standard output. The shape
read here is the one NCCL's documentation shows (docs.nvidia.com/deeplearning/nccl, user guide,
Troubleshooting > Diagnostics); it documents the summary lines, not the per-pair failure lines,
so those are kept exactly as printed:

* every line carries ``NCCL DIAG``, behind ``host:pid`` when NCCL adds it;
* result lines are tagged ``[OK]`` (no issue) or ``[INFO]`` (something to review: a failed
  verification, a check that could not complete), then ``check: message`` (``p2p``, ``net bw``);
* ``[OK] p2p: verified P2P access in both directions between every GPU pair (56 peer accesses)``;
* ``[INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification``;
* ``NCCL diagnostics completed in 245.3 ms across 8 ranks``.

Pure: text in, data out, no error raised for any text. Output schema: ``lines`` (every ``NCCL DIAG``
line, in order: ``tag`` "OK", "INFO" or None, ``check`` "p2p", "net bw" or None when the line is of
another shape, ``message`` (the text after the tag and check), ``raw`` (the line as printed, stripped)),
``p2p`` (None without a p2p line; else ``status`` "ok" (an [OK] p2p line), "failed" (fewer accesses
passed than were tested) or "flagged" (an [INFO] p2p line of another shape), ``passed`` and ``total``
(null when the line does not say)), ``completed`` ({ms, ranks} or None).
"""

from __future__ import annotations

import re
from typing import Any

_DIAG_RE = re.compile(r"NCCL DIAG(?:\s+(.*))?$")
_TAG_RE = re.compile(r"^\[(OK|INFO)\]\s*(.*)$")
# The checks NCCL 2.31 documents; any other name is kept in the message, not guessed at.
_CHECK_RE = re.compile(r"^(p2p|net bw):\s*(.*)$")
_P2P_OK_RE = re.compile(r"^verified P2P access in both directions between every GPU pair \((\d{1,9}) peer accesses\)")
_P2P_PARTIAL_RE = re.compile(r"^only (\d{1,9})/(\d{1,9}) GPU-to-GPU peer accesses passed verification")
_COMPLETED_RE = re.compile(r"^NCCL diagnostics completed in (\d{1,9}(?:\.\d{1,6})?) ms across (\d{1,9}) ranks?\b")


def parse_nccl_diag(text: str) -> dict[str, Any]:
    """The diagnostics report in ``text`` (a log with any other lines around it)."""
    lines: list[dict[str, Any]] = []
    p2p: dict[str, Any] | None = None
    completed: dict[str, Any] | None = None
    for raw in (text if isinstance(text, str) else "").splitlines():
        match = _DIAG_RE.search(raw)
        if not match:
            continue
        body = (match.group(1) or "").strip()
        tag = None
        tagged = _TAG_RE.match(body)
        if tagged:
            tag, body = tagged.group(1), tagged.group(2).strip()
        check = None
        named = _CHECK_RE.match(body) if tag else None
        if named:
            check, body = named.group(1), named.group(2).strip()
        lines.append({"tag": tag, "check": check, "message": body, "raw": raw.strip()})
        if check == "p2p":
            p2p = _p2p(tag, body, p2p)
        elif tag is None:
            done = _COMPLETED_RE.match(body)
            if done and completed is None:
                completed = {"ms": float(done.group(1)), "ranks": int(done.group(2))}
    return {"lines": lines, "p2p": p2p, "completed": completed}


def _p2p(tag: str | None, message: str, seen: dict[str, Any] | None) -> dict[str, Any] | None:
    """The P2P summary so far, updated with one p2p line; the worst status wins."""
    ok = _P2P_OK_RE.match(message)
    partial = _P2P_PARTIAL_RE.match(message)
    if tag == "OK":
        found = {"status": "ok", "passed": int(ok.group(1)) if ok else None, "total": int(ok.group(1)) if ok else None}
    elif partial and int(partial.group(1)) < int(partial.group(2)):
        found = {"status": "failed", "passed": int(partial.group(1)), "total": int(partial.group(2))}
    else:
        found = {"status": "flagged", "passed": None, "total": None}
    if seen is None:
        return found
    rank = {"ok": 0, "flagged": 1, "failed": 2}
    if rank[found["status"]] > rank[seen["status"]]:
        return found
    if found["status"] == seen["status"] and seen["passed"] is None:
        return found
    return seen
