"""Read the JSON events a benchmark harness printed, one object per line.

The harnesses (bench/collective_harness, bench/p2p_harness) print one JSON object per line on
stdout, each with an ``event`` key; the judges read them back from a run's stdout or from a log
kept earlier. Other lines (warnings, NCCL's own output, a traceback) are skipped, so the reader
never fails: a run whose events are missing is for the judge to report, since only the judge
knows which events it needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator


def harness_events(text: str) -> Iterator[dict]:
    """The JSON event objects a harness printed, one per line; any other line is skipped.

    A line counts when, stripped, it starts with ``{`` and decodes to a JSON object. A line
    nested too deeply for the decoder (RecursionError) is skipped like any undecodable line.
    """
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            yield event


# The P2P probe's records (bench/p2p_harness.py): a pair's proof and timing name its two GPUs; its first record
# lists the devices and its last one closes the run with the protocol it speaks.
_PAIR_EVENTS = frozenset({"proof", "timing"})


def looks_like_p2p_probe_log(text: str) -> bool:
    """Whether ``text`` holds the P2P probe's own JSON lines (gpu_p2p_probe's ``save_log``): at least one record
    of a GPU pair (``proof`` or ``timing`` with ``src`` and ``dst``) and the run's ``start`` record (with its
    ``devices``) or its ``summary`` (with ``protocol``). The other harnesses' events name no GPU pair, so
    they are not taken; a log cut before its summary still is, for its reader to say what it lacks."""
    pair = framed = False
    for event in harness_events(text):
        kind = event.get("event")
        if kind in _PAIR_EVENTS and "src" in event and "dst" in event:
            pair = True
        elif (kind == "start" and isinstance(event.get("devices"), list)) or (kind == "summary"
                                                                              and "protocol" in event):
            framed = True
        if pair and framed:
            return True
    return False
