"""Lookup plugin: the directory on the controller where the collection's reports go, resolved once."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: report_dir
short_description: The controller directory of the collection's reports, from gpuhost_report_dir
description:
  - Returns the one directory every role and playbook of C(gpuhost.gpu) writes its reports to and reads them back
    from (the audit's C(<host>.md), C(.json) and C(fleet.md), the benchmark folded into them, the gate's
    C(<host>-gate.md), the served model's C(<host>-serving.json), the Proxmox fix's C(<host>-p2p-fix.md), the offline
    analysis and the merged C(fleet.md)).
  - The directory is the variable C(gpuhost_report_dir); unset or empty, C(reports). A relative path is taken from
    the directory C(ansible-playbook) was started from (the shell's C(PWD)), as it would be on the command line,
    whichever role, playbook or module reads it. A path starting with C(/) or C(~) is returned as it is.
  - Takes no terms. The directory need not exist; the tasks that write reports create it.
  - A variable it replaced (C(gpu_audit_report_dir), C(gpu_bench_report_dir), C(deployment_gate_report_dir),
    C(sglang_serve_report_dir), C(proxmox_vm_gpu_report_dir), C(proxmox_fix_report_dir), C(gpu_analyze_report_dir))
    is no longer read; where one is set, a warning says so and names the directory used.
version_added: "1.1.0"
extends_documentation_fragment:
  - gpuhost.gpu.controller_paths
author:
  - GPU host audit maintainers (@gpuhost)
options:
  _terms:
    description: None; the directory comes from C(gpuhost_report_dir).
    required: false
notes:
  - Resolving here, not in each role, is what makes C(-e gpuhost_report_dir=out/reports) mean the same directory to
    the audit, the benchmark, the gate, the deployment and the playbooks; the relative path is never taken from a
    role's or a playbook's directory.
seealso:
  - plugin: gpuhost.gpu.controller_path
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Write the gate's verdict beside the audit's reports
  gpuhost.gpu.host_report:
    dest: "{{ lookup('gpuhost.gpu.report_dir') }}"
    host: "{{ inventory_hostname }}"
    files:
      "-gate.json": "{{ deployment_gate_result | to_nice_json }}\n"
  delegate_to: localhost

# ansible-playbook site.yml -e gpuhost_report_dir=out/reports   (from /srv/gpu: /srv/gpu/out/reports)
- name: Say where the reports are
  ansible.builtin.debug:
    msg: "Reports: {{ lookup('gpuhost.gpu.report_dir') }}"
"""

RETURN = r"""
_raw:
  description: One item, the report directory as a path on the controller (absolute unless it starts with C(~)).
  type: list
  elements: path
  sample: ["/srv/gpu/reports"]
"""

from ansible_collections.gpuhost.gpu.plugins.plugin_utils.controller_paths import (
    REPORT_DIR_DEFAULT,
    REPORT_DIR_VARIABLE,
    RETIRED_REPORT_DIR_VARIABLES,
    resolve,
    retired_report_dir_message,
)

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display

display = Display()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleError(f"gpuhost.gpu.report_dir takes no terms; found {list(terms)!r}. The directory comes "
                               f"from the variable {REPORT_DIR_VARIABLE}: set it instead")
        value = (variables or {}).get(REPORT_DIR_VARIABLE)
        # The variable as the user wrote it ("{{ inventory_dir }}/reports" in group_vars): templated here.
        value = self._templar.template(value) if value is not None else None
        if value is not None and not isinstance(value, str):
            raise AnsibleError(f"{REPORT_DIR_VARIABLE}: expected a directory path on the controller; found "
                               f"{value!r} ({type(value).__name__}). Give one path, such as reports or "
                               "/var/lib/gpuhost/reports")
        report_dir = resolve(value or REPORT_DIR_DEFAULT, kwargs.get("base") or "")
        # Ansible shows a warning once however many tasks and hosts repeat it.
        for name in RETIRED_REPORT_DIR_VARIABLES:
            if name in (variables or {}):
                display.warning(retired_report_dir_message(name, report_dir))
        return [report_dir]
