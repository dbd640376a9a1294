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
