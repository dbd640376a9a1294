"""parsers/shell_words.py: the words shlex.split gives, its errors, in linear time."""

from __future__ import annotations

import shlex

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import split_args
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.shell_words import shell_words
from hypothesis import given
from hypothesis import strategies as st

from tests.cpu_limit import within

_PIECES = ("a", "bc", " ", "\t", "\n", "\r", "'", '"', "\\", "\\\\", '\\"', "\\'", "\\\n", "#", "''", '""', "\x0b",
           "\u00e9", "-set", "x=1,y=2")


def _split(split, text: str) -> tuple[str, object]:
    try:
        return "words", split(text)
    except ValueError as exc:
        return "error", str(exc)


@given(st.lists(st.sampled_from(_PIECES), max_size=16).map("".join))
def test_the_same_words_and_errors_as_shlex(text: str) -> None:
    assert _split(shell_words, text) == _split(shlex.split, text)


@pytest.mark.parametrize("text", [
    "-set device.hostpci0.x-nv-gpudirect-clique=0 -cpu 'host,kvm=off' -fw_cfg \"name=opt/x,string=1\"",
    "-x \"a \\\"quoted\\\" word\" 'it''s' back\\ slash",
])
def test_real_args_split_as_shlex_splits_them(text: str) -> None:
    assert shell_words(text) == shlex.split(text)


@pytest.mark.parametrize("text", ["pass" * 131072, '"' + "pass" * 131072 + '"', "a\\ " * 160000])
def test_a_long_word_is_split_in_linear_time(text: str) -> None:
    # shlex grew a word a character at a time: a 256 KB word took a second, a 1 MB args value a quarter of a minute.
    assert within(1.0, lambda: split_args(text))[0]
