"""Topology and P2P matrices hard-wrapped by a mail client (parsers/topo_wrap.py): the real outputs of
tests/fixtures/nvidia-smi wrapped at any width read the same as the originals; a continuation the header's
column count cannot place is refused with a message, never read into the wrong columns."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo import (
    parse_topo_matrix,
    parse_topo_p2p,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.topo_wrap import rejoin_wrapped
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES

SMI = FIXTURES / "nvidia-smi"
P2P = ["topo-p2p-r_8gpu-vm-NS.txt", "topo-p2p-p_5gpu-OK.txt", "topo-p2p_2xRTX5090-GNS.txt",
       "topo-p2p-r_595_2xRTX3090-CNS.txt"]
# Those whose every cell lies in its own field: the merged-cell fixtures (NIC4-NIC5-one-field) are repaired by
# position, which a wrap that moves cells between lines makes a different question.
TOPO = ["topo-m_2xRTX5090-PHB.txt", "topo-m_5gpu-NODE-PHB.txt", "topo-m_2018_8gpu-PIX-PXB-mlx5.txt",
        "topo-m_2017_4xK40m-SOC-mlx4.txt", "topo-m_2020_4xT4-pasted-spaces.txt", "topo-m_590_8xB300-NV18-nics-ansi.txt"]


def hard_wrap(text: str, width: int) -> str:
    """What a mail client's hard wrap does: each line longer than ``width`` is broken at its last space or tab
    before the limit (that character dropped), never inside a cell and never before its first cell."""
    out = []
    for line in text.split("\n"):
        while len(line.rstrip()) > width:  # trailing whitespace is not text to wrap
            start = len(line) - len(line.lstrip())
            cut = max(line.rfind(" ", start + 1, width), line.rfind("\t", start + 1, width))
            if cut <= start:
                break
            out.append(line[:cut])
            line = line[cut + 1:]
        out.append(line)
    return "\n".join(out)


def test_the_incident_matrix_wrapped_at_40_columns_reads_as_the_original() -> None:
    text = (SMI / "topo-p2p-r_8gpu-vm-NS.txt").read_text()
    wrapped = hard_wrap(text, 40)
    assert wrapped.count("\n") > text.count("\n")  # the wrap did break rows
    assert parse_topo_p2p(wrapped) == parse_topo_p2p(text)


def test_a_wrapped_topo_m_row_keeps_its_affinity_columns() -> None:
    text = (SMI / "topo-m_2018_8gpu-PIX-PXB-mlx5.txt").read_text()
    wrapped, original = parse_topo_matrix(hard_wrap(text, 50)), parse_topo_matrix(text)
    assert wrapped.links == original.links and wrapped.cpu_affinity == original.cpu_affinity
    assert any("wrapped onto the next line" in note for note in wrapped.notes)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(P2P), st.integers(min_value=12, max_value=120))
def test_any_wrap_of_a_real_p2p_matrix_reads_as_the_original(name, width) -> None:
    text = (SMI / name).read_text()
    wrapped, original = parse_topo_p2p(hard_wrap(text, width)), parse_topo_p2p(text)
    assert (wrapped.gpus, wrapped.status) == (original.gpus, original.status)  # the legend is prose, not judged


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(TOPO), st.integers(min_value=30, max_value=160))
def test_any_wrap_of_a_real_topo_m_reads_as_the_original(name, width) -> None:
    text = (SMI / name).read_text()
    original = parse_topo_matrix(text)
    wrapped = parse_topo_matrix(hard_wrap(text, width))
    assert (wrapped.gpus, wrapped.links, wrapped.nics, wrapped.nic_links) == \
        (original.gpus, original.links, original.nics, original.nic_links)
    assert (wrapped.cpu_affinity, wrapped.numa_affinity, wrapped.gpu_numa_id) == \
        (original.cpu_affinity, original.numa_affinity, original.gpu_numa_id)


def test_a_continuation_the_columns_cannot_place_is_refused() -> None:
    # Row GPU0 is complete; a stray line of codes after it would give it five codes for four columns.
    text = "\tGPU0\tGPU1\tGPU2\tGPU3\nGPU0\tX\tNS\tNS\tNS\nNS\nGPU1\tNS\tX\tNS\tNS\n"
    with pytest.raises(NvidiaSmiParseError, match="one row for each of GPU0, GPU1, GPU2, GPU3"):
        parse_topo_p2p(text)


def test_a_row_glued_to_its_label_is_not_taken_for_a_continuation() -> None:
    lines = ["\tGPU0\tNIC10", "GPU0\tX\tPXB", "NIC10PXB\tX"]
    assert rejoin_wrapped(lines, 0) == (lines, [])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="GPUNIC0123 \tXOKNS-,/A\n", max_size=40), max_size=12))
def test_rejoining_never_raises_and_never_adds_or_drops_a_token(lines) -> None:
    lines = ["\tGPU0\tGPU1", *lines]
    joined, _notes = rejoin_wrapped(lines, 0, width_from_header=True)
    assert " ".join(" ".join(joined).split()) == " ".join(" ".join(lines).split())
