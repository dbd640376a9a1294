"""What gpu_p2p_probe proved, per ordered GPU pair: whether the data arrived intact.

The gate (which GPUs may serve together) and the metrics (``gpuhost_p2p_proven``) read the probe's
result the same way, so both import it from here. Pure: the probe's result in, verdicts out.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import probe_host_index
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict, as_int, as_list


def read_probe(probe: Any) -> dict[tuple[int, int], bool]:
    """Per ordered GPU pair (host indexes), whether the probe saw the data arrive intact.

    Reads gpu_p2p_probe's ``proof`` matrix (a pair is verified when peer access was granted and no
    element was wrong, by copy engine or by kernel), mapped through ``visible`` (the probe's
    CUDA_VISIBLE_DEVICES) when given; and a ``pairs`` list of ``{src, dst, verified}`` or
    ``{gpus: [a, b], verified}``. Logs of p2pBandwidthLatencyTest or nvbandwidth prove nothing: they
    time copies without checking them.
    """
    data = as_dict(probe)
    verdicts: dict[tuple[int, int], bool] = {}
    host_index = probe_host_index(data)
    for i, row in enumerate(as_list(data.get("proof"))):
        for j, cell in enumerate(as_list(row)):
            if i == j or not isinstance(cell, dict):
                continue
            a, b = host_index(i), host_index(j)
            if a is None or b is None:
                continue
            ce, sm = as_int(cell.get("ce_wrong")), as_int(cell.get("sm_wrong"))
            if cell.get("peer_access") is False or (ce or 0) > 0 or (sm or 0) > 0:
                verdicts[(a, b)] = False
            elif cell.get("peer_access") is True and ce == 0 and (sm is None or sm == 0):
                verdicts[(a, b)] = True
    for entry in as_list(data.get("pairs")):
        if not isinstance(entry, dict) or not isinstance(entry.get("verified"), bool):
            continue
        gpus = as_list(entry.get("gpus"))
        if len(gpus) == 2 and all(as_int(g) is not None for g in gpus):
            a, b = as_int(gpus[0]), as_int(gpus[1])
            ordered = [(a, b), (b, a)]
        else:
            src, dst = as_int(entry.get("src")), as_int(entry.get("dst"))
            if src is None or dst is None:
                continue
            ordered = [(src, dst)]
        for pair in ordered:
            if pair[0] is not None and pair[1] is not None and pair[0] != pair[1]:
                # One failed copy outweighs any number of good ones.
                verdicts[pair] = verdicts.get(pair, True) and entry["verified"]
    return verdicts
