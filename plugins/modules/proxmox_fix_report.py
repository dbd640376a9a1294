#!/usr/bin/python
"""Ansible module: write the before/after report of a Proxmox guest's P2P fix."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: proxmox_fix_report
short_description: Write the before/after report of a Proxmox guest whose VM got the P2P fix
description:
  - Compares the guest's audit and benchmark taken before and after the change of its VM (proxmox_vm_gpu) and
    writes C(<dest>/<guest>-p2p-fix.json) and C(.md) on the machine it runs on (the controller, delegated).
  - "Compared: the P2P read matrix (C(nvidia-smi topo -p2p r)), the probe's proof (pairs granted peer access, pairs
    whose data arrived intact), the all-reduce time per message size and the decode ceiling it predicts. What was
    not measured is null, never a guess."
  - "The verdict: C(fixed) (every pair OK and proven by the probe), C(granted_unproven) (OK, no probe ran),
    C(not_fixed), C(pending) (the change waits for QEMU to start again; O(after) not given), C(restored) (the
    backed-up config was put back, O(restored))."
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  dest:
    description: The reports directory.
    type: path
    required: true
  guest:
    description: The guest's inventory name.
    type: str
    required: true
  node:
    description: The Proxmox node's inventory name.
    type: str
  vmid:
    description: The VM's id.
    type: int
  date:
    description: When the change was made, as it should read in the report.
    type: str
  before:
    description: The guest before the change, as C(facts) (its C(ansible_facts.gpu_host)) and C(bench) (its
      C(gpu_bench_results)).
    type: dict
    required: true
  after:
    description: The guest after the change, as O(before); omitted when it was not measured again.
    type: dict
  change:
    description: The result of proxmox_vm_gpu (C(changes), C(command_line), C(backup)) and C(restarted).
    type: dict
    default: {}
  restored:
    description: Why the backed-up config was put back (C(reason)) and which (C(backup)); omitted when it was not.
    type: dict
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode (nothing is written; RV(written) says what would be) and diff mode.
seealso:
  - module: gpuhost.gpu.proxmox_vm_gpu
  - module: gpuhost.gpu.gpu_audit_report
"""

EXAMPLES = r"""
- name: Write the before/after report
  gpuhost.gpu.proxmox_fix_report:
    dest: reports
    guest: glm5-vm
    node: pve-node-1
    vmid: 120
    before: {facts: "{{ before_facts }}", bench: "{{ before_bench }}"}
    after: {facts: "{{ ansible_facts.gpu_host }}", bench: "{{ gpu_bench_results }}"}
    change: "{{ vm_gpu }}"
  delegate_to: localhost
"""

RETURN = r"""
verdict:
  description: fixed, granted_unproven, not_fixed, pending or restored.
  returned: always
  type: str
summary:
  description: The report's verdict in one line.
  returned: always
  type: str
paths:
  description: The JSON and Markdown reports.
  returned: always
  type: dict
  sample: {json: reports/glm5-vm-p2p-fix.json, markdown: reports/glm5-vm-p2p-fix.md}
written:
  description: The paths written (in check mode, that would be) because their content changed.
  returned: always
  type: list
  elements: str
report:
  description: The report's data, as in the JSON file.
  returned: always
  type: dict
"""

import json

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import REPORT_MODE, host_file
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError, plan_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.p2p_fix import compare, measurement
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.p2p_fix_md import render

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "dest": {"type": "path", "required": True},
        "guest": {"type": "str", "required": True},
        "node": {"type": "str"},
        "vmid": {"type": "int"},
        "date": {"type": "str"},
        "before": {"type": "dict", "required": True},
        "after": {"type": "dict"},
        "change": {"type": "dict", "default": {}},
        "restored": {"type": "dict"},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    side = params["after"]
    report = compare(guest=params["guest"], node=params["node"], vmid=params["vmid"], date=params["date"],
                     before=measurement(params["before"].get("facts"), params["before"].get("bench")),
                     after=measurement(side.get("facts"), side.get("bench")) if side else None,
                     change=params["change"], restored=params["restored"])
    try:
        paths = {"json": host_file(params["dest"], params["guest"], "-p2p-fix.json"),
                 "markdown": host_file(params["dest"], params["guest"], "-p2p-fix.md")}
        planned = plan_files({paths["json"]: json.dumps(report, indent=1, sort_keys=True) + "\n",
                              paths["markdown"]: render(report)}, at_most=REPORT_MODE)
        diffs = planned.diff() if module._diff else []
        changed = planned.commit(module.check_mode, create_dirs=True)
    except ReportFileError as exc:
        module.fail_json(msg=f"proxmox_fix_report: {exc}")
    result = {"changed": bool(changed), "written": sorted(changed), "paths": paths, "verdict": report["verdict"],
              "summary": report["summary"], "report": report}
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
