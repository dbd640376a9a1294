#!/usr/bin/python
"""Ansible module: audit a GPU host (bare metal, VM guest or hypervisor) and return facts and findings."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_host_facts
short_description: Audit a GPU host and say whether it is fit to serve, and why
description:
  - Gathers, in one invocation, the virtualization layer (bare metal, KVM/QEMU and Proxmox guests, VMware,
    Hyper-V, Xen, Firecracker, containers) with the evidence for it, the IOMMU and its groups, every NVIDIA
    PCI device with its driver, link, NUMA node, BARs and the ACS settings of the bridges above it, and the
    GPUs through NVML (nvidia-ml-py) or, failing that, nvidia-smi, with the P2P and topology matrices.
  - A rules engine turns the facts into findings, each with a severity, the evidence it used and a concrete
    remedy (for a Proxmox guest without P2P, the exact x-nv-gpudirect-clique args line).
  - Read-only. Nothing missing is fatal, no driver, no NVML library, an unreadable sysfs file; what could not
    be read is listed under C(problems) and in an C(audit_incomplete) finding.
  - Given O(capture), replays a saved capture instead of reading the system, and yields the same facts.
  - Saved material (an C(nvidia-bug-report.log), pasted outputs, a directory of them, or a capture built from
    them) is M(gpuhost.gpu.gpu_analyze)'s (C(playbooks/analyze.yml)), the one module that takes material; given such
    a capture, this module fails and says so. The module every audited host runs ships none of the code that reads
    material.
  - With O(save_capture), writes what it read to a file on the host it runs on and returns the file's path, never
    its content. The capture keeps, of the Proxmox VM configs, only those of VMs that pass a PCI device through,
    with every key named like a secret (C(cipassword), C(sshkeys), ...) kept but its value replaced by
    C(<redacted>); its C(about) line and C(contains) mapping say what it holds and what was left out.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  gather_subset:
    description:
      - Which parts to gather, like M(ansible.builtin.setup). C(all), or any of C(virtualization), C(iommu),
        C(pci), C(gpus), C(proxmox); a name prefixed with C(!) leaves it out.
      - C(proxmox) costs one directory listing elsewhere; on a Proxmox VE node it reads the VM configs under
        C(/etc/pve/qemu-server) and C(pveversion), and judges every VM that passes PCI devices through.
    type: list
    elements: str
    default: [all]
  capture:
    description:
      - Path of a capture (JSON, as saved by C(save_capture) and C(playbooks/capture.yml)) to replay instead
        of reading the live system. The path is read where the module runs. Empty reads the live system.
    type: path
  save_capture:
    description:
      - Also write everything read from the system (files, directory listings, command outputs, NVML readings),
        to be replayed later, to O(save_capture_path), and return that path as C(capture_path).
      - Of the Proxmox VM configs only those of VMs that pass a PCI device through are kept (each other one is
        replaced by a marker line); in those, the value of every key named like a secret (C(cipassword),
        C(sshkeys), any name with pass, secret, token, credential, private or apikey) is replaced by
        C(<redacted>). O(capture_redact) redacts more.
      - Ignored when replaying a O(capture). In check mode nothing is written and no C(capture_path) is returned.
    type: bool
    default: false
  save_capture_path:
    description:
      - Where O(save_capture) writes the capture, on the host the module runs on; it is replaced whole (a
        temporary file renamed over it) and readable by its owner only (C(0600)).
      - Empty writes a new private temporary file, for the caller to fetch and remove (the C(gpu_audit) role does).
    type: path
  capture_redact:
    description:
      - More to redact from a saved capture, beyond the defaults of O(save_capture). An item starting with C(/)
        is a glob of file paths (C(/sys/class/dmi/id/*serial*), C(/proc/cmdline)) whose content is replaced by
        C(<redacted>), the entry kept; any other item is a Python regular expression whose every match in file
        contents (binary ones too), directory listings, link targets, resolved paths, read errors, command outputs
        and NVML strings is replaced by C(<redacted>); not in the paths and command lines that name the entries.
      - A redacted value replays as C(<redacted>), so facts read from it change accordingly.
      - The items show in the module's arguments (C(-v)) like any option, and are not written into the capture;
        write patterns that match a secret (C((?<=password=)\S+)), not the secret itself.
    type: list
    elements: str
    default: []
  tensor_parallel_gpus:
    description:
      - GPU indexes that will share one tensor-parallel group. P2P and NUMA rules judge these pairs.
      - Empty means every GPU. An index the host does not have is the critical finding
        C(tensor_parallel_gpus_not_on_host), which names the indexes the host has.
    type: list
    elements: int
    default: []
  min_bar1_mib:
    description: A BAR1 below this size (MiB) is reported as small.
    type: int
    default: 1024
  manifest:
    description:
      - The expected-host manifest of the host's class, as data (the gpu_audit role reads it from the YAML or
        JSON file that C(gpu_audit_manifest) names). docs/host_manifest.schema.json describes it.
      - Where the host deviates, the findings C(manifest_gpu_count), C(manifest_gpu_model),
        C(manifest_driver_version), C(manifest_vbios_mismatch), C(manifest_link_below), C(manifest_numa) and
        C(manifest_p2p) say how; values it expects that the audit could not read are C(manifest_not_checked).
      - Unset or empty, nothing is checked against a class.
    type: dict
  dcgm_diag:
    description:
      - Run DCGM's level 1 diagnostic (C(dcgmi diag -r 1 --json)) and judge its verdicts (findings
        C(dcgm_diag_failed), C(dcgm_diag_warned)). It takes seconds to a minute and loads every GPU while it runs,
        so it is off unless asked for.
      - Where C(dcgmi) is missing, times out or fails, the audit goes on; C(health.dcgm_diag.reason) says why
        there is no verdict and the info finding C(dcgm_diag_not_run) repeats it.
      - A C(dcgmi diag --json) output in material is read whatever this says.
    type: bool
    default: false
  dcgm_diag_timeout:
    description: Seconds O(dcgm_diag) may take before it is stopped and reported as giving no verdict.
    type: int
    default: 300
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; never changes anything.
  - Run with privileges (C(become)) to read PCI extended config space (ACS, Resizable BAR) and dmesg.
"""

EXAMPLES = r"""
- name: Audit this host
  gpuhost.gpu.gpu_host_facts:

- name: Audit, and keep everything read so that it can be replayed offline
  gpuhost.gpu.gpu_host_facts:
    save_capture: true
    save_capture_path: /root/gpu-node-1-capture.json
    capture_redact:
      - /sys/class/dmi/id/product_uuid
      - "(?<=password=)\\S+"
  register: audit

# In a playbook a relative path is taken from the playbook's directory (where the module runs), not from the
# directory ansible-playbook was started in: resolve it against that one (ad hoc, `ansible localhost -m
# gpu_host_facts -a capture=captures/gpu-node-1.json` runs in it already).
- name: Replay a capture taken on another host
  gpuhost.gpu.gpu_host_facts:
    capture: "{{ lookup('gpuhost.gpu.controller_path', 'captures/gpu-node-1.json') }}"
  delegate_to: localhost

- name: Judge P2P for a TP4 group on the first four GPUs only
  gpuhost.gpu.gpu_host_facts:
    tensor_parallel_gpus: [0, 1, 2, 3]
"""

RETURN = r"""
ansible_facts:
  description: Facts under the key C(gpu_host).
  returned: always
  type: complex
  contains:
    gpu_host:
      description: The audit of this host; the schema is documented in the README.
      returned: always
      type: complex
      contains:
        schema_version:
          description: Version of this structure.
          type: int
          sample: 2
        virtualization:
          description: >-
            Bare metal, VM or container (C(type)), the hypervisor, platform, container runtime, QEMU machine type
            (q35, i440fx), virtual IOMMU, DMI strings and product_uuid, NUMA nodes, hugepages, and the evidence.
          type: dict
          sample: {type: vm, hypervisor: kvm, machine_type: q35, summary: "KVM virtual machine (machine q35)"}
        iommu:
          description: Whether the IOMMU is on, its mode (passthrough, translated), vendor, kernel parameters,
            groups and members, and the vfio/nvidia/nouveau modules loaded.
          type: dict
        pci:
          description: >-
            Host bridges and every NVIDIA PCI device with kind (gpu, audio, nvswitch), driver, IOMMU group and
            peers, link speed and width (current and max), NUMA node, BARs, Resizable BAR and the upstream bridges
            with their port type and ACS control bits.
          type: dict
        gpus:
          description: GPUs as NVML (or nvidia-smi) reports them, driver and CUDA driver versions.
          type: dict
        p2p:
          description: P2P status matrices C(read), C(write), C(nvlink), C(atomics) with nvidia-smi's labels
            X, OK, CNS, GNS, TNS, NS, DR, U.
          type: dict
          sample: {read: [["X", "NS"], ["NS", "X"]]}
        topology:
          description: The topology matrix (X, NV#, PIX, PXB, PHB, NODE, SYS) with CPU and NUMA affinity per GPU.
            Matrices are keyed by NVML index; a pair with a GPU NVML counted but could not open is null, and so is
            a row a pasted matrix was cut before (material).
          type: dict
        health:
          description: >-
            GPU health: per GPU the ECC mode and uncorrectable/corrected counts, retired pages, row remapping,
            clocks event reasons and NVLink fabric state (NVML, else nvidia-smi); the kernel log's Xid events
            (dmesg, else the journal); the PCIe AER counters of the GPUs and the ports above them; the fabric
            manager service on NVSwitch hosts.
          type: dict
          returned: with the gpus subset
        host_settings:
          description: The CPU vendor (C(amd), C(intel)) and nvidia_uvm's C(uvm_disable_hmm), each null when not read;
            the PCIe Blackwell findings judge them.
          type: dict
          returned: with the gpus subset
        packages:
          description: >-
            Installed NVIDIA driver, CUDA and NCCL packages with their holds (dpkg-query), and whether
            unattended-upgrades is installed and on and what its Package-Blacklist holds; null where not read.
          type: dict
          returned: with the gpus subset
        proxmox:
          description: >-
            Only on a Proxmox VE node: its version, and every VM that passes PCI devices through, as it will
            start next time (current config plus pending changes): machine type, BIOS, each hostpci line joined
            to the host device's driver, IOMMU group and BARs, the GPU clique per hostpci, KVM hidden or not, CPU
            type, NUMA, hugepages, ballooning, memory, smbios1 uuid, OVMF 64-bit MMIO window against the BARs'
            need.
          type: dict
          returned: on Proxmox VE nodes
        problems:
          description: What could not be read, and why.
          type: list
          elements: dict
        findings:
          description: Findings, worst first, each with C(id), C(severity) (critical, warning, info), C(summary),
            C(evidence) and C(remedy).
          type: list
          elements: dict
        summary:
          description: Verdict (fit, fit with warnings, unfit), GPU count and models, P2P verdict, worst finding.
          type: dict
facts_json:
  description: >-
    C(ansible_facts.gpu_host) again, as one JSON string, for M(gpuhost.gpu.gpu_audit_report): a fleet's facts reach it
    in one template without Ansible walking every value of every host's facts.
  returned: always
  type: str
capture_path:
  description: The file O(save_capture) wrote, on the host the module ran on; replayable with O(capture).
  returned: when O(save_capture) is true, reading the live system, out of check mode
  type: str
  sample: /tmp/gpuhost-capture-3v9k2x1q.json
"""

import json

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import SubsetError, audit, resolve_subsets
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CaptureError, LiveSource, ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import ManifestError, load
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import DEFAULT_MIN_BAR1_MIB, RuleOptions

from ansible.module_utils.basic import AnsibleModule

CAPTURE_MODE = 0o600


def get_argument_spec() -> dict:
    return {
        "gather_subset": {"type": "list", "elements": "str", "default": ["all"]},
        "capture": {"type": "path"},
        "save_capture": {"type": "bool", "default": False},
        "save_capture_path": {"type": "path"},
        "capture_redact": {"type": "list", "elements": "str", "default": []},
        "tensor_parallel_gpus": {"type": "list", "elements": "int", "default": []},
        "min_bar1_mib": {"type": "int", "default": DEFAULT_MIN_BAR1_MIB},
        "manifest": {"type": "dict"},
        "dcgm_diag": {"type": "bool", "default": False},
        "dcgm_diag_timeout": {"type": "int", "default": 300},
    }


def load_capture(path: str) -> ReplaySource:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise CaptureError(f"cannot read the capture {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CaptureError(f"the capture {path} is not valid JSON ({exc}); expected the file that "
                           "playbooks/capture.yml writes") from None
    source = ReplaySource(data)
    if source.partial:
        # Such a capture holds only what the material held, and its account of what it did not show is gpu_analyze's.
        raise CaptureError(f"the capture {path} was built from saved material (a bug report or pasted outputs), not "
                           "taken from a live host: expected a capture saved by playbooks/capture.yml; give this one "
                           "to gpuhost.gpu.gpu_analyze (playbooks/analyze.yml, make analyze INPUT=...), the module "
                           "that reads material")
    return source


def write_capture(capture: dict, path: str | None) -> tuple[str, bool]:
    """Write the capture, readable by its owner only; the path, and whether a given file changed.

    Without a path, a new temporary file: the caller fetches and removes it, so it changes nothing that lasts.
    """
    # Loaded only to save a capture: a host compiles every module it imports, on every run.
    from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import plan_files, write_new

    content = (json.dumps(capture, indent=1, sort_keys=True) + "\n").encode("utf-8")
    if not path:
        return write_new(content, prefix="gpuhost-capture-", suffix=".json", mode=CAPTURE_MODE), False
    # A rename replaces whatever the path was (even a symlink planted there) instead of writing through it.
    return path, bool(plan_files({path: content}, mode=CAPTURE_MODE).commit())


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    try:
        subsets = resolve_subsets(params["gather_subset"])
        redactions = None
        if params["save_capture"] or params["capture_redact"]:
            # Loaded only to save a capture: a host compiles every module it imports, on every run.
            from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_privacy import compile_redactions

            redactions = compile_redactions(params["capture_redact"])
        source = load_capture(params["capture"]) if params["capture"] else \
            LiveSource(record=params["save_capture"], redact=redactions)
        manifest = load(params["manifest"], "the manifest (option manifest)") if params["manifest"] else None
        options = RuleOptions(tensor_parallel_gpus=params["tensor_parallel_gpus"] or None,
                              min_bar1_mib=params["min_bar1_mib"], manifest=manifest)
        facts = audit(source, subsets, options, dcgm_diag=params["dcgm_diag"],
                      dcgm_diag_timeout_s=params["dcgm_diag_timeout"])
    except (SubsetError, CaptureError, ManifestError) as exc:
        module.fail_json(msg=str(exc))
    # The facts again as one JSON string: gpu_audit_report takes a whole fleet's from it without Ansible
    # walking every value of every host's facts to template them into its arguments.
    result = {"changed": False, "ansible_facts": {"gpu_host": facts}, "facts_json": json.dumps(facts, sort_keys=True)}
    if params["save_capture"] and not isinstance(source, LiveSource):
        module.warn("save_capture is ignored when replaying a capture: nothing was read from this host")
    elif params["save_capture"] and not module.check_mode:
        # Loaded only to save a capture, as in write_capture.
        from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError

        # The path only: a capture in the result would be printed by -v and kept in every registered variable.
        try:
            result["capture_path"], result["changed"] = write_capture(source.capture, params["save_capture_path"])
        except ReportFileError as exc:
            module.fail_json(msg=f"cannot write the capture to {params['save_capture_path'] or 'a temporary file'}: "
                                 f"{exc.reason or exc}; set save_capture_path to a writable file")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
