"""Which GPUs the model runs on: those it can use, the tensor-parallel size, and the group of that size.

The smallest power-of-two size (at least ``min_gpus``, dividing the attention heads when given) whose
GPUs hold the weights plus KV cache plus headroom; among the groups of that size, the best by
placement.group_key (fewest pairs without P2P, most proven pairs, fewest NUMA nodes, shortest
topology distance). When no group fits, the reason goes into the Decision as a blocking reason.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import text
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import versions
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.decision import Decision
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import DeployModel, Gpu, Host
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.placement import (
    Fit,
    candidate_groups,
    group_key,
    memory_fit,
)


def _eligible(host: Host, deploy: DeployModel, accepted: frozenset[str]) -> tuple[list[Gpu], dict[str, Any]]:
    """GPUs the model can run on, and the ones left out with why."""
    if deploy.min_compute_capability is None:
        return list(host.gpus), {}
    minimum = deploy.min_compute_capability
    too_old = [g for g in host.gpus if g.cc is not None and g.cc < minimum]
    unknown = [g for g in host.gpus if g.cc is None]
    eligible = [g for g in host.gpus if g.cc is not None and g.cc >= minimum]
    if unknown and "compute_capability_unknown" in accepted:
        eligible = sorted(eligible + unknown, key=lambda g: g.index)
        unknown = []
    excluded = {"minimum": versions.cc_text(minimum),
                "too_old": {f"GPU{g.index}": versions.cc_text(g.cc) for g in too_old},
                "unknown": [f"GPU{g.index}" for g in unknown]}
    return eligible, excluded if too_old or unknown else {}


def _tp_sizes(deploy: DeployModel, count: int) -> list[int]:
    """Tensor-parallel sizes to try, smallest first."""
    if deploy.tensor_parallel_size is not None:
        return [deploy.tensor_parallel_size]
    sizes = []
    size = 1
    while size <= count:
        if size >= deploy.min_gpus and (deploy.attention_heads is None or deploy.attention_heads % size == 0):
            sizes.append(size)
        size *= 2
    return sizes


def choose_group(out: Decision, host: Host, deploy: DeployModel, proof: dict[tuple[int, int], bool],
                 accepted: frozenset[str]) -> tuple[tuple[Gpu, ...] | None, Fit | None]:
    if not host.gpus:
        detail = (f"{host.vfio_bound} NVIDIA GPU(s) are bound to vfio-pci (a hypervisor passing them to VMs)"
                  if host.vfio_bound else
                  f"the PCI bus shows {host.pci_gpu_count} NVIDIA GPU(s) but no driver reports any"
                  if host.pci_gpu_count else "neither the PCI bus nor the driver shows an NVIDIA GPU")
        out.block("no_usable_gpu", f"No GPU this host can use: {detail}.",
                  {"pci_nvidia_gpus": host.pci_gpu_count, "vfio_bound": host.vfio_bound,
                   "virtualization": host.virtualization})
        return None, None
    eligible, excluded = _eligible(host, deploy, accepted)
    wanted = deploy.tensor_parallel_size or deploy.min_gpus
    if len(eligible) < wanted:
        if excluded.get("too_old"):
            out.block("compute_capability_too_low",
                      f"{deploy.label} needs compute capability {excluded['minimum']} or higher on {wanted} GPU(s); "
                      f"{len(eligible)} of this host's {len(host.gpus)} GPUs have it.", excluded)
        if excluded.get("unknown"):
            out.block("compute_capability_unknown",
                      f"The compute capability of {', '.join(excluded['unknown'])} is unknown, so the gate cannot "
                      f"tell whether they meet {excluded['minimum']}.", excluded)
        if len(host.gpus) < wanted:
            key = "tensor_parallel_unsatisfiable" if deploy.tensor_parallel_size else "not_enough_gpus"
            ask = (f"tensor_parallel_size {deploy.tensor_parallel_size}" if deploy.tensor_parallel_size
                   else f"min_gpus {deploy.min_gpus}")
            out.block(key, f"{deploy.label} asks for {ask}; this host has {len(eligible)} usable GPU(s).",
                      {"requested": wanted, "usable_gpus": [g.index for g in eligible]})
        return None, None
    if deploy.tensor_parallel_size is not None:
        size = deploy.tensor_parallel_size
        if size < deploy.min_gpus:
            out.block("tensor_parallel_unsatisfiable",
                      f"tensor_parallel_size {size} is below the model's min_gpus {deploy.min_gpus}.",
                      {"tensor_parallel_size": size, "min_gpus": deploy.min_gpus},
                      remedy=text("tensor_parallel_unsatisfiable", "below_min_gpus"))
            return None, None
        if deploy.attention_heads is not None and deploy.attention_heads % size:
            out.block("tensor_parallel_unsatisfiable",
                      f"tensor_parallel_size {size} does not divide the model's {deploy.attention_heads} attention "
                      "heads; SGLang refuses to start.",
                      {"tensor_parallel_size": size, "attention_heads": deploy.attention_heads},
                      remedy=text("tensor_parallel_unsatisfiable", "heads"))
            return None, None
    sizes = _tp_sizes(deploy, len(eligible))
    if not sizes:
        out.block("tensor_parallel_unsatisfiable",
                  f"No power-of-two tensor-parallel size between min_gpus {deploy.min_gpus} and the "
                  f"{len(eligible)} usable GPUs" + (f" divides the {deploy.attention_heads} attention heads"
                                                    if deploy.attention_heads else "") + ".",
                  {"min_gpus": deploy.min_gpus, "usable_gpus": len(eligible),
                   "attention_heads": deploy.attention_heads},
                  remedy=text("tensor_parallel_unsatisfiable", "no_size"))
        return None, None
    if deploy.weights_gib is None:
        sizes = sizes[-1:]
        out.notes.append(f"{deploy.label} gives neither weights_gib nor params_b, so memory could not be checked: "
                         f"tensor-parallel size {sizes[0]}, the largest that suits the host, leaves the most room.")
    elif deploy.weights_estimated:
        out.notes.append(f"weights estimated from params_b at {deploy.bytes_per_param:g} bytes per parameter "
                         f"(bytes_per_param): {deploy.weights_gib:.1f} GiB; give weights_gib (the size of the "
                         "checkpoint) for a measured figure.")
    tried: tuple[tuple[Gpu, ...], Fit] | None = None
    for size in sizes:
        groups = candidate_groups(eligible, size, host, proof)
        fitting = [(g, memory_fit(deploy, g)) for g in groups]
        fitting = [(g, f) for g, f in fitting if f.fits]
        if fitting:
            group, fit = min(fitting, key=lambda gf: group_key(host, proof, gf[0]))
            if excluded:
                out.notes.append(f"GPUs left out for their compute capability: {excluded}")
            return group, fit
        best = min(groups, key=lambda g: group_key(host, proof, g)) if groups else None
        if best is not None:
            tried = (best, memory_fit(deploy, best))
    evidence: dict[str, Any] = {"weights_gib": round(deploy.weights_gib or 0, 2), "sizes_tried": sizes,
                                "weights_estimated": deploy.weights_estimated}
    if tried:
        evidence.update({"largest_group": [g.index for g in tried[0]], **tried[1].as_dict()})
    need = evidence.get("need_gib_per_gpu")
    have = evidence.get("have_gib_per_gpu")
    out.block("not_enough_gpu_memory",
              f"{deploy.label} does not fit: at tensor-parallel size {sizes[-1]} each GPU would need "
              f"{need if need is not None else 'an unknown amount of'} GiB (weights, KV cache, headroom) and has "
              f"{have if have is not None else 'an unknown amount of'} GiB.",
              evidence)
    return None, None
