"""Lone surrogates (text decoded with surrogateescape, a JSON "\\ud800") reach the nvidia-smi -q -x and
qemu-server config parsers: they parse (the surrogate read as U+FFFD) or raise their own parse error, never
UnicodeEncodeError from expat or urllib (issue 27, item 13: 427 fuzz crashes at these two sites)."""

from __future__ import annotations

import contextlib

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import without_surrogates
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_xml import parse_nvidia_smi_q_xml
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    ProxmoxParseError,
    decode_text,
    parse_vm_config,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES

XML = sorted((FIXTURES / "nvidia-smi").glob("q_*.xml"))
CONFIGS = sorted((FIXTURES / "proxmox").glob("*.conf"))
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


def test_a_surrogate_in_a_gpu_name_is_read_as_a_replacement_character() -> None:
    text = XML[0].read_text()
    start = text.index("<product_name>") + len("<product_name>")
    parsed = parse_nvidia_smi_q_xml(text[:start] + "\udcff" + text[start:])
    assert parsed.gpus[0].product_name.startswith("\ufffd")


def test_a_surrogate_in_a_vm_config_description_and_value_is_read() -> None:
    config = parse_vm_config("#note \udce9\nname: vm\udc80\nhostpci0: 0000:01:00.0,pcie=1\n")
    assert config.current.description == "note \ufffd"
    assert config.current.options["name"] == "vm\ufffd"
    assert decode_text("%41\ud800") == "A\ufffd"


def test_without_surrogates_leaves_other_text_alone() -> None:
    assert without_surrogates("GPU 0 \u00e9 \U0001f600") == "GPU 0 \u00e9 \U0001f600"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(XML), st.integers(min_value=0), SURROGATES)
def test_nvidia_smi_q_xml_raises_only_its_error(path, at: int, surrogate: str) -> None:
    text = path.read_text()
    at %= len(text) + 1
    with contextlib.suppress(NvidiaSmiParseError):
        parse_nvidia_smi_q_xml(text[:at] + surrogate + text[at:])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CONFIGS), st.integers(min_value=0), SURROGATES)
def test_parse_vm_config_raises_only_its_error(path, at: int, surrogate: str) -> None:
    text = path.read_text()
    at %= len(text) + 1
    with contextlib.suppress(ProxmoxParseError):
        parse_vm_config(text[:at] + surrogate + text[at:])


@pytest.mark.parametrize("text", ["\ud800", "<nvidia_smi_log>\udcff</nvidia_smi_log>"])
def test_surrogates_alone_give_the_parse_error_or_a_document(text: str) -> None:
    with contextlib.suppress(NvidiaSmiParseError):
        parse_nvidia_smi_q_xml(text)
