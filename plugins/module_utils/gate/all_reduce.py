"""Which all-reduce SGLang will really run, its custom all-reduce or NCCL, as SGLang itself decides it.

A model of SGLang's start-up decision, so that the gate reports what will run rather than what it
allows: on PCIe-only GPUs above tensor-parallel size 2 SGLang switches its custom all-reduce off by
itself, whatever P2P can do, and NCCL does every all-reduce. Pure functions over the gate's inputs.

The decision, in SGLang's order (``RULES`` keeps it per SGLang version):

1. ``--disable-custom-all-reduce``: NCCL.
2. A world size outside the supported ones (2, 4, 6, 8): NCCL.
3. Above 2 GPUs, every pair must be connected by NVLink (NVML's P2P status for the NVLink capability);
   otherwise NCCL. The audit gives that as its ``p2p.nvlink`` matrix, else as ``NV#`` cells of the
   topology; a pair neither tells is unknown, and then so is the path: never assumed.
4. P2P between the ranks, judged one of three ways. Without ``--enable-p2p-check`` SGLang asks nobody: it
   replaces its P2P check with one that always says yes (``monkey_patch_p2p_access_check``) and sets up
   its custom all-reduce over CUDA IPC whatever the driver grants, so missing P2P fails at start-up or
   later instead of falling back. With ``--enable-p2p-check`` it tests CUDA IPC between the GPUs (then
   only that test can tell, unless the probe proved P2P). ``SGLANG_SKIP_P2P_CHECK=1`` in its environment
   asks the driver (``torch.cuda.can_device_access_peer``) instead, with or without the flag.
5. Otherwise its custom all-reduce, for messages under its buffer size (8 MiB); larger ones go to NCCL.

6. From 0.5.21, with ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1`` in its environment, FlashInfer's PCIe IPC
   all-reduce at 2, 4 or 8 GPUs takes the messages the custom all-reduce does not (decode-sized ones; NCCL
   the rest), ``--disable-custom-all-reduce`` or not, and with no P2P check of its own (path ``pcie_ipc``).
   The gate recommends it only where the probe proved P2P (launch.py).

Not modelled: other opt-in all-reduce backends still in flight upstream.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import versions
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import Host, cell

# SGLang's rule per version range, newest first. Origin: python/sglang/srt/distributed/device_communicators/
# custom_all_reduce.py (CustomAllreduce.__init__ and should_custom_ar: _SUPPORTED_WORLD_SIZES [2, 4, 6, 8],
# _MAX_CAR_SIZE 8192 * 1024 on CUDA), adapted there from vLLM's custom all-reduce (v0.6.4.post1; SGLang 0.3
# imported vLLM's, with the same rule), with is_full_nvlink and can_use_custom_all_reduce_with_nvlink in
# custom_all_reduce_utils.py; and monkey_patch_p2p_access_check in sglang/srt/utils/common.py, which replaces
# gpu_p2p_access_check with `lambda *arg, **kwargs: True` unless the server runs with --enable-p2p-check
# (called from model_executor/model_runner.py in 0.5.10.post1, from distributed/bootstrap.py in 0.5.23);
# can_p2p in custom_all_reduce_utils.py asks torch.cuda.can_device_access_peer when SGLANG_SKIP_P2P_CHECK=1,
# before that check, in both versions.
# From 0.5.12 dispatch_custom_allreduce (custom_all_reduce.py) runs the JIT-compiled CustomAllReduceV2
# (custom_all_reduce_v2.py) by default (environ.py SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=True; in 0.5.10.post1
# it is opt-in through SGLANG_USE_JIT_ALL_REDUCE). It runs only where can_use_custom_all_reduce_with_nvlink
# finds NVLink between every pair (`full_nvlink != True: return`), at 2 to 8 GPUs (THRESHOLD_2_SHOT_MAP; 2 to 16
# from 0.5.19, configs/custom_all_reduce_v2.py range(2, 17)), for messages up to 16 MiB (max_pull_size
# 16 * 1024 * 1024; SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB = 16 * 1024 from 0.5.19). In 0.5.12 PCIe GPUs then
# get no custom all-reduce at all (V2 is returned whatever the link, and disables itself); from 0.5.13
# can_use_custom_all_reduce_v2 is asked first and PCIe GPUs fall back to the legacy CustomAllreduce (0.5.23 the
# same). The last entry is the one applied to versions outside every range.
_LEGACY = {"world_sizes": (2, 4, 6, 8), "pcie_max_ranks": 2, "max_message_mib": 8}
RULES: tuple[dict[str, Any], ...] = (
    {
        "id": "sglang-custom-ar-v2-nvlink-16mib-legacy-pcie-ipc-opt-in",
        "sglang_versions": ">=0.5.21",
        **_LEGACY,
        "v2": {"world_sizes": tuple(range(2, 17)), "max_message_mib": 16, "pcie_fallback": True},
        "pcie_ipc": {"world_sizes": (2, 4, 8)},
        "source": "SGLang 0.5.21 and 0.5.23 custom_all_reduce.py dispatch_custom_allreduce, custom_all_reduce_v2.py "
                  "can_use_custom_all_reduce_v2, configs/custom_all_reduce_v2.py, environ.py; "
                  "device_communicators/pcie_ipc_ar.py (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE, world sizes 2, 4, 8) and "
                  "parallel_state.py (tried after the custom all-reduce, whatever --disable-custom-all-reduce)",
    },
    {
        "id": "sglang-custom-ar-v2-nvlink-16mib-legacy-pcie",
        "sglang_versions": ">=0.5.19,<0.5.21",
        **_LEGACY,
        "v2": {"world_sizes": tuple(range(2, 17)), "max_message_mib": 16, "pcie_fallback": True},
        "pcie_ipc": None,
        "source": "SGLang 0.5.19 and 0.5.23 custom_all_reduce.py dispatch_custom_allreduce, custom_all_reduce_v2.py "
                  "can_use_custom_all_reduce_v2, configs/custom_all_reduce_v2.py, environ.py",
    },
    {
        "id": "sglang-custom-ar-v2-nvlink-legacy-pcie",
        "sglang_versions": ">=0.5.13,<0.5.19",
        **_LEGACY,
        "v2": {"world_sizes": tuple(range(2, 9)), "max_message_mib": 16, "pcie_fallback": True},
        "pcie_ipc": None,
        "source": "SGLang 0.5.13 custom_all_reduce.py dispatch_custom_allreduce, custom_all_reduce_v2.py "
                  "can_use_custom_all_reduce_v2 (THRESHOLD_2_SHOT_MAP 2..8, max_pull_size 16 MiB)",
    },
    {
        "id": "sglang-custom-ar-v2-nvlink-only",
        "sglang_versions": ">=0.5.12,<0.5.13",
        **_LEGACY,
        "v2": {"world_sizes": tuple(range(2, 9)), "max_message_mib": 16, "pcie_fallback": False},
        "pcie_ipc": None,
        "source": "SGLang 0.5.12 custom_all_reduce.py dispatch_custom_allreduce (CustomAllReduceV2 whatever the "
                  "link), custom_all_reduce_v2.py CustomAllReduceV2.__init__ (full_nvlink != True: disabled)",
    },
    {
        "id": "sglang-custom-ar-vllm-derived",
        "sglang_versions": ">=0.3,<0.5.12",
        **_LEGACY,
        "v2": None,
        "pcie_ipc": None,
        "source": "SGLang custom_all_reduce.py (CustomAllreduce: _SUPPORTED_WORLD_SIZES [2, 4, 6, 8]; above 2 GPUs "
                  "only with is_full_nvlink; _can_p2p through gpu_p2p_access_check, replaced by "
                  "monkey_patch_p2p_access_check without --enable-p2p-check), adapted from vLLM's",
    },
)
V2_ENV = "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2"
# FlashInfer's PCIe IPC all-reduce, opt-in from 0.5.21: built for any TP group of 2, 4 or 8 ranks when the
# variable is set, tried after the custom all-reduce, for decode-sized messages (NCCL above). It maps its
# peers' memory through CUDA IPC with no P2P check of its own (pcie_ipc_ar.py eligible_group,
# PcieIpcCommunicator; parallel_state.py GroupCoordinator.__init__ and its all-reduce dispatch).
PCIE_IPC_ENV = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"

DISABLE = "--disable-custom-all-reduce"
P2P_CHECK = "--enable-p2p-check"
SKIP_P2P_CHECK = "SGLANG_SKIP_P2P_CHECK"
_NVLINK_LABEL = re.compile(r"^NV\d+$")
_PCIE_LABELS = {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}
_NOT_NVLINK = {"NS", "CNS", "GNS", "TNS", "DR"}


def rule_for(version: str | None) -> tuple[dict[str, Any], str | None]:
    """The rule for an SGLang version, and a note when the version lies outside every known range."""
    if version is None:
        return RULES[-1], None
    for rule in RULES:
        if versions.matches(version, rule["sglang_versions"]) is True:
            return rule, None
    rule = RULES[-1]
    return rule, (f"SGLang {version} is outside the versions whose all-reduce choice is known "
                  f"({rule['sglang_versions']}): the rule of {rule['id']} is applied to it unchecked.")


def _pair_nvlink(host: Host, a: int, b: int) -> bool | None:
    """Whether NVLink connects two GPUs: NVML's NVLink P2P status, else the topology's label; None if neither."""
    statuses = [s for s in (cell(host.p2p_nvlink, a, b), cell(host.p2p_nvlink, b, a)) if s in _NOT_NVLINK | {"OK"}]
    if statuses:
        return all(s == "OK" for s in statuses)
    label = cell(host.topology, a, b) or cell(host.topology, b, a)
    if label is None:
        return None
    if _NVLINK_LABEL.match(label.upper()):
        return True
    return False if label.upper() in _PCIE_LABELS else None


def nvlink_mesh(host: Host, gpus: Sequence[int]) -> tuple[bool | None, dict[str, int]]:
    """Whether every pair of these GPUs is on NVLink (None when some pair is unknown and none is PCIe)."""
    counts = {"nvlink": 0, "pcie": 0, "unknown": 0}
    for a, b in combinations(gpus, 2):
        found = _pair_nvlink(host, a, b)
        counts["unknown" if found is None else "nvlink" if found else "pcie"] += 1
    if counts["pcie"]:
        return False, counts
    return (None if counts["unknown"] else True), counts


def p2p_check_kind(flags: Iterable[str], env: dict[str, str] | None) -> str:
    """How SGLang judges P2P between its ranks: driver, cuda_ipc or assumed (it asks nobody)."""
    if (env or {}).get(SKIP_P2P_CHECK) == "1":
        return "driver"
    return "cuda_ipc" if P2P_CHECK in set(flags) else "assumed"


def sglang_all_reduce(tp: int, mesh: bool | None, p2p: str, flags: Iterable[str],
                      version: str | None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """SGLang's all-reduce at this tensor-parallel size, NVLink mesh, P2P state, flags and environment.

    ``p2p``: proven (by the probe), claimed (by the driver, not proven), unknown or none. Returns
    ``path`` (custom, nccl, or None when only SGLang's start-up can tell), ``off_by`` (flag or sglang,
    when custom all-reduce is off), ``brief`` (a few words for the summary), ``reason``, ``p2p_check``
    (assumed, cuda_ipc or driver; p2p_check_kind) and ``rule`` (the id of the RULES entry applied).
    """
    rule, _note = rule_for(version)
    flags = set(flags)
    check = p2p_check_kind(flags, env)
    nccl_all = "NCCL does every all-reduce"

    ipc = rule.get("pcie_ipc")
    ipc_on = bool(ipc) and (env or {}).get(PCIE_IPC_ENV, "0").lower() in ("1", "true") and tp in ipc["world_sizes"]

    def result(path: str | None, off_by: str | None, brief: str, reason: str) -> dict[str, Any]:
        if ipc_on and path == "nccl":
            proof = ("the probe proved P2P between these GPUs" if p2p == "proven" else
                     "P2P between these GPUs is not proven: it may fail or return wrong sums; remove the variable "
                     "or prove P2P with gpu_p2p_probe")
            path, brief = "pcie_ipc", "FlashInfer PCIe IPC all-reduce (decode-sized messages), NCCL the rest"
            reason = (f"{reason} {PCIE_IPC_ENV}=1: SGLang's FlashInfer PCIe IPC all-reduce takes the decode-sized "
                      f"messages over CUDA IPC and NCCL the larger ones; it checks no P2P itself, and {proof}.")
        return {"path": path, "off_by": off_by, "brief": brief, "reason": reason,
                "p2p_check": check if tp > 1 else None, "rule": rule["id"]}

    if tp <= 1:
        return result(None, None, "one GPU", "Tensor-parallel size 1: nothing is all-reduced.")
    if DISABLE in flags:
        return result("nccl", "flag", DISABLE, f"{DISABLE}: SGLang's custom all-reduce is off, {nccl_all}.")
    v2 = rule.get("v2") if (env or {}).get(V2_ENV, "1").lower() not in ("0", "false") else None
    if v2 and mesh is not False and (mesh is True or tp > rule["pcie_max_ranks"] or not v2["pcie_fallback"]):
        # NVLink, or a link only SGLang's start-up will tell where the legacy path could not run anyway.
        world_sizes, cap, kind = v2["world_sizes"], v2["max_message_mib"], "custom all-reduce v2"
    elif v2 and mesh is False and not v2["pcie_fallback"]:
        return result("nccl", "sglang", f"{tp} GPUs without an NVLink mesh (custom all-reduce v2 needs it)",
                      "This SGLang runs its custom all-reduce v2 by default, which needs NVLink between every pair, "
                      f"and has no fallback to the legacy one: on PCIe it stays off and {nccl_all}.")
    else:
        world_sizes, cap, kind = rule["world_sizes"], rule["max_message_mib"], "custom all-reduce"
    sizes = f"{world_sizes[0]} to {world_sizes[-1]}" if len(world_sizes) > 4 else \
        ", ".join(str(s) for s in world_sizes[:-1]) + f" and {world_sizes[-1]}"
    if tp not in world_sizes:
        return result("nccl", "sglang", f"{tp} GPUs, a size it does not support",
                      f"SGLang runs its {kind} at {sizes} GPUs only; at {tp} it switches it off and {nccl_all}.")
    if tp > rule["pcie_max_ranks"] and mesh is False:
        return result("nccl", "sglang", f"{tp} GPUs without an NVLink mesh",
                      f"Above {rule['pcie_max_ranks']} GPUs SGLang runs its custom all-reduce only when NVLink "
                      f"connects every pair; these {tp} GPUs talk over PCIe, so it switches it off and {nccl_all}, "
                      "whatever P2P can do.")
    if mesh is None and (tp > rule["pcie_max_ranks"] or (v2 and not v2["pcie_fallback"])):
        return result(None, None, "custom all-reduce or NCCL, as SGLang finds the NVLink mesh (unknown here)",
                      "SGLang needs NVLink between every pair for this; whether these have it is unknown (the audit "
                      "shows no NVLink status for every pair), so only SGLang's own NVML check at start-up will "
                      "tell between its custom all-reduce and NCCL.")
    if mesh is None and v2:
        cap_text = f"{rule['max_message_mib']} MiB ({v2['max_message_mib']} MiB with its v2 if NVLink connects them)"
    else:
        cap_text = f"{cap} MiB"
    link = "over NVLink" if mesh is True else f"between the {tp} GPUs"
    small = f"for messages up to {cap_text} (NCCL above)"
    if check == "cuda_ipc":
        if p2p == "proven":
            return result("custom", None, "P2P proven",
                          f"Custom all-reduce {link} {small}: {P2P_CHECK} tests CUDA IPC at start-up, and the probe "
                          "proved P2P between these GPUs.")
        if p2p == "none":
            return result("nccl", "sglang", "its P2P check fails without P2P",
                          f"{P2P_CHECK} tests CUDA IPC at start-up; without P2P the test fails, SGLang switches its "
                          f"custom all-reduce off and {nccl_all}.")
        return result(None, None, f"custom all-reduce if SGLang's own P2P check passes ({P2P_CHECK}), NCCL otherwise",
                      f"{P2P_CHECK}: SGLang tests CUDA IPC between the GPUs at start-up and runs its custom "
                      f"all-reduce {link} {small} only if that works, NCCL otherwise.")
    if check == "driver":
        if p2p in ("proven", "claimed"):
            proof = "proven by the probe" if p2p == "proven" else "as the driver claims it"
            return result("custom", None, "P2P proven" if p2p == "proven" else "P2P claimed by the driver",
                          f"Custom all-reduce {link} {small}: {SKIP_P2P_CHECK}=1 makes SGLang ask the driver, which "
                          f"grants P2P ({proof}).")
        if p2p == "none":
            return result("nccl", "sglang", "the driver grants no P2P",
                          f"{SKIP_P2P_CHECK}=1 makes SGLang ask the driver, which grants no P2P between these GPUs: "
                          f"SGLang switches its custom all-reduce off and {nccl_all}.")
        return result(None, None, "custom all-reduce if the driver grants P2P, NCCL otherwise",
                      f"{SKIP_P2P_CHECK}=1 makes SGLang ask the driver at start-up; the P2P status of these GPUs is "
                      "unknown here, so only that answer will tell between its custom all-reduce and NCCL.")
    assumed = (f"Without {P2P_CHECK} SGLang asks nobody: it replaces its P2P check with one that always says yes "
               "and sets up its custom all-reduce over CUDA IPC")
    if p2p == "proven":
        return result("custom", None, "P2P proven",
                      f"Custom all-reduce {link} {small}. {assumed}; the probe proved P2P between these GPUs.")
    if p2p == "claimed":
        return result("custom", None, "P2P assumed by SGLang, claimed by the driver, proven by nobody",
                      f"Custom all-reduce {link} {small}. {assumed}; the driver claims P2P, nobody proved it, and "
                      "if it does not carry data the all-reduce fails or returns wrong sums.")
    if p2p == "none":
        return result("custom", None, "custom all-reduce tried without P2P (SGLang assumes it)",
                      f"{assumed}, although the driver grants no P2P between these GPUs: the server fails at start-up "
                      f"or in its first all-reduce instead of falling back to NCCL (sgl-project/sglang#4814). Set "
                      f"{DISABLE}.")
    return result("custom", None, "custom all-reduce on assumed P2P (unknown here)",
                  f"{assumed}; the P2P status of these GPUs is unknown here, so nothing tells whether it will work.")
