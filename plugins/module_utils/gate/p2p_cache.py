"""SGLang's cached P2P verdict, tied to the P2P facts it was made on.

With ``--enable-p2p-check`` SGLang tests CUDA IPC between every pair of its GPUs once, and writes the
answer to ``gpu_p2p_access_cache_for_<CUDA_VISIBLE_DEVICES>.json`` under ``~/.cache/sglang`` (0.5.10.post1:
``gpu_p2p_access_check`` in ``srt/distributed/device_communicators/custom_all_reduce_utils.py``, the root
hard-coded; 0.5.23: the same function, the root ``SGLANG_CACHE_DIR``, default ``~/.cache/sglang``, in
``srt/environ.py``). Every later start reads the file back and tests nothing: the file has no expiry and
is keyed by the device list only. The sglang_serve unit gives SGLang a persistent home, so after a driver
or hypervisor change the server would keep the verdict of the old platform.

So the gate fingerprints the P2P facts the launch rests on (the driver, the virtualization, the P2P
status of every chosen pair and what the gate judged of it) and the serving launcher removes the cached
file when the fingerprint differs from the one it was made under (roles/sglang_serve/files/
sglang_launch.py). Pure.
"""

from __future__ import annotations

import hashlib
import json
from itertools import combinations
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.all_reduce import P2P_CHECK
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import Gpu, Host, cell

ENV = "GPUHOST_P2P_FACTS"
SOURCE = ("SGLang custom_all_reduce_utils.py gpu_p2p_access_check: ~/.cache/sglang (0.5.10.post1) or "
          "SGLANG_CACHE_DIR (0.5.23) /gpu_p2p_access_cache_for_<CUDA_VISIBLE_DEVICES>.json, written once, no expiry")


def cache_file(group: tuple[Gpu, ...]) -> str:
    """The file name SGLang uses for these GPUs, CUDA_VISIBLE_DEVICES as the gate sets it."""
    return f"gpu_p2p_access_cache_for_{','.join(str(g.index) for g in group)}.json"


def facts_fingerprint(host: Host, group: tuple[Gpu, ...], p2p: dict[str, Any]) -> str:
    """A short digest of the P2P facts a cached verdict is only valid under."""
    pairs = {f"{a.index}-{b.index}": [cell(host.p2p_read, a.index, b.index), cell(host.p2p_read, b.index, a.index)]
             for a, b in combinations(group, 2)}
    facts = {"driver": host.driver, "virtualization": host.virtualization,
             "gpus": [[g.index, g.name] for g in group], "p2p_read": pairs,
             "judged": p2p.get("state"), "pairs": p2p.get("pairs")}
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def p2p_cache(host: Host, group: tuple[Gpu, ...] | None, p2p: dict[str, Any], args: list[str],
              notes: list[str]) -> dict[str, Any] | None:
    """launch.p2p_cache: the file SGLang caches its verdict in, the facts' fingerprint, and whether it is read."""
    if not group or len(group) < 2:
        return None
    used = P2P_CHECK in args
    found = {"file": cache_file(group), "facts": facts_fingerprint(host, group, p2p), "env": ENV,
             "read_by_sglang": used, "source": SOURCE}
    if used:
        notes.append(f"{P2P_CHECK}: SGLang caches its CUDA IPC verdict in {found['file']} under its cache directory "
                     f"and never tests again; the serving launcher removes that file whenever the P2P facts "
                     f"(fingerprint {found['facts']}: driver, virtualization, P2P status of the chosen pairs) differ "
                     "from the ones it was made under.")
    return found
