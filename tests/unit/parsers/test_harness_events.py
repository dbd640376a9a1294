"""The reader of the benchmark harnesses' JSON lines: events come back in order, anything else is skipped.

The reader never raises for text input: a line that is not a JSON object (a warning, NCCL's
own output, a cut-off line, JSON nested past the decoder's depth) is skipped, and which events
are missing is for the judges to say.
"""

from __future__ import annotations

import json

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.harness_events import harness_events
from hypothesis import given
from hypothesis import strategies as st

# JSON values that survive a round trip unchanged (no NaN, which is not equal to itself).
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
EVENTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5)
# One line of noise: no line break of any kind (str.splitlines also breaks at \x1c-\x1e, \x85,
# \u2028, \u2029), and not the start of a JSON object.
NOISE = st.text(st.characters(blacklist_categories=("Cc", "Zl", "Zp")), max_size=40).filter(
    lambda line: not line.strip().startswith("{"))


def test_events_among_other_output():
    text = "\n".join([
        "W0101 12:00:00 warning from torch",
        '{"event": "start", "devices": [{"index": 0}]}',
        "host:123:123 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC",
        '   {"event": "result", "size_bytes": 8}   ',
        '{"event": "cut off',
        "[1, 2, 3]",
        '{"event": "summary", "status": "ok"}',
    ])
    assert [e["event"] for e in harness_events(text)] == ["start", "result", "summary"]


def test_nothing_to_read():
    assert list(harness_events("")) == []
    assert list(harness_events("Segmentation fault (core dumped)\n")) == []


def test_a_line_nested_past_the_decoders_depth_is_skipped():
    deep = '{"event": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert list(harness_events(deep + '\n{"event": "summary"}')) == [{"event": "summary"}]


@given(st.text(max_size=400))
def test_any_text_gives_only_dicts(text):
    # Never raises for text input; whatever comes back is a JSON object.
    assert all(isinstance(event, dict) for event in harness_events(text))


@given(st.lists(st.one_of(EVENTS.map(lambda e: ("event", e)), NOISE.map(lambda n: ("noise", n))), max_size=12))
def test_every_event_printed_comes_back_in_order(lines):
    text = "\n".join(json.dumps(value) if kind == "event" else value for kind, value in lines)
    assert list(harness_events(text)) == [value for kind, value in lines if kind == "event"]
