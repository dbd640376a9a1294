"""The P2P probe's own saved log told from its records: whole, cut before its summary, behind other output;
the collective harness's records (no GPU pair) and lone pair records are not it; no text makes it raise."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import detect_kind
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.harness_events import looks_like_p2p_probe_log
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

PROBE_LOGS = sorted((FIXTURES / "p2p").glob("p2p-probe_*.jsonl"))
PAIR = {"event": "proof", "src": 0, "dst": 1, "peer_access": False, "elements": 16, "ce_wrong": 0, "sm_wrong": 0}
START = {"event": "start", "torch_version": "2.9.1", "devices": [{"index": 0, "name": "GPU"}]}
SUMMARY = {"event": "summary", "protocol": 1, "status": "ok"}


def lines(*events: dict) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


@pytest.mark.parametrize("path", PROBE_LOGS, ids=[p.name for p in PROBE_LOGS])
def test_every_saved_probe_log_is_its_kind_whole_and_cut_before_its_summary(path) -> None:
    text = path.read_text(encoding="utf-8")
    assert detect_kind(text) == "gpu-p2p-probe-log"
    # Cut before its summary: still the probe's records, for its reader to say what the run lacks.
    assert detect_kind("\n".join(text.splitlines()[:-2])) == "gpu-p2p-probe-log"


@pytest.mark.parametrize(("text", "expected"), [
    (lines(START, PAIR), True),
    (lines(PAIR, SUMMARY), True),
    ("UserWarning: something\n" + lines(START, PAIR) + "Traceback (most recent call last):\n", True),
    # A pair record alone, or framing records alone: no run of the probe shown.
    (lines(PAIR), False),
    (lines(START, SUMMARY), False),
    # The collective harness: a start and a summary too, but results of a collective, never of a GPU pair.
    (lines({"event": "start", "backend": "nccl", "nranks": 2},
           {"event": "result", "collective": "all_reduce", "size_bytes": 8, "count": 2},
           {"event": "summary", "protocol": 1, "status": "ok"}), False),
    # A proof record that names no pair.
    (lines(START, {"event": "proof", "peer_access": True}), False),
])
def test_probe_records_told_from_others(text, expected) -> None:
    assert looks_like_p2p_probe_log(text) is expected
    assert (detect_kind(text) == "gpu-p2p-probe-log") is expected


@given(st.text(max_size=400))
def test_any_text_gives_a_yes_or_no(text) -> None:
    assert looks_like_p2p_probe_log(text) in (True, False)
