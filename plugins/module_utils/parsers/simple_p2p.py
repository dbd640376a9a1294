"""cuda-samples simpleP2P output: which GPU pairs the driver grants peer access, and the one copy figure the
sample prints.

Pure: text in, plain data out; the only exception raised is ``P2PToolParseError``, saying what was expected.
The lines follow the sample's writer (cuda-samples ``Samples/0_Introduction/simpleP2P/simpleP2P.cu``) as real
outputs show it (tests/fixtures/p2p/SOURCES.md):

* ``> Peer access from NVIDIA L4 (GPU0) -> NVIDIA L4 (GPU1) : Yes``: cudaDeviceCanAccessPeer for one ordered
  pair, every pair in turn;
* older samples first print ``> GPU0 = "     Tesla K40m" IS  capable of Peer-to-Peer (P2P)`` per GPU;
* ``Enabling peer access between GPU0 and GPU1...``, then ``cudaMemcpyPeer / cudaMemcpy between GPU0 and
  GPU1: 19.87GB/s``: 64 MB copied back and forth between the first pair with peer access, timed by CUDA
  events; both directions share one figure, so it is kept as the pair's, not as a matrix cell;
* ``Test passed`` or ``Test failed!`` (the data checked after the kernels ran across the pair).

Output: ``{"tool": "simpleP2P", "devices": [{index, name}] (the GPUs its lines name; it prints no bus id),
"access": [[bool | None]], "matrices": [], "memcpy_peer": {"pair": [a, b], "gb_per_s": float} | None,
"passed": bool | None}``. The access matrix runs to the "CUDA-capable device count" line's count when it is
there; a pair the paste does not show (cut) is None in it.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_common import P2PToolParseError, p2p_lines

_START_RE = re.compile(r"^\[[^\]]*simpleP2P\] - Starting\.\.\.\s*$")
_COUNT_RE = re.compile(r"^CUDA-capable device count: (\d{1,4})\s*$")
# Its "> " lines lose the mark on the way in when p2p_lines takes it for a Markdown quote: either reads.
_CAPABLE_RE = re.compile(r'^(?:> )?GPU(\d{1,4}) = "\s*(.*?)" IS\s+(NOT\s+)?capable of Peer-to-Peer')
# A GPU's name is at most 256 characters (nvidia-smi's are under 100): unbounded, .*? and .* tried the rest of the line
# from each "(GPUn) -> " of it, quadratic in a line of many (docs/development.md, "Regexes over input").
_ACCESS_RE = re.compile(r"^(?:> )?Peer access from (.{0,256}?) \(GPU(\d{1,4})\) -> (.{0,256}?) \(GPU(\d{1,4})\) : "
                        r"(Yes|No)\s*$")
_COPY_RE = re.compile(r"^cudaMemcpyPeer / cudaMemcpy between GPU(\d{1,4}) and GPU(\d{1,4}): "
                      r"([0-9]+(?:\.[0-9]+)?)\s*GB/s\s*$")
_RESULT_RE = re.compile(r"^Test (passed|failed)!?\s*$")
MARK_RE = re.compile(r"^\s*(?:(?:> )?Peer access from .{0,256} \(GPU\d{1,4}\) -> .{0,256} \(GPU\d{1,4}\) : (?:Yes|No)|"
                     r"\[[^\]]*simpleP2P\] - Starting\.\.\.|cudaMemcpyPeer / cudaMemcpy between GPU\d{1,4} and GPU\d)")
"""A line only simpleP2P prints (material/kinds.py and p2p_bandwidth.parse_p2p_log tell it by this)."""


def parse_simple_p2p(text: Any) -> dict[str, Any]:
    """simpleP2P's output, whole or cut: devices, peer access per ordered pair, its copy figure, its result."""
    if not isinstance(text, str):
        raise P2PToolParseError("simpleP2P: expected the text the sample printed")
    names: dict[int, str] = {}
    access: dict[tuple[int, int], bool] = {}
    count: int | None = None
    copy: dict[str, Any] | None = None
    passed: bool | None = None
    started = False
    for line in p2p_lines(text):
        line = line.strip()
        if _START_RE.match(line):
            started = True
        match = _COUNT_RE.match(line)
        if match:
            count = int(match.group(1))
            continue
        match = _CAPABLE_RE.match(line)
        if match:
            names.setdefault(int(match.group(1)), match.group(2).strip())
            continue
        match = _ACCESS_RE.match(line)
        if match:
            source, target = int(match.group(2)), int(match.group(4))
            names.setdefault(source, match.group(1).strip())
            names.setdefault(target, match.group(3).strip())
            access[(source, target)] = match.group(5) == "Yes"
            continue
        match = _COPY_RE.match(line)
        if match:
            copy = {"pair": [int(match.group(1)), int(match.group(2))], "gb_per_s": float(match.group(3))}
            continue
        match = _RESULT_RE.match(line)
        if match:
            passed = match.group(1) == "passed"
    if not access and copy is None:
        why = " (it started, but the paste ends before the peer-access lines)" if started else ""
        raise P2PToolParseError("simpleP2P: expected its '> Peer access from ... (GPU0) -> ... (GPU1) : Yes' lines"
                                f"{why}; found none. Pass the output from 'Checking GPU(s) for support of peer to "
                                "peer memory access...' on")
    gpus = max([count or 0, *(index + 1 for index in names), *(max(pair) + 1 for pair in access)])
    return {
        "tool": "simpleP2P",
        "devices": [{"index": index, "name": names[index]} for index in sorted(names)],
        "access": [[None if i == j else access.get((i, j)) for j in range(gpus)] for i in range(gpus)],
        "matrices": [],
        "memcpy_peer": copy,
        "passed": passed,
    }
