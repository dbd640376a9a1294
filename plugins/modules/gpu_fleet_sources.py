#!/usr/bin/python
"""Ansible module: record where each host's row of fleet.md comes from, beside the reports, for the merge."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_fleet_sources
short_description: Record, per host of the play, where its row of fleet.md comes from
description:
  - "Writes C(<dest>/fleet.d/<host>.json) for every host of O(hosts) that O(sources) gives a status of this run:
    C({\"audit\": \"this run\"}) for a host audited, else C(unreachable) or C(failed) with the reason (C(msg))."
  - "With these files a report directory holds everything fleet.md is made of, so that M(gpuhost.gpu.gpu_fleet_merge)
    (playbooks/merge_reports.yml) rebuilds fleet.md from one or several directories exactly as one run over the
    whole fleet writes it, for example after the slices of an AWX sliced job. One file per host, so that runs over
    disjoint parts of the inventory never write the same file."
  - "A host that O(sources) marks C(not audited) (a row a table kept from an earlier run) is not recorded: it is not
    this run's. A file is rewritten only when its content differs; check mode writes nothing; diff mode shows the
    changed files. Host names become file names by the rules of M(gpuhost.gpu.gpu_audit_report), or nothing is written."
version_added: "1.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  dest:
    description: The report directory (M(gpuhost.gpu.gpu_audit_report)'s O(gpuhost.gpu.gpu_audit_report#module:dest)).
    type: path
    required: true
  sources:
    description: M(gpuhost.gpu.gpu_audit_report)'s RV(gpuhost.gpu.gpu_audit_report#module:fleet) return, per host where
      its row comes from.
    type: dict
    required: true
  hosts:
    description: The hosts of the play (C(ansible_play_hosts_all)); only these are recorded.
    type: list
    elements: str
    required: true
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - "Supports check mode and diff mode."
"""

EXAMPLES = r"""
- name: Record where each row of fleet.md comes from
  gpuhost.gpu.gpu_fleet_sources:
    dest: "{{ lookup('gpuhost.gpu.report_dir') }}"
    sources: "{{ gpu_audit_reports.fleet }}"
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: Paths that were (or in check mode would be) written because their content changed.
  returned: always
  type: list
  elements: str
  sample: [reports/fleet.d/gpu-node-1.json]
"""

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.fleet_runs import source_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import REPORT_MODE
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError, plan_files

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "dest": {"type": "path", "required": True},
        "sources": {"type": "dict", "required": True},
        "hosts": {"type": "list", "elements": "str", "required": True},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    dest = module.params["dest"]
    try:
        planned = plan_files(source_files(dest, module.params["sources"], module.params["hosts"]), warn=module.warn,
                             at_most=REPORT_MODE)
        diffs = planned.diff() if module._diff else []
        changed = planned.commit(module.check_mode, create_dirs=True)
    except ReportFileError as exc:
        module.fail_json(msg=f"gpu_fleet_sources: {exc}; set gpuhost_report_dir to a writable directory",
                         changed=bool(exc.written), written=sorted(exc.written))
    result = {"changed": bool(changed), "written": sorted(changed)}
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
