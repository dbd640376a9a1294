"""What a host's verdict judges, said under it, from the facts the verdict was made of.

The verdict is "unfit" as soon as one finding is critical (findings/finding.py), whatever the finding is
about. Two readings then surprise: a Proxmox node whose GPUs all belong to guests is unfit for a VM's
config, not for anything it serves itself; and a host whose only critical findings are about traffic
between GPUs (the P2P and NUMA rules judge every pair of the tensor-parallel group, by default all GPUs)
is unfit for tensor parallelism while the deployment gate passes a model that fits one GPU, because at
TP1 it sets those findings aside (gate/triage.py). The scope line says which reading applies.

Material may hold two hosts: a guest's outputs with its VM's config, and its Proxmox node's own outputs, which
material/node_outputs.py sets apart (the material's ``node_outputs``). The verdict is then the guest's alone, and
``two_hosts`` says so in one sentence: the material's warning, and the line under the scope line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import MULTI_GPU_CATEGORIES, category_of
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict, as_list


@dataclass(frozen=True)
class Scope:
    line: str  # a sentence or two, for the host's report
    short: str  # a few words, for the fleet table
    two_hosts: str | None = None  # the material held the guest's node too, set apart: two_hosts()


def two_hosts(node_outputs: list[str]) -> str:
    """What a guest's verdict judges when its material also held its Proxmox node's own outputs (their input names),
    and what to do for the node."""
    return (f"Two hosts in the material: the guest is judged here, with the config of the VM it runs in; its Proxmox "
            f"node's own outputs ({', '.join(node_outputs)}) are set apart, not used. To judge the node, put them in a "
            "directory of their own and analyse it as an input of its own (make analyze INPUT=pve-node/).")


def _gpus(count: int) -> str:
    return f"{count} GPU" + ("" if count == 1 else "s")


def _tp_group(findings: list[dict[str, Any]]) -> list[str] | None:
    """The group the P2P rule judged, as its finding names it; None when no finding names it."""
    for finding in findings:
        group = as_dict(finding.get("evidence")).get("group") if finding.get("id") == "p2p_not_supported" else None
        if isinstance(group, list) and group and all(isinstance(g, str) for g in group):
            return group
    return None


def verdict_scope(facts: dict[str, Any]) -> Scope | None:
    """The scope of the host's verdict; None for facts too old or too thin to tell (no summary)."""
    scope = _scope(facts)
    node_outputs = [str(name) for name in as_list(as_dict(facts.get("material")).get("node_outputs"))]
    if scope is None or not node_outputs:
        return scope
    return Scope(scope.line, f"{scope.short}; the guest only, its node set apart", two_hosts(node_outputs))


def _scope(facts: dict[str, Any]) -> Scope | None:
    summary = as_dict(facts.get("summary"))
    if not summary:
        return None
    findings = [f for f in as_list(facts.get("findings")) if isinstance(f, dict)]
    pci_gpus = [d for d in as_list(as_dict(facts.get("pci")).get("nvidia_devices"))
                if isinstance(d, dict) and d.get("kind") == "gpu"]
    vfio = sum(1 for d in pci_gpus if d.get("driver") == "vfio-pci")
    # The GPUs the driver lists; None in a report that does not say (older, or written by hand).
    devices = as_dict(facts.get("gpus")).get("devices")
    driven = len(devices) if isinstance(devices, list) else None
    if "gpus" in as_list(facts.get("not_seen")):
        driven = None  # audited from material that held no GPU list: an empty one says nothing
    proxmox = as_dict(facts.get("proxmox"))
    # VM configs that came in material without their node (proxmox.node_evidence None) are the config of the VM this
    # guest runs in, not this host's VMs: "node_evidence" absent is a report from before it was recorded, a node.
    given = bool(proxmox) and "node_evidence" in proxmox and proxmox.get("node_evidence") is None
    if given:
        count = len(as_list(proxmox.get("vms")))
        given_line = (f" The config of the VM it runs in came with the material ({count} VM config(s) without their "
                      "Proxmox node) and is judged with it.")
        proxmox = {}
    vms = f"the configs of its {len(as_list(proxmox.get('vms')))} VM(s) that pass devices through"
    if (vfio or proxmox) and not driven:
        held = f": its {_gpus(vfio)} {'is' if vfio == 1 else 'are'} bound to vfio-pci for guests" if vfio else ""
        return Scope(f"judged as a hypervisor{held}, so the verdict covers the passthrough setup"
                     + (f" and {vms}" if proxmox else "") + ". Serving fitness is judged in each guest's own "
                     "audit, and per model by the deployment gate.", "hypervisor")
    gpu_count = summary.get("gpu_count") if isinstance(summary.get("gpu_count"), int) else 0
    count = driven or gpu_count
    if not count:
        return Scope("judged as a host to serve models on its own GPUs: the audit found none.", "no GPU")
    if driven == 0:
        # The rules judge the GPUs the driver lists (views.tp_group): with none, no pair was judged.
        line, short = (f"judged as a host to serve models on its {_gpus(count)}, which the driver cannot use now: "
                       "no GPU pair could be judged for tensor parallelism.", "GPUs unusable")
    elif count == 1:
        line, short = ("judged for serving on its one GPU: no tensor parallelism, so GPU peer-to-peer does not "
                       "apply.", "one GPU")
    else:
        group = _tp_group(findings)
        # A GPU the driver lost is on the bus but not in the driver's list, and so in no group.
        listed = f"the {count} GPUs the driver lists" if count < len(pci_gpus) else f"its {count} GPUs"
        if group is None:
            over = f"{listed} (all of them unless gpu_audit_tensor_parallel_gpus named a group)"
            short = f"TP over {count} GPUs"
        elif len(group) == count:
            over = "both GPUs" if count == 2 else f"all {listed.replace('its ', '')}"
            short = "TP over both GPUs" if count == 2 else f"TP over all {count} GPUs"
        else:
            over = f"{', '.join(group)} ({len(group)} of {count} GPUs: the group the audit was given)"
            short = f"TP over {len(group)} of {count} GPUs"
        line = f"judged for tensor parallelism over {over}: the P2P and NUMA rules judge every pair of that group."
        critical = sorted({str(f.get("id")) for f in findings if f.get("severity") == "critical"})
        if critical and all(category_of(fid) in MULTI_GPU_CATEGORIES for fid in critical):
            line += (f" Every critical finding ({', '.join(critical)}) is about traffic between GPUs, which a model "
                     "that fits one GPU (TP1) does not have: the deployment gate judges each model at its own "
                     "tensor-parallel size.")
    if vfio:
        line += f" Besides, {_gpus(vfio)} {'is' if vfio == 1 else 'are'} bound to vfio-pci for guests."
    if proxmox:
        line += f" As a Proxmox node, {vms} are judged too."
    if given:
        line += given_line
    if summary.get("verdict") == "not judged":
        line += (" The material did not show everything those rules read (see \"Material\"), so the "
                 "verdict is \"not judged\", not fit: audit the host itself to judge it.")
    return Scope(line, short)
