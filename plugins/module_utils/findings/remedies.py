"""Remedy texts that several findings share, written once.

The catalog (catalog.py) refers to these; nothing else holds remedy prose.
"""

from __future__ import annotations

# What NCCL going through host memory looks like, and the fix: shared by every benchmark
# finding whose cause is missing GPU peer-to-peer.
P2P_HOST_MEMORY = (
    "This is the signature of NCCL going through host memory instead of GPU peer-to-peer. See the audit's "
    "p2p_not_supported finding (gpu_host_facts) for why P2P is missing on this host. In a Proxmox/QEMU guest: "
    "machine q35, each GPU passed as its own function (hostpciN: 0000:41:00.0,pcie=1), no hidden=1, and "
    "`args: -set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0 ...` "
    "for the GPUs of one tensor-parallel group; then re-run this benchmark. If P2P cannot be had: set "
    "NCCL_P2P_DISABLE=1 explicitly, start SGLang with --disable-custom-all-reduce, and prefer fewer GPUs per "
    "tensor-parallel group on one NUMA node, or bare metal.")

# Why a bare-metal pair has no P2P, by the status nvidia-smi topo -p2p prints.
P2P_CAUSES_BARE_METAL = {
    "CNS": "the chipset/root complex does not allow P2P between these GPUs (often: GPUs on different "
           "CPU sockets, or ACS redirect forcing traffic through the root complex)",
    "GNS": "the GPU model does not support P2P (most GeForce cards) or the driver disabled it",
    "TNS": "the PCIe topology between these GPUs does not support P2P (e.g. across CPU sockets)",
    "DR": "P2P is disabled by a driver registry key (NVreg_RegistryDwords)",
    "NS": "P2P is not supported on this path",
    "U": "the driver could not tell",
    # An NCCL INFO log's refusal (material/nccl_transports.py): NCCL asked CUDA or NVML and was told no.
    "refused": "NCCL was refused P2P between these GPUs (cudaDeviceCanAccessPeer said no, or NVML's P2P read/write "
               "status is not OK); `nvidia-smi topo -p2p r` shows the driver's status per pair",
}

# How a staged `qm set` takes effect: said after every list of Proxmox commands.
QM_SET_PENDING = "(`qm set` on a running VM lands in [PENDING]; stop and start it from the host to apply)"

# The gate's last line under a blocking finding that the user may accept.
GATE_ACCEPT_HINT = "To deploy anyway, accept {id}."


def proxmox_clique_fix(gpu_count: int) -> str:
    """The host-side fix for P2P in a Proxmox guest, written out for this many GPUs."""
    count = max(gpu_count, 2)
    sets = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(count))
    hostpci = "\n".join(f"  hostpci{n}: 0000:BB:00.0,pcie=1" for n in range(min(count, 2)))
    return (
        "On the Proxmox host, in /etc/pve/qemu-server/<vmid>.conf (or with `qm set`):\n"
        "  machine: q35\n"
        f"{hostpci}\n"
        "  (one line per GPU; name the .0 function explicitly, and remove `hidden=1`: it sets kvm=off\n"
        "   and the guest driver then ignores the clique)\n"
        f"  args: {sets}\n"
        "Then stop and start the VM from the host (a reboot inside the guest keeps the old QEMU)\n"
        "and audit again: `nvidia-smi topo -p2p r` should say OK. Reported effect: small-message\n"
        "latency from 12-15 us down to 1.0-1.4 us.\n"
        "Until then, run without P2P on purpose: NCCL_P2P_DISABLE=1, SGLang --disable-custom-all-reduce,\n"
        "and fewer GPUs per tensor-parallel group."
    )


# Where a VM's findings share its restart: each remedy gives its own commands, the report the whole fix once.
QM_RESTART_ONCE = ("Then stop and start VM {vmid} once, after the commands of all its findings: the report's "
                   "\"Fix for VM {vmid}\" (under Proxmox VMs) lists them all with the one restart.")


def proxmox_commands(commands: list[str], restart: str, shared_with: int = 0, vmid: int | None = None) -> str:
    """Commands to run on the Proxmox host, then the restart that applies them; with ``shared_with`` other findings
    of the same VM calling for commands, a pointer to the VM's whole fix instead of a restart of its own."""
    if not commands:
        return ""
    if shared_with:
        return "\n".join(["On the Proxmox host:", *(f"  {c}" for c in commands), QM_RESTART_ONCE.format(vmid=vmid)])
    return "\n".join(["On the Proxmox host:", *(f"  {c}" for c in commands), f"  {restart}", QM_SET_PENDING])
