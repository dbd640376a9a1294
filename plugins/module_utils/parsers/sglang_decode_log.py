"""SGLang's server log: the decode rate its scheduler reports, the rate a user sees.

The scheduler logs one line per decode interval (``python/sglang/srt/managers/scheduler_metrics_mixin.py``,
``log_decode_stats``; tests/fixtures/sglang/SOURCES.md), in two spellings over the releases:

* ``[2025-02-27 04:46:39 TP0] Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, gen throughput
  (token/s): 186.64, #queue-req: 0`` (to early 2025; some with ``largest-len`` or a trailing comma);
* ``[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True,
  gen throughput (token/s): 144.95, #queue-req: 0`` (later; speculative decoding adds ``accept len``).

``gen throughput`` is the tokens all running requests generated per second over the interval, so only lines with
one running request tell the single-stream rate: a batched line says nothing of one stream's time per token, and
is never read as one.

``parse_decode_log(text)`` returns a ``DecodeRates``: ``single_stream_tok_s`` (the median of the one-request
lines; None without any), ``single_stream_lines``, ``busiest_running`` and ``busiest_tok_s`` (the most requests
running on one line and the median rate over the lines with that many), ``lines`` (every decode line read). A
pure, best-effort reader: it never raises, and text with no decode line gives ``lines == 0``.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import normalize_paste

# Started by its literal words, so a search tries only where a decode line is; the fields between are bounded.
DECODE_LINE_RE = re.compile(r"Decode batch[.,] #running-req: (\d{1,7}),[^\n]{0,400}? gen throughput \(token/s\): "
                            r"(\d{1,9}(?:\.\d{1,6})?)")


@dataclass(frozen=True)
class DecodeRates:
    single_stream_tok_s: float | None
    single_stream_lines: int
    busiest_running: int | None
    busiest_tok_s: float | None
    lines: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_decode_log(text: Any) -> DecodeRates:
    if not isinstance(text, str):
        return DecodeRates(None, 0, None, None, 0)
    by_running: dict[int, list[float]] = {}
    for match in DECODE_LINE_RE.finditer(normalize_paste(text)):
        running, rate = int(match.group(1)), float(match.group(2))
        if running > 0:
            by_running.setdefault(running, []).append(rate)
    if not by_running:
        return DecodeRates(None, 0, None, None, 0)
    single = by_running.get(1) or []
    busiest = max(by_running)
    return DecodeRates(
        single_stream_tok_s=round(statistics.median(single), 2) if single else None,
        single_stream_lines=len(single),
        busiest_running=busiest,
        busiest_tok_s=round(statistics.median(by_running[busiest]), 2),
        lines=sum(len(rates) for rates in by_running.values()))
