"""Lookup plugin: paths on the controller taken from the directory ansible-playbook runs from."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: controller_path
short_description: Controller paths a user gave, a relative one taken from where ansible-playbook runs
description:
  - Returns each term as a path on the controller. A relative path is joined to the directory C(ansible-playbook)
    was started from (the shell's C(PWD)), as it would be on the command line; left as it is, a module would take it
    from the playbook's directory and a lookup from the role's. A path starting with C(/) or C(~), and an empty
    one, is returned as it is.
  - Without terms, returns the directory C(ansible-playbook) was started from itself.
  - The rule C(gpuhost.gpu.report_dir) applies to the report directory, for the other paths a user gives (a capture
    to replay, the directories of saved captures, wheels and locks, saved logs and C(--help) outputs).
version_added: "1.1.0"
extends_documentation_fragment:
  - gpuhost.gpu.controller_paths
author:
  - GPU host audit maintainers (@gpuhost)
options:
  _terms:
    description: The paths, as the user gave them; none for the directory itself.
    required: false
seealso:
  - plugin: gpuhost.gpu.report_dir
    plugin_type: lookup
"""

EXAMPLES = r"""
# ansible-playbook playbooks/audit.yml -e gpu_audit_capture=captures/gpu-node-1.json   (from /srv/gpu)
- name: Replay the capture the user named
  gpuhost.gpu.gpu_host_facts:
    capture: "{{ lookup('gpuhost.gpu.controller_path', gpu_audit_capture) }}"   # /srv/gpu/captures/gpu-node-1.json

- name: Say where relative paths are taken from
  ansible.builtin.debug:
    msg: "Relative paths are taken from {{ lookup('gpuhost.gpu.controller_path') }}"   # /srv/gpu
"""

RETURN = r"""
_raw:
  description: The paths, in the order of the terms; without terms, the directory ansible-playbook runs from.
  type: list
  elements: path
  sample: ["/srv/gpu/captures/gpu-node-1.json"]
"""

from ansible_collections.gpuhost.gpu.plugins.plugin_utils.controller_paths import launch_dir, resolve

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        base = kwargs.get("base") or ""
        if not terms:
            return [base or launch_dir()]
        paths = []
        for term in terms:
            if not isinstance(term, str):
                raise AnsibleError(f"gpuhost.gpu.controller_path: expected a path; found {term!r} "
                                   f"({type(term).__name__})")
            paths.append(resolve(term, base))
        return paths
