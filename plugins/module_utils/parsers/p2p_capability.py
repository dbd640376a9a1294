"""Which capability a pasted ``nvidia-smi topo -p2p`` matrix is of, from what the paste says around it.

The matrix itself never says it: ``topo -p2p r`` and ``topo -p2p n`` print the same header, rows and legend
(tests/fixtures/nvidia-smi/topo-p2p-r_8gpu-vm-NS.txt and topo-p2p-p_5gpu-OK.txt have the same shape). So the
capability comes from a hint, in this order: the command line pasted with it (``$ nvidia-smi topo -p2p rw``),
else the file name a user gave it (``p2p_read.txt``, ``p2p-r.txt``, ``topo_p2p_w.log``, ``nvlink.txt``), else
nothing, and the caller says the capability is not stated.

nvidia-smi's help lists the capabilities as letters: r (read), w (write), n (nvlink), a (atomics) and p
(prop; PCIe on newer drivers). Users pass several at once and get one matrix back: ``topo -p2p rw`` printed a
single GNS matrix on a 2x RTX 5090 host (noonghunna/club-3090 issues 1124, 1130, 1229; fixture
topo-p2p_2xRTX5090-GNS.txt). What such a cell means for each capability on its own is not printed, so a
combined matrix is kept as one matrix of its letters, in nvidia-smi's help order (``wr`` -> ``rw``).

Pure: names and command lines in, a letters string (``"r"``, ``"rw"``) or None out; nothing here raises.
"""

from __future__ import annotations

import itertools
import re

CAPABILITIES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}
"""The letters ``nvidia-smi topo -p2p`` takes, in its help's order, with the name of each."""

COMBINATIONS = tuple("".join(letter for letter, on in zip(CAPABILITIES, mask, strict=True) if on)
                     for mask in itertools.product((False, True), repeat=len(CAPABILITIES)) if sum(mask) >= 2)
"""Every canonical combination of two or more letters (``rw``, ``rwn`` ... ``rwnap``)."""

NOT_STATED = "not_stated"
"""The key of the audit's P2P facts for a matrix whose capability the material does not state."""

# Letters whose every non-OK cell denies GPU peer access over PCIe: NCCL's P2P transport needs the driver's
# read or write grant (NVML_P2P_CAPS_INDEX_READ / WRITE).
PEER_ACCESS_LETTERS = frozenset("rw")

_COMMAND_RE = re.compile(r"^(?:\S*/)?nvidia-smi\s+topo\s+(?:-p2p|--p2pstatus)(?:\s+|=)(?P<letters>[A-Za-z]{1,5})"
                         r"(?:\s+-i\s+\S+)?\s*$")
# Words of a file name that name a capability wherever they stand (p2p_read, read_p2p, nvlink.txt).
_NAME_WORDS = {"read": "r", "reads": "r", "write": "w", "writes": "w", "nvlink": "n", "atomic": "a",
               "atomics": "a", "prop": "p", "pcie": "p", "readwrite": "rw", "rw": "rw", "wr": "rw"}
# Letters count only right after a p2p word (p2p-r, topo_p2p_w), where nothing else could be meant.
_P2P_WORDS = frozenset({"p2p", "p2pstatus"})
_STORAGE_SUFFIX_RE = re.compile(r"(?:\.(?:txt|log|out|md|gz|text))+$", re.IGNORECASE)


def canonical(letters: str) -> str | None:
    """``"wr"`` -> ``"rw"``: the letters in nvidia-smi's order, or None when one is not a capability or
    repeats."""
    lowered = letters.lower()
    if not lowered or len(set(lowered)) != len(lowered) or not set(lowered) <= set(CAPABILITIES):
        return None
    return "".join(letter for letter in CAPABILITIES if letter in lowered)


def capability_name(letters: str) -> str:
    """``"r"`` -> ``"read"``, ``"rw"`` -> ``"read+write"``: the key of the audit's P2P facts."""
    return "+".join(CAPABILITIES[letter] for letter in letters)


def from_command(command: str | None) -> str | None:
    """The letters of a ``nvidia-smi topo -p2p <letters>`` command line (``--p2pstatus`` too, ``-i`` allowed
    after it), canonical; None for any other command."""
    if not isinstance(command, str):
        return None
    match = _COMMAND_RE.match(" ".join(command.split()))
    return canonical(match.group("letters")) if match else None


def from_name(name: str | None) -> str | None:
    """The letters a file name gives a ``topo -p2p`` matrix: capability words anywhere (``p2p_read``,
    ``nvlink``, ``p2p_read_write``), single letters only after ``p2p`` (``p2p-r``, ``topo_p2p_rw``). None
    when the name says none, or says two things that cannot both be meant (``read`` and ``p2p-n``)."""
    if not isinstance(name, str):
        return None
    stem = _STORAGE_SUFFIX_RE.sub("", name.replace("\\", "/").rsplit("/", 1)[-1])
    words = [word for word in re.split(r"[^a-z0-9]+", stem.lower()) if word]
    found = ""
    for index, word in enumerate(words):
        letters = _NAME_WORDS.get(word)
        if letters is None and index and words[index - 1] in _P2P_WORDS:
            letters = canonical(word) if len(word) <= len(CAPABILITIES) else None
        if letters:
            found += "".join(letter for letter in letters if letter not in found)
    return canonical(found) if found else None
