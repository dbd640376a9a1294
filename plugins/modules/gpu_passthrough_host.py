#!/usr/bin/python
"""Ansible module: what a Proxmox VE node must hand to vfio-pci for GPU passthrough, and what it has already."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_passthrough_host
short_description: Plan and check a Proxmox VE node's GPU passthrough (IOMMU, vfio-pci), changing nothing
description:
  - Reads the node's PCI functions and IOMMU groups from sysfs (with the audit's readers), the CPU vendor from
    C(/proc/cpuinfo) and the running kernel's command line from C(/proc/cmdline).
  - "Plans: the GPUs (O(gpus), or every NVIDIA display and 3D controller), every other function of their boards
    (same slot: HDMI audio, USB-C), the C(vendor:device) ids vfio-pci must claim, the host drivers vfio-pci must
    load before, and the kernel parameters that turn the IOMMU on for this CPU (C(intel_iommu=on iommu=pt);
    C(iommu=pt) alone on AMD, whose IOMMU is on by default)."
  - "Refuses, in RV(plan.refusals), a GPU whose IOMMU group holds a device that is neither a function of a chosen
    board nor a PCI bridge, and an id that a device not chosen has too. It reports, and does not fail: the
    caller decides."
  - Checks what the running kernel has of the plan (RV(pending)); after a reboot that applied it, RV(ready) is
    true.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  gpus:
    description: The GPUs to pass through, as PCI addresses (C(0000:41:00.0)); empty means every NVIDIA GPU.
    type: list
    elements: str
    default: []
  cpu_vendor:
    description: The CPU vendor, which decides the IOMMU parameter; C(auto) reads it from C(/proc/cpuinfo).
    type: str
    choices: [auto, intel, amd]
    default: auto
  sysfs_root:
    description:
      - The directory holding C(sys/) to read, and C(proc/cmdline) and C(proc/cpuinfo) when it is not C(/).
      - Another than C(/) only for tests (a fake sysfs tree).
    type: path
    default: /
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; it changes nothing in any mode.
seealso:
  - module: gpuhost.gpu.kernel_cmdline
  - module: gpuhost.gpu.gpu_host_facts
"""

EXAMPLES = r"""
- name: Plan the passthrough of every NVIDIA GPU
  gpuhost.gpu.gpu_passthrough_host:
  register: passthrough

- name: Refuse what must not be bound
  ansible.builtin.fail:
    msg: "{{ passthrough.plan.refusals | join(' ') }}"
  when: passthrough.plan.refusals | length > 0
"""

RETURN = r"""
cpu_vendor:
  description: C(intel) or C(amd).
  returned: always
  type: str
cmdline_params:
  description: The kernel parameters the boot loader must pass, in the shape of the kernel_cmdline module's params.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "intel_iommu", "value": "on", "conflicts": ["off"]}, {"name": "iommu", "value": "pt",
           "conflicts": ["nopt", "off"]}]
running_cmdline:
  description: The running kernel's command line (C(/proc/cmdline)).
  returned: always
  type: str
cmdline_ok:
  description: Whether the running kernel got every one of RV(cmdline_params).
  returned: always
  type: bool
iommu_enabled:
  description: Whether the kernel shows IOMMU groups or IOMMU hardware.
  returned: always
  type: bool
plan:
  description: What to bind and why not.
  returned: always
  type: dict
  contains:
    gpus:
      description: The GPUs chosen.
      type: list
      elements: str
    functions:
      description: Every function handed to vfio-pci (the GPUs and their boards' other functions), with ids, class,
        driver and IOMMU group now.
      type: list
      elements: dict
    vfio_ids:
      description: The C(vendor:device) ids for C(options vfio-pci ids=), GPUs first.
      type: list
      elements: str
      sample: ["10de:2bb4", "10de:22e8"]
    preceded_drivers:
      description: "Host drivers that must load after vfio-pci (C(softdep <driver> pre: vfio-pci))."
      type: list
      elements: str
    groups_checked:
      description: Whether the IOMMU groups could be checked (false while the IOMMU is off).
      type: bool
    refusals:
      description: Why the host must not be changed, each with the devices and the remedies; empty when it may.
      type: list
      elements: str
    notes:
      description: What could not be checked yet, and why.
      type: list
      elements: str
    host_nvidia_gpus:
      description: NVIDIA GPUs not chosen, which stay with the host.
      type: list
      elements: str
iommu_groups:
  description: The IOMMU group of each chosen function, with every member.
  returned: always
  type: dict
pending:
  description: What the running kernel lacks of the plan (its command line, vfio-pci bound to each function).
  returned: always
  type: list
  elements: str
ready:
  description: Whether RV(pending) is empty and there are GPUs to pass through.
  returned: always
  type: bool
problems:
  description: sysfs entries that could not be read.
  returned: always
  type: list
  elements: dict
"""

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.passthrough_host import gather_passthrough
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.rooted_source import RootedSource
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import satisfies
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.passthrough_host import (
    PassthroughError,
    cmdline_rules,
    pending_reasons,
    plan_from_facts,
)

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "gpus": {"type": "list", "elements": "str", "default": []},
        "cpu_vendor": {"type": "str", "choices": ["auto", "intel", "amd"], "default": "auto"},
        "sysfs_root": {"type": "path", "default": "/"},
    }


def result_of(host: dict[str, Any], gpus: list[str], vendor_choice: str) -> dict[str, Any]:
    """The module's result from gathered facts; raises PassthroughError for a bad choice."""
    vendor = host["cpu_vendor"] if vendor_choice == "auto" else vendor_choice
    rules = cmdline_rules(vendor)
    plan = plan_from_facts(host["devices"], host["iommu_groups"], gpus)
    by_bdf = {d["bdf"]: d for d in host["devices"]}
    cmdline_ok = satisfies(host["cmdline"], rules)
    pending = pending_reasons(plan, by_bdf, cmdline_ok, rules)
    groups = {f.iommu_group: host["iommu_groups"].get(f.iommu_group, []) for f in plan.functions if f.iommu_group}
    return {
        "changed": False,
        "cpu_vendor": vendor,
        "cmdline_params": [{"name": r.key, "value": r.value, "conflicts": sorted(r.conflicts)} for r in rules],
        "running_cmdline": host["cmdline"],
        "cmdline_ok": cmdline_ok,
        "iommu_enabled": bool(host["iommu_enabled"]),
        "plan": plan.as_dict(),
        "iommu_groups": groups,
        "pending": pending,
        "ready": not pending and bool(plan.gpus),
        "problems": host["problems"],
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    host = gather_passthrough(RootedSource(module.params["sysfs_root"]))
    try:
        result = result_of(host, module.params["gpus"], module.params["cpu_vendor"])
    except PassthroughError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
