"""The findings catalog: every finding id the project raises, in one table.

Longer than 500 lines because it is one table: each entry holds the id, its category,
the severity it is raised at (and any other the situation may call for), a one-line
title (the README's findings table is generated from these) and the remedy text, with
``{field}`` slots that the rule fills from what it saw. Remedies that several entries
share are written once in remedies.py. As in DCGM's error catalog, ids are only ever
added; an id that is no longer raised stays, marked ``retired`` with the reason.

Findings are made only through ``make``: the audit rules, the benchmark judges, the
report (a benchmark step that could not run) and the gate's own blocking reasons.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.actions import (
    ACTION_RANK,
    ACTIONS,
    CRITICAL_AT_LEAST,
    most_disruptive,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import SEVERITIES, Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.health_limits import (
    AER_CORRECTABLE_LIMIT,
    ECC_UNCORRECTED_AGGREGATE_LIMIT,
    ECC_UNCORRECTED_VOLATILE_LIMIT,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.remedies import GATE_ACCEPT_HINT, P2P_HOST_MEMORY

CATEGORIES = MappingProxyType({
    "gpu": "the GPUs and their driver as the host sees them",
    "health": "GPU health: Xid errors, ECC and memory repairs, clocks held back, PCIe errors, the NVSwitch fabric",
    "p2p": "GPU peer-to-peer: granted by the driver, proven by the probe, measured",
    "pci": "PCIe links, BARs and ACS between the GPUs",
    "iommu": "IOMMU groups and passthrough isolation",
    "virtualization": "what a guest's virtual machine gives its GPUs",
    "proxmox": "a Proxmox VE host: its VM configs and passthrough setup",
    "nccl": "collectives between the GPUs (NCCL, nccl-tests, torch)",
    "bench": "the benchmark phase itself and what its numbers cost a model",
    "gate": "the deployment gate's own reasons",
    "audit": "the audit itself: what it could not read or judge",
})
# Categories of findings about collectives between GPUs, moot when one GPU serves alone: the gate
# resolves them at tensor-parallel size 1, and the report's scope line says when they are all a host's
# critical findings.
MULTI_GPU_CATEGORIES = frozenset({"nccl", "p2p"})


class CatalogError(ValueError):
    """A finding made against the catalog's table: unknown id, severity or remedy field."""


@dataclass(frozen=True)
class Entry:
    id: str
    category: str
    severity: str
    title: str
    remedy: str = ""
    also: tuple[str, ...] = ()  # other severities the situation may call for
    texts: Mapping[str, str] = field(default_factory=dict)  # other remedy texts, by situation
    retired: str = ""  # why it is no longer raised; retired ids stay in the table
    renamed_to: str = ""  # a retired id's successor: the id that is raised for the same thing now

    @property
    def severities(self) -> tuple[str, ...]:
        return (self.severity, *self.also)

    def severity_text(self) -> str:
        return self.severity + (f" (or {', '.join(self.also)})" if self.also else "")


def _entries(*entries: Entry) -> Mapping[str, Entry]:
    table: dict[str, Entry] = {}
    for entry in entries:
        if entry.id in table:
            raise CatalogError(f"finding id {entry.id!r} is in the catalog twice")
        table[entry.id] = entry
    return MappingProxyType(table)


CATALOG = _entries(
    # ---- the GPUs and their driver -------------------------------------------------------
    Entry("no_nvidia_gpu", "gpu", "critical", "no NVIDIA GPU on the PCI bus or through NVML",
          "If this host should have GPUs: `lspci -nn -d 10de:` on it lists what the bus sees. In a VM, the GPUs "
          "must be passed through on the hypervisor (Proxmox: `qm set <vmid> --hostpci0 0000:BB:00.0,pcie=1`). "
          "If this host is a controller or has no GPUs by design, nothing is wrong."),
    Entry("nvidia_driver_not_loaded", "gpu", "critical", "GPUs on the bus, no driver bound, NVML sees none",
          "Install the NVIDIA driver (the nvidia_driver role of this project: open kernel modules, branch 570 or "
          "newer for Blackwell) and reboot; `nvidia-smi` must then list every GPU."),
    Entry("nouveau_loaded", "gpu", "critical", "nouveau holds the GPUs",
          "Blacklist it: /etc/modprobe.d/blacklist-nouveau.conf with `blacklist nouveau` and "
          "`options nouveau modeset=0`, then `update-initramfs -u` and reboot (the nvidia_driver role does this)."),
    Entry("gpu_count_mismatch", "gpu", "critical", "PCI, NVML and nvidia-smi count differently",
          "Look for Xid errors: `dmesg | grep -i -e NVRM -e Xid`. A GPU that fell off the bus needs a cold reboot; "
          "one that keeps failing, reseating or RMA. In a VM, compare the guest's GPUs with the hostpci lines of "
          "the VM config."),
    Entry("uvm_hmm_enabled", "gpu", "warning",
          "nvidia_uvm allows HMM (uvm_disable_hmm=N) on a host with PCIe Blackwell GPUs",
          "Turn HMM off in nvidia_uvm: put `options nvidia_uvm uvm_disable_hmm=1` in "
          "/etc/modprobe.d/nvidia-uvm.conf, run `update-initramfs -u`, then reboot (or stop every CUDA process and "
          "`modprobe -r nvidia_uvm && modprobe nvidia_uvm`); `cat /sys/module/nvidia_uvm/parameters/uvm_disable_hmm` "
          "must then print Y. With HMM on, CUDA initialisation has failed on some kernels "
          "(NVIDIA/open-gpu-kernel-modules#901) and nvidia_uvm has deadlocked servicing faults on Blackwell, "
          "leaving a process no signal kills and a GPU no reset frees, until a reboot (#1223). HMM only serves "
          "programs that hand the GPU plain malloc'd memory (#338); PyTorch and SGLang allocate through CUDA."),
    Entry("pcie_aspm_not_off", "pci", "info",
          "PCIe ASPM not turned off (pcie_aspm=off) on a host with PCIe Blackwell GPUs",
          "Add `pcie_aspm=off` to the kernel command line (/etc/default/grub's GRUB_CMDLINE_LINUX_DEFAULT then "
          "`update-grub`, or /etc/kernel/cmdline then `proxmox-boot-tool refresh`) and reboot; /proc/cmdline then "
          "holds it. Owners of RTX PRO 6000 and RTX 5090 hosts boot with it so that link power states add no exit "
          "latency to small transfers; it costs a few watts at idle. Leave it as it is if the firmware already "
          "disables ASPM (dmesg says so at boot)."),
    Entry("gpu_packages_not_held", "gpu", "warning",
          "unattended-upgrades is on and NVIDIA driver, CUDA or NCCL packages are neither held nor blacklisted",
          "Hold them: `apt-mark hold {names}` (`apt-mark unhold` them to upgrade on purpose: driver and fabric "
          "manager together, then a reboot and a new audit), or list them in Unattended-Upgrade::Package-Blacklist "
          "in /etc/apt/apt.conf.d/50unattended-upgrades (`\"nvidia-\"; \"libnvidia-\"; \"cuda-\"; \"libnccl\";`). "
          "Upgraded under a loaded driver they leave 'Driver/library version mismatch' until a reboot "
          "(gpu_driver_library_mismatch), and a fabric manager upgraded apart from the driver refuses to start. "
          "Packages from an origin unattended-upgrades does not allow are not moved by it; the origins were not "
          "read, so they are listed too."),
    Entry("gpus_bound_to_vfio", "gpu", "info", "a hypervisor holding GPUs for its guests",
          "Nothing to do on a hypervisor. To serve from this host instead, unbind them from vfio-pci "
          "(remove their ids from vfio-pci.ids / modprobe.d) and install the NVIDIA driver."),
    Entry("persistence_mode_off", "gpu", "info", "nvidia-persistenced not running",
          "Enable the daemon: `systemctl enable --now nvidia-persistenced` (the nvidia_driver role does this)."),
    Entry("nvml_unavailable", "gpu", "info", "facts came from nvidia-smi",
          "Install nvidia-ml-py for the interpreter that runs the audit (for example the serving venv, set as "
          "ansible_python_interpreter) to get every field."),
    Entry("gpu_driver_library_mismatch", "gpu", "critical",
          "GPUs bound to nvidia, but NVML says LibRmVersionMismatch / nvidia-smi exits 18 (Driver/library version "
          "mismatch): a driver upgraded without a reboot",
          "Reboot, or reload the kernel modules (rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia) "
          "after stopping every process that holds them (the serving service, nvidia-persistenced, "
          "nvidia-fabricmanager, a display manager). Then `nvidia-smi` must list every GPU and "
          "`cat /sys/module/nvidia/version` must equal its driver version; if they still differ, two driver installs "
          "are mixed (distribution packages and a .run file, or a stale DKMS module): remove one."),
    Entry("gpus_unusable", "gpu", "critical",
          "GPUs bound to nvidia, but neither NVML nor nvidia-smi can use one; the cause named",
          "Run `nvidia-smi` by hand and read its message, and `dmesg | grep -e NVRM -e Xid`; reboot if the driver "
          "logged a failure.",
          texts={
              "no_permission": "Run the audit as root (`become: true`) or give its user access to /dev/nvidia*; in a "
                               "container, pass the GPUs in (NVIDIA container toolkit, `--gpus all`).",
              "driver_not_answering": "Read `dmesg | grep -e NVRM -e nvidia` for why the driver failed; check that "
                                      "/dev/nvidiactl exists (`nvidia-modprobe -c0 -u` creates the device files) "
                                      "and, in a container, that the devices are passed in. Reboot if the driver "
                                      "logged a failure.",
              "user_space_missing": "Install the driver's user-space part (libnvidia-ml.so, nvidia-smi) of the same "
                                    "version as the kernel module (`cat /sys/module/nvidia/version`); the "
                                    "nvidia_driver role installs both. `nvidia-smi` must then list every GPU.",
              "not_verifiable": "Install nvidia-ml-py for the interpreter that runs the audit, or the driver's "
                                "nvidia-smi, and audit again: until one of them answers nothing shows that these "
                                "GPUs work. For a capture, record it again with playbooks/capture.yml on the host.",
              "hung": "Read `dmesg | grep -e NVRM -e Xid`; a wedged GPU needs a reset (`nvidia-smi -r`) or a reboot.",
              "gpu_lost": "See gpu_lost: power-cycle the machine, then find why the GPU fell off the bus.",
              "no_devices": "Read `dmesg | grep NVRM` for 'RmInitAdapter failed' or probe errors: a GPU this driver "
                            "branch does not support (Blackwell needs the open kernel modules), too little MMIO "
                            "space (enable Above 4G decoding), or a firmware problem.",
          }),
    Entry("nvidia_driver_not_binding", "gpu", "critical",
          "the nvidia module is loaded but GPUs on the bus have no driver (warning while others work)",
          "Read `dmesg | grep -e NVRM -e nvidia` for why the driver refused them: 'The NVIDIA probe routine failed', "
          "'RmInitAdapter failed', or 'not supported by the NVIDIA <version> driver' (Blackwell GPUs need the open "
          "kernel modules, old GPUs a legacy branch). Install a driver branch that supports them (the nvidia_driver "
          "role) and reboot; `nvidia-smi` must then list every GPU.",
          also=("warning",)),
    Entry("gpu_lost", "gpu", "critical",
          "a GPU fell off the bus: NVML GpuIsLost, nvidia-smi 'GPU is lost', or Xid 79 in the kernel log",
          "Drain the host and power-cycle it (a warm reboot often does not bring the GPU back); `nvidia-smi` must "
          "then list every GPU. Then find why: power (cables, supply capacity under load), seating and risers, "
          "temperature, the PCIe AER errors of its port (pcie_aer_errors). In a VM, read the hypervisor's kernel "
          "log for the GPU (AER, reset failures). A GPU that falls off again needs RMA."),
    Entry("gpu_handle_failed", "gpu", "critical", "NVML counts a GPU it cannot open (other than a lost GPU)",
          "By GPU: {causes}. Fix what each names and audit again; read `dmesg | grep -e NVRM -e Xid` for the "
          "driver's side."),

    Entry("gpu_gone", "gpu", "critical", "a GPU the previous report listed is gone (drift between audits)",
          "Find why the driver no longer lists it: `nvidia-smi` and `lspci -nn -d 10de:` on the host, and "
          "`dmesg | grep -e NVRM -e Xid` (a GPU that fell off the bus: see gpu_lost; power-cycle, then reseat it or "
          "check its riser, power cable and slot). In a VM, check the hostpci lines of its config on the hypervisor. "
          "If the GPU was taken out on purpose, remove this host's report (<report dir>/<host>.json, its last "
          "benchmark with it) so that the next audit takes the GPUs it sees as the new baseline."),
    Entry("gpu_vbios_mismatch", "gpu", "warning", "GPUs of one model run different VBIOS versions",
          "Bring every GPU of the model to one VBIOS, the newest the server vendor (or NVIDIA, for its own boards) "
          "publishes for it, in a maintenance window: the vendor's firmware update tool, or nvflash where the "
          "vendor allows it; then a cold reboot. `nvidia-smi --query-gpu=index,name,vbios_version --format=csv` "
          "lists them. Until then, read a failure on the odd GPU(s) with their VBIOS in mind."),
    Entry("fleet_vbios_mismatch", "gpu", "warning",
          "hosts of one manifest class run different VBIOS versions of one GPU model",
          "Bring the class to one VBIOS of the {model}: the newest its server vendor (or NVIDIA, for its own boards) "
          "publishes, with the vendor's firmware tool in a maintenance window and a cold reboot; then list the "
          "version in the class's manifest (vbios_versions) so that a host that drifts is told. The finding names "
          "every host and version of the class audited in this run; until they agree, read a failure on the odd "
          "host with its VBIOS in mind."),
    Entry("fleet_driver_mismatch", "gpu", "warning",
          "hosts of one manifest class run different NVIDIA driver versions",
          "Install one driver version on every host of the class (nvidia_driver_version of the nvidia_driver role, set "
          "in the class's group_vars, and the packages held so that unattended upgrades cannot move one host), "
          "reboot each, and set gpus.driver_version in the class's manifest. The finding names every host and "
          "version of the class audited in this run."),
    Entry("gpu_added", "gpu", "info", "a GPU the previous report did not list (drift between audits)",
          "Nothing is wrong if it was added on purpose. A P2P proof or benchmark measured before does not cover it: "
          "run playbooks/bench.yml on this host to prove P2P and measure again with every GPU."),

    # ---- GPU health ----------------------------------------------------------------------
    Entry("xid_needs_reset", "health", "critical",
          "an Xid this boot that leaves a GPU needing a reset, a reboot or service (48, 62, 64, 74, 95, 119, 120, "
          "154; table in rules/xids.py)",
          "By Xid:\n{actions}\nThe kernel log keeps these lines until the next reboot: after acting, judge by what "
          "comes after the reset (`dmesg --since`) or audit after the reboot."),
    Entry("xid_errors", "health", "warning",
          "an Xid this boot that is usually the application's or recoverable (13, 31, 61, 63, 92, 94, unknown "
          "numbers; info for 43, 45)",
          "By Xid:\n{actions}", also=("info",)),
    Entry("ecc_uncorrectable_errors", "health", "critical",
          f"uncorrectable ECC errors: more than {ECC_UNCORRECTED_VOLATILE_LIMIT} since the driver loaded (critical) "
          f"or more than {ECC_UNCORRECTED_AGGREGATE_LIMIT} in the GPU's life (warning)",
          "Drain the GPU and reset it (`nvidia-smi -r -i <index>`) or reboot, so that the bad memory is retired "
          "or remapped; then check retired pages / row remapping (`nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER`). "
          "A GPU whose errors come back, or whose remapping failed, needs RMA.",
          also=("warning",)),
    Entry("retired_pages_pending", "health", "warning", "memory pages wait for retirement until the GPU is reset",
          "Reset the GPU when it is idle (`nvidia-smi -r -i <index>`) or reboot: the retirement takes effect then. "
          "Many retired pages (NVIDIA's RMA threshold: 60 double-bit or 64 in all) mean RMA."),
    Entry("row_remap_pending", "health", "warning", "a memory row remap waits for a GPU reset",
          "Reset the GPU when it is idle (`nvidia-smi -r -i <index>`, all GPUs of an NVSwitch board together) or "
          "reboot: the remap takes effect then and the GPU is whole again."),
    Entry("row_remap_failed", "health", "critical", "a memory row could not be remapped: no spare row left",
          "Take the GPU out of service: its memory keeps a failing row. This is NVIDIA's RMA condition for "
          "row remapping; file the RMA with `nvidia-bug-report.sh` output."),
    Entry("gpu_clocks_slowdown", "health", "warning",
          "clocks held back by HW slowdown, thermal slowdown or power brake (clocks event reasons)",
          "Check cooling (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`: fans, airflow, inlet temperature) and power "
          "(PSU redundancy, the cables of every GPU, a power-brake signal from the chassis); HW slowdown with "
          "normal temperatures points at the power supply or the board."),
    Entry("pcie_aer_errors", "health", "warning",
          f"PCIe AER errors since boot on a GPU or a port above it: fatal (critical), non-fatal, or "
          f"{AER_CORRECTABLE_LIMIT} or more corrected",
          "Reseat the GPU and its riser or cable, check the slot's PCIe speed setting in the BIOS (force the "
          "generation the path supports), and retimers; `lspci -vvv -s <bdf>` shows the AER status bits. Errors "
          "that come back after reseating mean a bad slot, riser or GPU.",
          also=("critical",)),
    Entry("fabric_manager_inactive", "health", "critical",
          "an NVSwitch host whose nvidia-fabricmanager is not running",
          "`systemctl enable --now nvidia-fabricmanager` (its version must equal the driver's: `nv-fabricmanager "
          "--version`); if it fails, `journalctl -u nvidia-fabricmanager` says why. CUDA starts once it runs."),
    Entry("fabric_manager_version_mismatch", "health", "critical",
          "nvidia-fabricmanager refused to start: it was built for another driver version than the one loaded "
          "(critical); or it runs, but its installed package is of another version than the loaded driver, so its "
          "next start will refuse (warning)",
          "Install the nvidia-fabricmanager package of exactly the loaded driver's version ({driver}; the fabric "
          "manager found is {fabric_manager}), from the same repository as the driver, and hold both "
          "(`apt-mark hold`) so that an unattended upgrade cannot move one without the other; or install the driver "
          "of the fabric manager's version. Then `systemctl restart nvidia-fabricmanager` and audit again.",
          also=("warning",)),
    Entry("nvswitch_sxid_fatal", "health", "critical",
          "an NVSwitch reported a fatal SXid this boot (the driver's own word on the line)",
          "NVIDIA's recovery for a fatal SXid is to reset the GPUs and NVSwitches: drain the host and reboot it "
          "(on an HGX system, a cold reboot), then audit again; SXids that return on the same switch or link after "
          "that go to the system vendor with an nvidia-bug-report.log.gz. Look the code up in the SXid tables of "
          "NVIDIA's Fabric Manager User Guide: {known}"),
    Entry("nvswitch_sxid_errors", "health", "warning",
          "an NVSwitch reported non-fatal SXids, or SXids whose severity no line said",
          "Non-fatal SXids are corrected or contained by the switch; watch whether they grow between audits, and "
          "look the code up in the SXid tables of NVIDIA's Fabric Manager User Guide: {known}. A paste without the "
          "line that says Fatal or Non-fatal hides the severity: read the whole kernel log "
          "(`dmesg | grep SXid`)."),
    Entry("dcgm_diag_failed", "health", "critical",
          "DCGM's diagnostic (dcgmi diag) failed a test on this host",
          "Drain the host and act on DCGM's message for each failed test (the finding lists the test, the GPU "
          "ids and DCGM's error ids; NVIDIA's DCGM diagnostics guide lists each error's meaning and action): "
          "memory or ECC errors mean a GPU reset or RMA, PCIe errors a reseat, a software test a setting or a "
          "driver reinstall. Run `dcgmi diag -r 2` (or 3 on datacenter GPUs) after the fix and audit again."),
    Entry("dcgm_diag_warned", "health", "warning",
          "DCGM's diagnostic (dcgmi diag) warned on a test",
          "Read DCGM's message for each warned test in the finding (with its DCGM error id): most are settings "
          "(persistence mode off: `nvidia-smi -pm 1`, or the nvidia-persistenced service) or a condition that "
          "limits later tests. Fix it and run `dcgmi diag -r 1` again."),
    Entry("dcgm_diag_not_run", "audit", "info",
          "a DCGM diagnostic was asked for or given but gave no verdict (not installed, timed out, stopped, "
          "unreadable)",
          "The finding says why. No verdict is no pass: install DCGM (datacenter-gpu-manager) and start "
          "nv-hostengine, raise gpu_audit_dcgm_diag_timeout, or paste the whole `dcgmi diag -r 1 --json` "
          "output; set gpu_audit_dcgm_diag to false where DCGM is not wanted."),
    Entry("gpu_fabric_not_ready", "health", "critical",
          "NVML says a GPU has not joined the NVLink fabric (state not started or in progress, or an error status)",
          "Check nvidia-fabricmanager (fabric_manager_inactive) and its log, then wait for the state to reach "
          "completed (`nvidia-smi -q | grep -A3 Fabric`); a GPU stuck there needs a reset of the board's GPUs "
          "or a reboot."),

    # ---- GPU peer-to-peer ----------------------------------------------------------------
    Entry("p2p_not_supported", "p2p", "critical",
          "a pair of the tensor-parallel group has no P2P; in a VM with the Proxmox clique remedy written out",
          "Cause by status: {causes}. Keep each tensor-parallel group on GPUs that show OK in "
          "`nvidia-smi topo -p2p r` (and ideally one NUMA node); otherwise run with NCCL_P2P_DISABLE=1 "
          "and SGLang --disable-custom-all-reduce, and expect the host-memory latency floor.",
          texts={
              "vm": "The guest sees QEMU's emulated root ports, which the NVIDIA driver does not trust for P2P; "
                    "the clique option tells it which GPUs may peer.\n{clique_fix}",
              "vm_i440fx": "The VM uses the i440fx machine, which has no PCIe: switch it to q35 first "
                           "(`qm set <vmid> --machine q35`, hostpci lines with pcie=1), then:\n{clique_fix}",
              "gate": "{audit_remedy}\nTo deploy without P2P anyway, add p2p_not_supported to the accepted "
                      "findings: the gate then launches with NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce.",
              "gate_default": "Choose GPUs that show OK in `nvidia-smi topo -p2p r`.",
              # A guest whose VM the audit of its Proxmox host found: the remedy names that VM.
              "host_link": "This guest is {vm} on the Proxmox host {host} (its DMI product_uuid is the VM's "
                           "{matched_by}).",
              "given_link": "This guest runs in {vm}, whose config came with this material.",
              "given_link_run": "Run on the Proxmox node of VM {vmid}:",
              "given_link_assumed": "Assumed, as the material cannot tell: {assumed}. Check with `qm config` and "
                                    "`lspci -nn -D -d 10de:` on the node before running the commands below.",
              "host_link_ambiguous": "Its product_uuid is also the smbios1 uuid of {others}: a cloned VM keeps "
                                     "its uuid, so the uuid alone cannot tell which VM runs this guest. The fix "
                                     "below is for {vm} on {host}, whose config blocks P2P; check that it is the "
                                     "one that runs (`qm status` of each VM on its host), and give each clone a "
                                     "uuid of its own (`qm set` with a new `--smbios1 uuid=`).",
              "host_link_blockers": "The host's audit of that VM says why the guest driver refuses P2P:",
              "host_link_no_blocker": "The host's audit finds nothing in that VM's config that blocks P2P. If the "
                                      "config was changed since the VM started, the running QEMU still has the old "
                                      "one: stop and start it (`qm shutdown {vmid} && qm start {vmid}`). Otherwise "
                                      "check the guest driver (the clique needs a recent NVIDIA driver) and the "
                                      "host's IOMMU groups.",
              "host_link_also": "Also on that VM: {others}.",
              "host_link_run": "Run on {host}:",
              "host_link_restart": "(a reboot inside the guest keeps the old QEMU process: stop and start the VM "
                                   "from the host)",
              "host_link_then": "Then audit this guest again: `nvidia-smi topo -p2p r` should say OK between the "
                                "GPUs.\nUntil then, run without P2P on purpose: NCCL_P2P_DISABLE=1, SGLang "
                                "--disable-custom-all-reduce, and fewer GPUs per tensor-parallel group.",
          }),
    Entry("p2p_capability_not_stated", "p2p", "warning",
          "a pasted topo -p2p matrix whose capability nothing in the material states: its NS cannot be read",
          "Say which capability the matrix is of: paste it with its command line (`$ nvidia-smi topo -p2p r`), or "
          "name the file after it (p2p_read.txt, p2p_write.txt, p2p_nvlink.txt). Better, paste `nvidia-smi topo "
          "-p2p r`, the matrix that decides P2P. Until then: NS under read or write means no GPU peer-to-peer "
          "(every all-reduce through host memory, the incident's case); NS under NVLink is the normal answer of "
          "PCIe cards and says nothing about P2P over PCIe."),
    # Not the p2p_not_supported finding: NCCL uses SHM between GPUs whose P2P works too, by default across host
    # bridges and CPU sockets (NCCL_P2P_LEVEL's default is PXB, src/graph/paths.cc), so SHM alone proves nothing.
    Entry("nccl_log_no_p2p", "p2p", "warning",
          "a pasted NCCL INFO log connects GPUs of one host through SHM or the network, not P2P (info when the "
          "log's environment switched P2P off)",
          "NCCL connects through SHM when the driver refuses P2P (a VM without a clique, the incident's case) and "
          "also, by default, between GPUs under different PCIe host bridges or CPU sockets on hosts whose P2P "
          "works: the log alone cannot tell which. Paste `nvidia-smi topo -p2p r` (OK or NS per pair decides) "
          "and `nvidia-smi topo -m` (PIX/PXB pairs get P2P by default, PHB/NODE/SYS pairs do not).",
          also=("info",),
          texts={"environment": "P2P was switched off on purpose ({setting}): the log says nothing of whether it "
                                "works. Paste `nvidia-smi topo -p2p r`, or a log of a run without that setting."}),
    Entry("consumer_p2p_unproven", "p2p", "warning",
          "P2P granted on GeForce/TITAN GPUs: may be a mirror, prove it",
          "Prove it before serving: run the P2P probe (a write checked at the destination) and a value-checked "
          "all-reduce with a timeout, with NCCL_P2P_DISABLE=1 as the control. If the proof fails, set "
          "NCCL_P2P_DISABLE=1 and SGLang --disable-custom-all-reduce."),
    Entry("p2p_write_not_arriving", "p2p", "critical",
          "the probe's data written into a peer GPU did not arrive intact (a private-mirror P2P window)",
          "Do not use P2P on these GPUs: set NCCL_P2P_DISABLE=1 for the serving processes and start SGLang with "
          "--disable-custom-all-reduce; re-run the probe after a driver change. On consumer GPUs a patched or "
          "unsupported P2P driver is the usual cause; in a VM, check the x-nv-gpudirect-clique settings."),
    Entry("p2p_probe_timeout", "p2p", "critical", "the P2P probe hung and was stopped",
          "A copy between GPUs that never completes is what a broken peer window or an IOMMU fault does. "
          "Check `dmesg` for Xid and IOMMU/DMAR faults; set NCCL_P2P_DISABLE=1 and "
          "--disable-custom-all-reduce until the pair is fixed; keep iommu=pt on the kernel command line."),
    Entry("p2p_peer_access_unavailable", "p2p", "warning",
          "GPU pairs that cannot access each other's memory (copies go through host memory)", P2P_HOST_MEMORY),
    Entry("p2p_small_copy_latency", "p2p", "critical",
          "a small GPU-to-GPU copy is as slow as the host-memory path", P2P_HOST_MEMORY),
    Entry("p2p_no_gain", "p2p", "warning", "granted peer access is no faster than host memory", P2P_HOST_MEMORY),
    Entry("p2p_proof_stale", "p2p", "warning",
          "the P2P probe or benchmark in the report was measured before a change that can invalidate it (named)",
          "Run playbooks/bench.yml on this host to prove P2P and measure again on what it runs now (a driver, "
          "kernel, BIOS or VM config change can take P2P away, as vLLM's P2P cache notes). Until then the report's "
          "proof is history, not evidence; the deployment gate only counts a probe measured in its own play."),

    # ---- PCIe ----------------------------------------------------------------------------
    Entry("gpus_on_several_numa_nodes", "pci", "warning", "tensor-parallel GPUs talk over PCIe across NUMA nodes",
          "Prefer tensor-parallel groups within one NUMA node (CUDA_VISIBLE_DEVICES), or check that "
          "`nvidia-smi topo -m` shows NV# or PIX/PXB between them. In a VM, give it vNUMA matching the host "
          "(Proxmox: numa: 1 and numaN lines) and pin vCPUs."),
    Entry("pcie_link_narrow", "pci", "warning", "a GPU link trained narrower than it can",
          "Reseat the card or riser, check the slot's wiring (an x16 slot wired x8) and BIOS bifurcation "
          "settings. In a VM, the guest may show the emulated port's width: compare with "
          "`lspci -vv -s <bdf>` on the host."),
    Entry("link_trained_lower", "pci", "warning", "a GPU link trained lower than in the previous report",
          "Reseat the GPU and its riser or cable and check the slot (a link that trains narrower often has a dirty "
          "or loose connector); check the BIOS's PCIe settings for the slot; `lspci -vvv -s <bdf> | grep LnkSta` "
          "shows the trained width. Then run playbooks/bench.yml to measure again. If the GPU moved to a narrower "
          "slot on purpose, remove this host's report (<report dir>/<host>.json) so that the next audit takes the "
          "link as the new baseline."),
    Entry("pcie_link_slow", "pci", "info", "a link below top speed now (idle GPUs downshift; check under load)",
          "Check under load: `nvidia-smi -q -d PCIE` while a job runs should show the max gen. If not, look at "
          "BIOS PCIe speed settings, risers and retimers."),
    Entry("small_bar1", "pci", "warning", "BAR1 under `gpu_audit_min_bar1_mib`",
          "Enable 'Above 4G decoding' and 'Resizable BAR' in the BIOS; some datacenter GPUs also need "
          "their BAR1 mode switched with NVIDIA's display mode selector tool.",
          texts={"vm": "Enable Resizable BAR / above-4G decoding in the host BIOS, then give the guest a 64-bit MMIO "
                       "window big enough for every GPU's BAR (OVMF: `args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,"
                       "string=262144` for 256 GB; add it to the existing args line), and use q35 with pcie=1."}),
    Entry("acs_redirect_between_gpus", "pci", "warning", "ACS redirect on a switch port between GPUs, bare metal",
          "On a serving host (no GPU passthrough), disable ACS in the BIOS ('ACS Control' / 'PCIe ACS') or at boot "
          "for each bridge: `setpci -s <bdf> ECAP_ACS+0x6.w=0000`. Keep ACS on hypervisors that pass GPUs to VMs: "
          "it is what isolates them."),
    Entry("acs_unreadable", "pci", "info", "ACS could not be read (not root)",
          "Run the audit with privileges (`become: true`, or as root) to check ACS redirect between GPUs."),

    # ---- IOMMU ---------------------------------------------------------------------------
    Entry("iommu_group_shared", "iommu", "warning", "a GPU shares its IOMMU group with an unrelated device",
          "Put the GPU in a slot behind a port with ACS, or enable ACS in the BIOS. The pcie_acs_override kernel "
          "patch splits groups without real isolation: use it only if you accept that risk."),

    # ---- what a guest's VM gives it ------------------------------------------------------
    Entry("qemu_machine_i440fx", "virtualization", "critical", "i440fx guest: no PCIe",
          "On the Proxmox host: `qm set <vmid> --machine q35` and add `,pcie=1` to every hostpciN line "
          "(OVMF firmware recommended for large BARs); stop and start the VM.",
          also=("warning",)),

    # ---- a Proxmox VE host ---------------------------------------------------------------
    Entry("proxmox_iommu_off", "proxmox", "critical",
          "a Proxmox host with passthrough VMs has no IOMMU; kernel parameters for Intel or AMD and for its boot "
          "loader",
          "Enable {firmware} in the firmware setup. {vendor_note}"
          "Kernel parameters, for the boot loader this host uses:\n{boot}"
          "\nReboot; `dmesg | grep -e DMAR -e AMD-Vi` and a non-empty /sys/kernel/iommu_groups prove it.",
          texts={
              "amd_note": "On AMD the kernel turns the IOMMU on by itself once the firmware does; `iommu=pt` keeps "
                          "host DMA fast. ",
              "intel_note": "On Intel, kernels before 6.8 need intel_iommu=on; set it anyway. ",
              "grub": "  GRUB: add `{parameters}` to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then "
                      "`update-grub`",
              "systemd-boot": "  systemd-boot: add `{parameters}` to /etc/kernel/cmdline, then "
                              "`proxmox-boot-tool refresh`",
          }),
    Entry("proxmox_vm_not_q35", "proxmox", "critical",
          "a VM passes GPUs on i440fx (also when `machine` is unset: i440fx is the default)",
          "Switch to q35 and put the GPUs on PCIe root ports. A Linux guest renames its network interfaces "
          "(check /etc/netplan or /etc/network/interfaces from the console); OVMF (`bios: ovmf` with an "
          "efidisk) suits large BARs best.\n{commands}"),
    Entry("proxmox_vm_no_pcie", "proxmox", "critical", "a q35 VM passes a GPU without `pcie=1`", "{commands}",
          also=("warning",)),
    Entry("proxmox_vm_function_not_explicit", "proxmox", "warning",
          "a VM with several GPUs passes one as a whole multifunction device (`41:00`, a `;` list, a whole-device "
          "mapping): QEMU names it `hostpciN.0`, so the clique's `-set` cannot reach it",
          "Pass the GPU function alone (a compute GPU does not need its audio function in the guest; pass it "
          "as its own hostpci line if you do):\n{commands}{mapping_note}",
          texts={"mapping_note": "\nFor {mapped}, edit the resource mapping (Datacenter > Resource Mappings) so "
                                 "that its path names the .0 function."}),
    Entry("proxmox_vm_hidden", "proxmox", "critical",
          "KVM hidden from the guest (`cpu: ...,hidden=1`, `x-vga=1`, `kvm=off` in args, or `hidden=1` on a "
          "hostpci line, which is no option at all): the driver ignores the clique",
          "Current NVIDIA drivers (465 and newer) run in a visible VM; drop what hides KVM "
          "(cpu hidden=1, x-vga=1 on a compute GPU, kvm=off in args, hidden=1 on a hostpci line):\n{commands}",
          also=("warning",)),
    Entry("proxmox_vm_no_clique", "proxmox", "critical",
          "a VM passes 2 or more NVIDIA GPUs and args gives one of them no `x-nv-gpudirect-clique` (warning when "
          "the GPUs are split across cliques); remedy: the `qm set <vmid> --args` that keeps the existing args",
          "{name_first}Give every GPU of the VM the same clique (this keeps the rest of the args line):\n"
          "{commands}\nThen in the guest `nvidia-smi topo -p2p r` should say OK (reported effect: all-reduce "
          "latency from 12-15 us down to 1.0-1.4 us). The clique is ignored while KVM is hidden: see "
          "proxmox_vm_hidden.",
          also=("warning",),
          texts={
              "name_first": "First name the GPU function of {unnamed} (see proxmox_vm_function_not_explicit): "
                            "QEMU names the functions of a multifunction device hostpciN.0, hostpciN.1, and -set "
                            "cannot reach them.\n",
              "split": "If the split is not deliberate (one tensor-parallel group per clique), put every GPU in one "
                       "clique: `qm set {vmid} --args '...'` with `-set device.hostpciN.x-nv-gpudirect-clique=0` "
                       "for each GPU, then stop and start the VM.",
          }),
    Entry("proxmox_vm_mmio_window_small", "proxmox", "warning",
          "OVMF's 64-bit MMIO window (set in args, or estimated from the guest's address bits) is smaller than "
          "the passed devices' BARs need",
          "Set the window to {recommended_mb} MiB (the next power of two) in args:\n{commands}"),
    Entry("proxmox_gpu_not_vfio", "proxmox", "warning", "a passed GPU is bound to a host driver, not vfio-pci",
          "Bind them to vfio-pci at boot on the host:\n"
          "  printf 'vfio\\nvfio_iommu_type1\\nvfio_pci\\n' >> /etc/modules\n"
          "  echo 'options vfio-pci ids={ids}' > /etc/modprobe.d/vfio.conf\n"
          "{softdeps}"
          "  update-initramfs -u -k all && reboot\n"
          "`lspci -nnk -s <bdf>` must then say `Kernel driver in use: vfio-pci`.",
          texts={"softdep": "  echo 'softdep {driver} pre: vfio-pci' >> /etc/modprobe.d/vfio.conf\n"}),
    Entry("proxmox_gpu_group_shared", "proxmox", "warning",
          "a passed device's IOMMU group holds other, unrelated devices",
          "Move the GPU to a slot whose root port has ACS (its own group), or enable ACS / 'PCIe ARI' in the "
          "BIOS, then check `find /sys/kernel/iommu_groups/ -type l`. pcie_acs_override=downstream only "
          "pretends to split groups: use it only if you accept that the devices are not isolated."),
    Entry("proxmox_vm_balloon", "proxmox", "warning",
          "ballooning with passthrough, which pins all guest memory (info when only the device is there)",
          "{commands}", also=("info",)),
    Entry("proxmox_cpu_not_host", "proxmox", "warning", "a GPU VM's CPU type is not `host`",
          "A VM with passed-through devices cannot live-migrate anyway, so nothing is lost:\n{commands}"),
    Entry("proxmox_no_numa", "proxmox", "info", "a GPU VM has no vNUMA on a host with several NUMA nodes",
          "Mirror the host's nodes in the VM (and bind its memory to them), e.g.:\n{commands}"
          "\nThen pin each serving process to the node of its GPUs in the guest."),

    # ---- collectives ---------------------------------------------------------------------
    Entry("nccl_wrong_values", "nccl", "critical", "a collective completed with wrong values",
          "Do not serve with these settings. On GPUs whose P2P grant is a private mirror (NVIDIA/nccl#2335) "
          "writes succeed and the peer reads zeros: run the P2P probe (gpu_p2p_probe) and compare with "
          "NCCL_P2P_DISABLE=1 (the tuning's p2p-disabled candidate); if that one is correct, deploy with "
          "NCCL_P2P_DISABLE=1 and SGLang --disable-custom-all-reduce."),
    Entry("nccl_timeout", "nccl", "critical", "a collective hung and was stopped at its deadline",
          "A collective that never finishes is what a broken P2P window does to NCCL (NVIDIA/nccl#2335), as "
          "do an IOMMU without passthrough and nvidia_uvm HMM on some hosts. Re-run with NCCL_P2P_DISABLE=1: "
          "if it completes, P2P is the cause (run gpu_p2p_probe for the pair). Check `dmesg` for Xid and "
          "IOMMU faults, and that iommu=pt is on the kernel command line."),
    Entry("nccl_run_failed", "nccl", "critical", "the benchmark failed before finishing its sweep",
          "Read NCCL's own reason in the ranks' stderr (NCCL WARN lines). 'unhandled cuda error' or 'peer access' "
          "errors point at P2P: re-run with NCCL_P2P_DISABLE=1 (tune: true tries it) and run gpu_p2p_probe."),
    Entry("nccl_small_message_latency", "nccl", "critical",
          "small all-reduces take longer than GPUs with working P2P need", P2P_HOST_MEMORY, also=("warning",)),
    Entry("nccl_low_bus_bandwidth", "nccl", "warning", "large all-reduces under the bus bandwidth floor",
          "Check each GPU's link in the audit (current vs max link speed and width; a slot at x4 or Gen1 "
          "shows here), that NCCL did not pick NET/Socket between GPUs of this host (NCCL_DEBUG=INFO), and "
          "compare the tuning candidates: NCCL_P2P_LEVEL=SYS or NCCL_P2P_DISABLE=1 may move more.",
          also=("critical",)),
    Entry("nccl_p2p_no_gain", "nccl", "warning", "all-reduce with P2P is no faster than with NCCL_P2P_DISABLE=1",
          P2P_HOST_MEMORY),
    Entry("nccl_no_p2p_transport", "nccl", "warning", "NCCL connected the ranks without a P2P transport",
          P2P_HOST_MEMORY),
    Entry("nccl_p2p_refused", "nccl", "warning",
          "NCCL_DEBUG=INFO says P2P could not be enabled between GPUs (info when the environment switched it "
          "off, critical between NVLink-connected GPUs)",
          P2P_HOST_MEMORY, also=("info", "critical"),
          texts={
              "environment": "P2P was switched off on purpose: NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC in the "
                             "run's environment. Keep that only where P2P is broken on this host (gpu_p2p_probe "
                             "proves it, and the tuning's p2p-disabled candidate shows what it costs); otherwise "
                             "remove it and run the benchmark again.",
              "nvlink": "NVML reports P2P off between GPUs that NVLink connects, which NCCL treats as a hardware "
                        "fault and stops on. Check `nvidia-smi nvlink --status`, `nvidia-smi topo -p2p n`, the "
                        "fabric manager on NVSwitch systems (`systemctl status nvidia-fabricmanager`) and Xid errors "
                        "in `dmesg`; NCCL_IGNORE_DISABLED_P2P=1 only hides the message.",
          }),
    Entry("nccl_tuning_no_working_candidate", "nccl", "critical",
          "no NCCL environment tried finished with correct values",
          "Fix what the nccl_wrong_values / nccl_timeout findings name before deploying; the audit "
          "(gpu_host_facts) and the P2P probe (gpu_p2p_probe) tell which GPUs and which path fail."),
    Entry("nccl_tuning_recommendation", "nccl", "info",
          "another NCCL environment does better than the host as it is (critical when only it works)",
          "Use recommended_env for the serving processes (the SGLang role's environment); a P2P-disabled "
          "recommendation also means SGLang --disable-custom-all-reduce.",
          also=("critical",)),
    Entry("nccl_results_not_measured", "nccl", "warning",
          "the benchmark printed inf or nan instead of a time for some sizes: no measurement there",
          "0.00 us with inf GB/s (or nan) means the timer read nothing: at those sizes the collective did not run, "
          "or ran on nothing. Run the benchmark again with the values checked (check: true) and NCCL_DEBUG=WARN, "
          "and read NCCL's warnings; until every size has a finite time, the curve proves nothing."),
    Entry("nccl_known_bad_version", "nccl", "critical",
          "the NCCL in use has a known bug on these GPUs (bench/nccl_known_issues.py; warning when the rank count "
          "differs from the report)",
          "Move to NCCL {fixed_in} or later: a torch release that bundles it, or the nvidia-nccl wheel of torch's "
          "CUDA (nvidia-nccl-cu12, -cu13) at that version in the serving stack's lock; then run the benchmark "
          "again. Source: {sources}.", also=("warning",)),
    Entry("nccl_amd_inter_cpu_bandwidth", "nccl", "warning",
          "an NCCL release whose topology gives every AMD CPU-to-CPU link 16 GB/s, on an AMD host with PCIe "
          "Blackwell GPUs on several NUMA nodes (info when their NUMA nodes were not read)",
          "Measure before changing anything: run the benchmark (playbooks/bench.yml) and compare the all-reduce "
          "bus bandwidth across NUMA nodes with what the pair copies reach. Then either give NCCL a graph searched "
          "for the real bandwidth (run once with NCCL_GRAPH_DUMP_FILE=/path/graph.xml, raise the speeds of the "
          "rings that cross NUMA nodes, serve with NCCL_GRAPH_FILE=/path/graph.xml), or keep NCCL from cutting "
          "channels with NCCL_MIN_NCHANNELS (for example 16), benchmark again and keep what measured better. "
          "Versions after 2.30.7 change this model per CPU generation (NVIDIA/nccl#2036; #2441 reports a "
          "regression with it): measure them too. Sources: {sources}.", also=("info",)),
    Entry("nccl_diagnostics_p2p_failed", "nccl", "critical",
          "NCCL's own check at communicator start (NCCL_RUN_DIAGNOSTICS, 2.31 on) found GPU peer accesses that "
          "failed verification",
          "NCCL names the pairs and their path in the lines quoted. Run gpu_p2p_probe, check `dmesg` for Xid and "
          "IOMMU faults and the audit's ACS and IOMMU findings; until fixed, serve with NCCL_P2P_DISABLE=1 and "
          "SGLang --disable-custom-all-reduce."),
    Entry("nccl_diagnostics_flagged", "nccl", "warning",
          "NCCL's diagnostics flagged something to review (an [INFO] line other than a failed P2P count)",
          "Read the lines quoted (NCCL's own words) with the Diagnostics page of NCCL's troubleshooting guide, and "
          "run the benchmark again to see whether it persists."),

    # ---- the benchmark phase -------------------------------------------------------------
    Entry("communication_ceiling", "bench", "info",
          "the communication ceiling: the single-stream decode rate that all-reduce latency (measured, or "
          "estimated from the probe's copies) allows the model",
          "Lower small-message all-reduce latency raises this ceiling: GPU P2P (see the P2P findings), "
          "NVLink, or fewer GPUs per tensor-parallel group."),
    Entry("comm_floor", "bench", "info",
          "the decode ceiling that all-reduce latency (measured, or estimated from the probe's copies) sets "
          "for the model",
          "Nothing to do: the figure is raised as communication_ceiling. Write that id where a list names "
          "this one.",
          retired="renamed communication_ceiling", renamed_to="communication_ceiling"),
    Entry("bench_probe_not_run", "bench", "warning", "the P2P probe could not run",
          "Fix what the message names and run playbooks/bench.yml again; until then the deployment gate has no "
          "measured proof."),
    Entry("bench_nccl_not_run", "bench", "warning", "the NCCL benchmark could not run",
          "Fix what the message names and run playbooks/bench.yml again; until then the deployment gate has no "
          "measured proof."),
    Entry("serving_decode_slow", "bench", "warning",
          "the deployed server decodes one stream slower than the minimum set for it",
          "Read the throughput breakdown: when the communication ceiling explains most of each token's time, lower "
          "the all-reduce latency (GPU P2P, see the P2P findings; NVLink; fewer GPUs per tensor-parallel group); "
          "when it explains little, look at the server's settings (the gate's launch flags, attention and MoE "
          "backends, CUDA graphs) and at the GPUs' clocks and power. sglang_serve_rollback_on_slow refuses such "
          "a deployment instead."),

    # ---- the gate's own reasons ----------------------------------------------------------
    Entry("audit_missing", "gate", "critical", "the gate was given no audit facts",
          "Run gpu_host_facts on the host first and pass ansible_facts.gpu_host as audit."),
    Entry("model_invalid", "gate", "critical", "the model to deploy has a missing or mistyped field",
          "Correct the model in the inventory (deploy_model)."),
    Entry("model_profile_invalid", "gate", "critical", "the model to deploy has a missing or mistyped field",
          "Nothing to do: the finding is raised as model_invalid. Write that id where a list names this one.",
          retired="renamed model_invalid", renamed_to="model_invalid"),
    Entry("known_good_override_invalid", "gate", "critical", "an entry of known_good_overrides is malformed",
          "Correct the entry in known_good_overrides "
          "(fields: id, arch, models, sglang_versions, flags, env, purpose, source, note)."),
    Entry("driver_too_old", "gate", "critical", "the NVIDIA driver is older than the model needs",
          "Install a newer driver branch (the nvidia_driver role: nvidia_driver_branch) and reboot."),
    Entry("driver_version_unknown", "gate", "critical",
          "the driver version is unknown, so the minimum cannot be checked",
          "Audit with NVML available (nvidia-ml-py in the interpreter that runs gpu_host_facts) or "
          "check `nvidia-smi`; accept driver_version_unknown to deploy anyway.",
          texts={"not_a_version": "Check `nvidia-smi`."}),
    Entry("cuda_too_old", "gate", "critical", "the CUDA version the driver supports is older than the model needs",
          "The driver decides the highest CUDA version it runs: install a newer driver branch."),
    Entry("cuda_version_unknown", "gate", "critical",
          "the CUDA version the driver supports is unknown, so the minimum cannot be checked",
          "Audit with NVML available (nvidia-ml-py in the interpreter that runs gpu_host_facts) or "
          "check `nvidia-smi`; accept cuda_version_unknown to deploy anyway.",
          texts={"not_a_version": "Check `nvidia-smi`."}),
    Entry("no_usable_gpu", "gate", "critical", "no GPU this host can use",
          "Deploy the model on a host (or VM) whose audit lists its GPUs; the audit's findings say "
          "what is missing here."),
    Entry("compute_capability_too_low", "gate", "critical", "too few GPUs have the compute capability the model needs",
          "Serve this model on newer GPUs, or choose a build (quantization) that supports these."),
    Entry("compute_capability_unknown", "gate", "critical", "a GPU's compute capability is unknown",
          "Audit with NVML available; accept compute_capability_unknown to use them anyway."),
    Entry("not_enough_gpus", "gate", "critical", "fewer usable GPUs than the model's min_gpus",
          "Serve it on a host with more GPUs, or lower tensor_parallel_size if the memory allows."),
    Entry("tensor_parallel_unsatisfiable", "gate", "critical", "no tensor-parallel size fits the model and the host",
          "Serve it on a host with more GPUs, or lower tensor_parallel_size if the memory allows.",
          texts={
              "below_min_gpus": "Raise tensor_parallel_size or correct min_gpus in the model (deploy_model).",
              "heads": "Choose a size that divides the attention heads, or 'auto'.",
              "no_size": "Set tensor_parallel_size explicitly in the model (deploy_model).",
          }),
    Entry("not_enough_gpu_memory", "gate", "critical", "the model does not fit the GPUs' memory",
          "Serve it on more or larger GPUs, use a smaller quantization, or lower kv_cache_gib_per_gpu / "
          "kv_cache_fraction if the context you need allows."),
    Entry("sglang_flag_unsupported", "gate", "critical",
          "a launch flag the installed SGLang's --help refuses: an unknown option with no known rename, or a value "
          "outside the option's choices",
          "Record the flag this SGLang version takes in known_good_overrides (an entry with the id {entry} replaces "
          "the shipped one; disabled: true drops it), or serve with an SGLang version that accepts it "
          "(serving_stack_profile).",
          texts={"gate": "The gate emits {option} itself: check that the --help given comes from the SGLang that "
                         "will serve (the sglang role's sglang_result, or deployment_gate_sglang_help_file)."}),

    # ---- the host against the manifest of its class (rules/manifest.py) ------------------------
    # Raised only when the inventory names a manifest. A GPU missing or P2P below the class is critical:
    # either one cuts what the host can serve (fewer GPUs than the class's tensor-parallel size, or
    # collectives through host memory, the incident's 13.7 us floor). The rest is a warning: the host still
    # serves, but not as its class was measured, so the class's numbers do not hold for it.
    Entry("manifest_gpu_count", "gpu", "critical", "fewer GPUs than the host's class has, or a slot empty",
          "Find the missing GPU: `lspci -nn -d 10de:` and `dmesg | grep -e NVRM -e Xid` on the host (a GPU fallen "
          "off the bus needs a cold reboot, one that keeps failing a reseat or RMA); in a VM, compare the VM's "
          "hostpci lines with the class. If this host is rightly different, give it the manifest of its own "
          "class instead of {manifest_class}.", also=("warning",)),
    Entry("manifest_gpu_model", "gpu", "warning", "GPUs of another model than the host's class has",
          "Put the class's GPU model in, or give this host the manifest of the class it belongs to."),
    Entry("manifest_driver_version", "gpu", "warning", "another NVIDIA driver than the host's class expects",
          "Install driver {expected} (the nvidia_driver role's branch and version pin) and hold its packages, or "
          "update the manifest of class {manifest_class} once the whole class has moved to this driver."),
    Entry("manifest_vbios_mismatch", "gpu", "warning", "a VBIOS the host's class does not list",
          "Flash the class's VBIOS with the vendor's tool (nvflash or the server vendor's firmware bundle), or "
          "add this version to vbios_versions in the manifest of class {manifest_class} once it is qualified."),
    Entry("manifest_link_below", "pci", "warning", "a GPU link below the generation or width its slot has in the "
          "host's class",
          "Reseat the card or riser, check the slot's BIOS settings (link speed forced lower, bifurcation) and "
          "cabling of a retimer; `lspci -vv -s <bdf>` shows LnkCap and LnkSta. Bandwidth to that GPU is cut."),
    Entry("manifest_numa", "pci", "warning", "a GPU on another NUMA node than its slot has in the host's class",
          "Check that the GPU sits in the slot the class names (a card moved to the other socket's slots) and "
          "that the BIOS has NUMA per socket as the class has; CPU threads bound by the class's layout now "
          "cross the interconnect."),
    Entry("manifest_p2p", "p2p", "critical", "GPU pairs without the P2P the host's class has",
          "Compare the host with one of class {manifest_class}: `nvidia-smi topo -p2p r` on both; the "
          "p2p_not_supported finding, when raised, names the cause. A driver upgrade, an ACS or IOMMU setting "
          "changed in the BIOS, or a VM missing its clique (x-nv-gpudirect-clique) are the usual ones.",
          also=("warning",)),
    Entry("manifest_peer_bandwidth_below", "p2p", "warning",
          "GPU pairs copy below the peer bandwidth floor of the host's class (manifest bandwidth.peer_min_gbps)",
          "The class {manifest_class} expects {floor} GB/s between every GPU pair. Read the slow pairs against "
          "`nvidia-smi topo -m` and the links (`nvidia-smi -q -d PCIE`, manifest_link_below): a link trained "
          "narrower or slower, a pair across CPU sockets, peer copies through host memory "
          "(p2p_peer_access_unavailable) or a switch's ACS redirect each cap it. Fix the cause and run "
          "playbooks/bench.yml again; if the floor was set above what the class's hardware gives, lower it."),
    Entry("manifest_not_checked", "audit", "info", "values the host's manifest expects that could not be read",
          "Audit the host itself as root (`become: true`), or add the missing outputs to the material "
          "(`nvidia-smi -q` for VBIOS versions, `nvidia-smi topo -p2p r` for P2P)."),

    # ---- the audit itself ----------------------------------------------------------------
    Entry("audit_incomplete", "audit", "info", "something could not be read; what and why",
          "Run the audit as root (`become: true`) for privileged files such as PCI extended config space and "
          "dmesg; a timed-out nvidia-smi points to a wedged GPU (check `dmesg | grep Xid`)."),
    Entry("rule_error", "audit", "warning", "a rule could not judge these facts (a defect: report it)",
          "Report this with the capture of the host (playbooks/capture.yml) attached."),
    Entry("tensor_parallel_gpus_not_on_host", "audit", "critical",
          "tensor_parallel_gpus names GPU indexes this host does not have, so the group asked for was not judged",
          "Give tensor_parallel_gpus (the gpu_audit role's gpu_audit_tensor_parallel_gpus) only indexes this host "
          "has ({host_gpus}), or leave it empty to judge every GPU. If the host should have GPU {missing}, the "
          "findings about lost or unusable GPUs say why it is not there."),
    Entry("audit_not_judged", "audit", "warning",
          "material lacked what some findings need: those could not be judged, which is no pass",
          "Read the findings listed under not_judged as unknown. To judge them, audit the host itself "
          "(playbooks/capture.yml records everything the audit reads), or add what the material lacks: {outputs}."),
)


# What each finding asks of the host (findings/actions.py, in order of disruption), beside the table above:
# one line per action so that a new id is placed by reading one line. A finding raised critical asks at least
# CRITICAL_AT_LEAST (``action_of``), except the gate's own reasons, which are about a deployment, not the host;
# one raised info asks nothing, as info findings leave the verdict as it is (a balloon on an idle VM).
# Ids are checked below: each catalog id in exactly one line.
IDS_BY_ACTION = MappingProxyType({
    "none": ("gpus_bound_to_vfio", "persistence_mode_off", "nvml_unavailable", "gpu_added", "xid_errors",
             "gpu_clocks_slowdown", "pcie_aer_errors", "p2p_capability_not_stated", "nccl_log_no_p2p",
             "consumer_p2p_unproven",
             "p2p_peer_access_unavailable", "p2p_no_gain", "p2p_proof_stale", "gpus_on_several_numa_nodes",
             "link_trained_lower", "pcie_link_slow", "small_bar1", "acs_unreadable", "iommu_group_shared",
             "nccl_low_bus_bandwidth", "nccl_p2p_no_gain", "nccl_no_p2p_transport", "nccl_p2p_refused",
             "nccl_tuning_recommendation", "nccl_results_not_measured", "nccl_diagnostics_flagged", "comm_floor",
             "communication_ceiling", "bench_probe_not_run", "bench_nccl_not_run", "serving_decode_slow",
             "audit_missing",
             "model_invalid", "model_profile_invalid", "known_good_override_invalid", "driver_version_unknown",
             "cuda_version_unknown", "compute_capability_too_low", "compute_capability_unknown", "not_enough_gpus",
             "tensor_parallel_unsatisfiable", "not_enough_gpu_memory", "sglang_flag_unsupported", "audit_incomplete",
             "rule_error", "tensor_parallel_gpus_not_on_host", "audit_not_judged",
             "gpu_vbios_mismatch", "nvswitch_sxid_errors", "manifest_gpu_model", "manifest_driver_version",
             "manifest_vbios_mismatch", "manifest_link_below", "manifest_numa", "manifest_not_checked",
             "dcgm_diag_warned", "dcgm_diag_not_run", "fleet_vbios_mismatch", "fleet_driver_mismatch",
             "manifest_peer_bandwidth_below",
             "uvm_hmm_enabled", "pcie_aspm_not_off", "nccl_amd_inter_cpu_bandwidth", "gpu_packages_not_held"),
    "drain": ("no_nvidia_gpu", "gpus_unusable", "row_remap_failed", "fabric_manager_inactive", "p2p_not_supported",
              "p2p_write_not_arriving", "p2p_probe_timeout", "p2p_small_copy_latency", "pcie_link_narrow",
              "acs_redirect_between_gpus", "nccl_wrong_values", "nccl_timeout", "nccl_run_failed",
              "nccl_small_message_latency", "nccl_tuning_no_working_candidate", "nccl_known_bad_version",
              "nccl_diagnostics_p2p_failed", "no_usable_gpu", "manifest_gpu_count", "manifest_p2p",
              "dcgm_diag_failed"),
    "reset_gpu": ("xid_needs_reset", "ecc_uncorrectable_errors", "retired_pages_pending", "row_remap_pending",
                  "gpu_fabric_not_ready"),
    "reboot": ("nvswitch_sxid_fatal", "gpu_count_mismatch", "gpu_driver_library_mismatch", "gpu_lost",
               "gpu_handle_failed", "gpu_gone"),
    "reinstall_driver": ("fabric_manager_version_mismatch", "nvidia_driver_not_loaded", "nouveau_loaded",
                         "nvidia_driver_not_binding",
                         "driver_too_old", "cuda_too_old"),
    "fix_hypervisor": ("qemu_machine_i440fx", "proxmox_iommu_off", "proxmox_vm_not_q35", "proxmox_vm_no_pcie",
                       "proxmox_vm_function_not_explicit", "proxmox_vm_hidden", "proxmox_vm_no_clique",
                       "proxmox_vm_mmio_window_small", "proxmox_gpu_not_vfio", "proxmox_gpu_group_shared",
                       "proxmox_vm_balloon", "proxmox_cpu_not_host", "proxmox_no_numa"),
})
ACTION_OF = MappingProxyType({finding_id: action for action, ids in IDS_BY_ACTION.items() for finding_id in ids})


def action_of(finding_id: str, severity: str) -> str:
    """The action a finding of this id asks for, raised at ``severity``."""
    declared = ACTION_OF[finding_id]
    if severity == "info":
        return "none"
    if severity == "critical" and CATALOG[finding_id].category != "gate":
        return most_disruptive((declared, CRITICAL_AT_LEAST))
    return declared


def entry(finding_id: str) -> Entry:
    try:
        return CATALOG[finding_id]
    except KeyError:
        raise CatalogError(f"finding id {finding_id!r} is not in the findings catalog (findings/catalog.py): "
                           "add it there with its category, severity, title and remedy") from None


def category_of(finding_id: Any) -> str | None:
    """The category of an id; None for an id the catalog does not know (e.g. from an older report)."""
    known = CATALOG.get(finding_id) if isinstance(finding_id, str) else None
    return known.category if known else None


def text(finding_id: str, which: str = "remedy", **fields: Any) -> str:
    """One of an entry's remedy texts with its fields filled in."""
    found = entry(finding_id)
    template = found.remedy if which == "remedy" else found.texts.get(which)
    if template is None:
        raise CatalogError(f"finding {finding_id!r} has no remedy text {which!r} in the catalog")
    try:
        return template.format(**fields)
    except (KeyError, IndexError) as exc:
        raise CatalogError(f"remedy text {which!r} of {finding_id!r} needs the field {exc}") from None


def make(finding_id: str, summary: str, evidence: dict[str, Any] | None = None, *, severity: str | None = None,
         remedy: str | None = None, **fields: Any) -> Finding:
    """A finding of a catalog entry. The remedy is the entry's, filled with ``fields``, unless
    ``remedy`` gives text already made from the entry's other texts."""
    found = entry(finding_id)
    severity = severity or found.severity
    if severity not in found.severities:
        raise CatalogError(f"finding {finding_id!r} is raised as {severity!r}; the catalog allows "
                           f"{', '.join(found.severities)}")
    if found.retired:
        raise CatalogError(f"finding {finding_id!r} is retired ({found.retired}) and must not be raised")
    return Finding(finding_id, severity, summary, evidence or {},
                   text(finding_id, **fields) if remedy is None else remedy, action_of(finding_id, severity))


def retired_entry(finding_id: Any) -> Entry | None:
    """The catalog's entry for a retired id (one a list written for an older version may still name); None for
    an id that is raised today or that the catalog does not know."""
    known = CATALOG.get(finding_id) if isinstance(finding_id, str) else None
    return known if known is not None and known.retired else None


def gate_accept_hint(finding_id: str) -> str:
    return GATE_ACCEPT_HINT.format(id=finding_id)


def fields_of(template: str) -> set[str]:
    """The ``{field}`` names a remedy text needs."""
    return {name for _literal, name, _spec, _conv in string.Formatter().parse(template) if name}


def _check(catalog: Mapping[str, Entry]) -> None:
    for item in catalog.values():
        if item.category not in CATEGORIES:
            raise CatalogError(f"finding {item.id!r}: unknown category {item.category!r}")
        unknown = [s for s in item.severities if s not in SEVERITIES]
        if unknown:
            raise CatalogError(f"finding {item.id!r}: unknown severity {unknown}")
        successor = catalog.get(item.renamed_to) if item.renamed_to else None
        if item.renamed_to and (not item.retired or successor is None or successor.retired):
            raise CatalogError(f"finding {item.id!r}: renamed_to names {item.renamed_to!r}; only a retired id has a "
                               "successor, and it must be a catalog id that is not retired")
    missing = sorted(set(catalog) - set(ACTION_OF))
    if missing:
        raise CatalogError(f"finding(s) {', '.join(missing)} have no action: add each to one line of ACTION_OF")
    if sum(map(len, IDS_BY_ACTION.values())) != len(ACTION_OF):
        raise CatalogError("an id is in more than one line of IDS_BY_ACTION: give each id one action")
    strays = sorted(i for i, a in ACTION_OF.items() if i not in catalog or a not in ACTION_RANK)
    if strays:
        raise CatalogError(f"ACTION_OF names ids outside the catalog or actions outside {ACTIONS}: {strays}")


_check(CATALOG)
