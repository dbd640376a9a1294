"""SGLang's decode lines: only a line of one running request tells the single-stream rate."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_decode_log import parse_decode_log
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

LOGS = FIXTURES / "sglang"


@pytest.mark.parametrize(("name", "single", "busiest", "lines"), [
    ("decode-log_0.4-era_decode-batch-period_8-running_constructed.txt", None, 8, 8),
    ("decode-log_0.5-era_decode-batch-comma_cuda-graph_prefill-and-http-lines_constructed.txt", 84.4, 32, 10),
    ("decode-log_speculative_accept-len_5-running-only_constructed.txt", None, 5, 6),
])
def test_each_era_of_the_log(name: str, single: float | None, busiest: int, lines: int) -> None:
    rates = parse_decode_log((LOGS / name).read_text())
    assert rates.busiest_running == busiest and rates.lines == lines
    if single is None:
        # A batched rate is never read as one stream's.
        assert rates.single_stream_tok_s is None and rates.single_stream_lines == 0
    else:
        assert rates.single_stream_tok_s == pytest.approx(single, abs=0.5)


def test_crlf_and_a_launcher_prefix_read_the_same() -> None:
    name = "decode-log_0.5-era_decode-batch-comma_cuda-graph_prefill-and-http-lines_constructed.txt"
    text = (LOGS / name).read_text()
    plain = parse_decode_log(text)
    assert parse_decode_log(text.replace("\n", "\r\n")) == plain
    assert parse_decode_log("".join(f"[rank0]: {line}\n" for line in text.splitlines())) == plain


def test_no_decode_line_is_no_rate() -> None:
    assert parse_decode_log("Prefill batch, #new-seq: 1\n").lines == 0
    assert parse_decode_log(None).single_stream_tok_s is None


@given(st.text(max_size=400))
def test_no_text_makes_it_raise(text: str) -> None:
    assert parse_decode_log(text).lines >= 0
