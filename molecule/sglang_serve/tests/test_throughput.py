"""The throughput the role measured of v1 in service and wrote into the host's report on the controller:
the stand-in runs 20 ms per decode step with 4 decode slots (vars/v1.yml), the role measures 3 single
streams and 8 at once (molecule.yml), and side_effect judged it last against a minimum of 1000 tok/s."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DELAY = 0.02
SLOTS = 4
CONCURRENCY = 8
TOKENS = 32
# time.sleep never returns early, so the stand-in is never faster than its pacing; the client's clock sees
# chunk arrivals whose jitter over 31 intervals is a few ms (5% above). Each token also costs a JSON dump,
# a socket write and thread switches inside a container on a shared CI machine, a few ms next to 20 ms
# (35% below). Both bounds still fail a stand-in that ignores its pacing or its slots by a factor of 2.
ABOVE = 1.05
BELOW = 0.65


@pytest.fixture(scope="module")
def report() -> dict:
    path = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "reports" / "sglang-serve-serving.json"
    assert path.is_file(), f"the role wrote no host report at {path}"
    return json.loads(path.read_text())


def test_single_stream_follows_the_pacing(report: dict) -> None:
    single = report["single_stream"]
    assert report["ok"] and report["tool"] == "client", report
    assert BELOW / DELAY <= single["decode_tok_s"] <= ABOVE / DELAY, single
    # The first token comes after one decode step (the prefill): at least the delay, not many of them.
    assert DELAY * 1000 <= single["ttft_ms"] <= 6 * DELAY * 1000, single
    assert single["requests"] == 3 and single["output_tokens"] == 3 * TOKENS


def test_aggregate_is_held_by_the_decode_slots(report: dict) -> None:
    aggregate = report["aggregate"]
    assert aggregate["concurrency"] == CONCURRENCY and aggregate["output_tokens"] == CONCURRENCY * TOKENS
    # 8 streams over 4 slots: SLOTS/DELAY (200 tok/s), not CONCURRENCY/DELAY (400).
    assert BELOW * SLOTS / DELAY <= aggregate["tok_s"] <= ABOVE * SLOTS / DELAY, aggregate


def test_breakdown_sets_the_time_per_token_against_the_ceiling(report: dict) -> None:
    parts = report["breakdown"]
    assert parts["measured_ms_per_token"] == pytest.approx(1000 / report["single_stream"]["decode_tok_s"])
    if parts["communication_ceiling_ms_per_token"] is None:
        assert parts["comm_share"] is None
        assert "communication ceiling unknown" in report["summary"]
    else:
        assert parts["comm_share"] == pytest.approx(
            min(1.0, parts["communication_ceiling_ms_per_token"] / parts["measured_ms_per_token"]))
        assert "communication ceiling" in report["summary"] and "% of it" in report["summary"]
    assert parts["reference_decode_tok_s"] is None and "no reference figure" in report["summary"]


def test_the_minimum_made_a_finding(report: dict) -> None:
    assert report["min_decode_tok_s"] == 1000 and report["slow"]
    assert [f["id"] for f in report["findings"]] == ["serving_decode_slow"]
    assert report["host"] == "sglang-serve" and report["service"] == "sglang-glm-5-nvfp4"
