"""topo -p2p matrices cut anywhere (parse_topo_p2p(cut_ok=True), for material): the rows a paste holds are
read as printed, the rest are None and named in missing_rows; the only error is the parser's own."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo import parse_topo_p2p
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

SMI = FIXTURES / "nvidia-smi"
MATRICES = [(SMI / name).read_text() for name in ("topo-p2p-r_8gpu-vm-NS.txt", "topo-p2p_2xRTX5090-GNS.txt",
                                                     "topo-p2p-p_5gpu-OK.txt", "topo-p2p-r_595_2xRTX3090-CNS.txt")]


@given(st.sampled_from(MATRICES), st.integers(min_value=0, max_value=4000))
def test_a_matrix_cut_at_any_character_reads_what_it_holds_or_says_why_not(text, at) -> None:
    whole = parse_topo_p2p(text)
    try:
        cut = parse_topo_p2p(text[:at], cut_ok=True)
    except NvidiaSmiParseError:
        return
    assert cut.gpus == whole.gpus
    for name, row, full in zip(cut.gpus, cut.status, whole.status, strict=True):
        if name in cut.missing_rows:
            assert row == [None] * len(cut.gpus)
        else:
            assert row == full
