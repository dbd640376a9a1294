"""The capability of a pasted topo -p2p matrix from its command line or its file name (parsers/p2p_capability.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_capability import (
    CAPABILITIES,
    COMBINATIONS,
    canonical,
    capability_name,
    from_command,
    from_name,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(("command", "letters"), [
    ("nvidia-smi topo -p2p r", "r"), ("nvidia-smi  topo -p2p  w", "w"), ("nvidia-smi topo -p2p rw", "rw"),
    ("nvidia-smi topo -p2p wr", "rw"), ("nvidia-smi topo --p2pstatus n", "n"), ("/usr/bin/nvidia-smi topo -p2p a", "a"),
    ("nvidia-smi topo -p2p p -i 0,1", "p"), ("nvidia-smi topo -p2p RWNAP", "rwnap"),
    ("nvidia-smi topo -p2p x", None), ("nvidia-smi topo -p2p rr", None), ("nvidia-smi topo -m", None),
    ("nvidia-smi topo -p2p", None), (None, None), ("qm config 120", None),
])
def test_the_letters_of_a_command_line(command, letters) -> None:
    assert from_command(command) == letters


@pytest.mark.parametrize(("name", "letters"), [
    ("p2p_read.txt", "r"), ("p2p-r.txt", "r"), ("topo_p2p_w", "w"), ("p2p_write.log", "w"), ("nvlink.txt", "n"),
    ("atomics.txt", "a"), ("topo-p2p-p.txt", "p"), ("p2p_prop.txt", "p"), ("p2p_read_write.txt", "rw"),
    ("topo_p2p_rw.txt", "rw"), ("nvidia-smi topo -p2p r", "r"), ("tickets/4711/p2p-n.txt.gz", "n"),
    ("P2P-READ.TXT", "r"), ("read_p2p.md", "r"),
    # Names that say nothing: a letter only counts after "p2p", and a word such as "matrix" is no capability.
    ("p2p.txt", None), ("p2p_matrix.txt", None), ("r.txt", None), ("topo.txt", None), ("gpu-w.txt", None),
    ("", None), (None, None),
])
def test_the_letters_of_a_file_name(name, letters) -> None:
    assert from_name(name) == letters


def test_every_combination_is_canonical_and_named() -> None:
    assert len(COMBINATIONS) == 26 and "rw" in COMBINATIONS and "rwnap" in COMBINATIONS
    assert all(canonical(letters) == letters for letters in COMBINATIONS)
    assert capability_name("rw") == "read+write" and capability_name("n") == "nvlink"
    assert canonical("pr") == "rp" and canonical("") is None and canonical("rx") is None


@given(st.text(max_size=200))
def test_no_name_or_command_makes_it_raise_and_any_answer_is_canonical(text) -> None:
    for letters in (from_name(text), from_command(text), from_command("nvidia-smi topo -p2p " + text)):
        assert letters is None or (canonical(letters) == letters and set(letters) <= set(CAPABILITIES))


@given(st.sets(st.sampled_from(sorted(CAPABILITIES)), min_size=1), st.randoms())
def test_any_order_of_letters_gives_the_same_capability(chosen, random) -> None:
    letters = list(chosen)
    random.shuffle(letters)
    expected = "".join(letter for letter in CAPABILITIES if letter in chosen)
    assert from_command("nvidia-smi topo -p2p " + "".join(letters)) == expected
    assert from_name("topo_p2p_" + "".join(letters) + ".txt") == expected
