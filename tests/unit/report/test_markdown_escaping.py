"""report/markdown.py: a value shows as its own text in a report, whatever it holds.

The reproductions: a carriage return in a material file name started a heading of its own (CommonMark
ends a line at a lone CR; only "\\n" was replaced), and ``<img src=x onerror=...>`` in a GPU name reached the
report as raw HTML.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import cell, inline
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import host_markdown
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.report.test_report import FACTS

IMG = "<img src=x onerror=alert(1)>"
# Every character str.splitlines and a Markdown renderer may break a line at.
LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")


def unescaped(text: str, char: str) -> bool:
    """Whether ``char`` occurs in ``text`` without a backslash escaping it."""
    return char in re.sub(r"\\.", "", text)


def test_a_carriage_return_in_a_file_name_starts_no_heading() -> None:
    facts = copy.deepcopy(FACTS)
    facts["material"] = {"inputs": [{"name": "smi.txt\r# Injected heading\r", "kind": "nvidia-smi", "as": ["gpus"]}],
                       "warnings": ["could not read smi.txt\r## Another heading"]}
    lines = host_markdown("gpu-vm-1", facts).splitlines()
    assert not [line for line in lines if "Injected heading" in line and not line.startswith("| ")]
    assert not [line for line in lines if line.lstrip().startswith("## Another heading")]


def test_html_in_a_gpu_name_is_shown_not_run() -> None:
    facts = copy.deepcopy(FACTS)
    facts["gpus"]["devices"][0]["name"] = IMG
    facts["findings"][0]["summary"] = f"GPU0 ({IMG}) has no P2P. ![t](https://tracker.example/t.png)"
    text = host_markdown("gpu-vm-1", facts)
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)>" in text
    assert "![t](" not in text and "!\\[t\\](https://tracker.example/t.png)" in text


@given(st.text())
def test_any_value_is_one_line_of_text_with_nothing_unescaped(value: str) -> None:
    for escaped in (cell(value), inline(value)):
        assert not LINE_BREAKS.search(escaped) and escaped.splitlines() == [escaped]
        assert "<" not in escaped
        assert not any(unescaped(escaped, c) for c in "[]`")
        assert not re.match(r"\s*[#>]", escaped)
        # What shows, once Markdown has taken the escapes out, is the value (line breaks as spaces, "&" as typed).
        shown = re.sub(r"\\(.)", r"\1", escaped.replace("&lt;", "<").replace("&amp;", "&"))
        assert shown == (re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]+", " ", value) or "-")
    assert not unescaped(cell(value), "|")


def test_a_backslash_before_a_pipe_does_not_end_the_cell() -> None:
    assert cell("a\\|b") == "a\\\\\\|b"
