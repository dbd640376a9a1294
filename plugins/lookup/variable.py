"""Lookup plugin: a variable of the collection by its current name, read under its former name where a run still
sets that."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: variable
short_description: A variable of gpuhost.gpu by its current name, its former name still read with a warning
description:
  - Returns the value of each variable named, templated, as the role or playbook that reads it would see it.
  - A variable the collection renamed (C(gpu_bench_model_profile) is now C(gpu_bench_model),
    C(gpu_analyze_model_profile) C(gpu_analyze_model)) keeps working under its former name. Where a run sets the
    former name, its value is returned in place of the current name's (which may hold only the role's default), and
    a warning, shown once for the run, asks for the current name.
version_added: "1.1.0"
author:
  - GPU host audit maintainers (@gpuhost)
options:
  _terms:
    description: The current names of the variables to read.
    required: true
notes:
  - The table of renamed variables is C(plugins/plugin_utils/renamed_variables.py), the one place that names the
    former variables.
seealso:
  - plugin: gpuhost.gpu.report_dir
    plugin_type: lookup
"""

EXAMPLES = r"""
# In the gpu_bench role: gpu_bench_model, or gpu_bench_model_profile where an older inventory sets that.
- name: Say which model the all-reduce curve is priced for
  ansible.builtin.debug:
    msg: "{{ lookup('gpuhost.gpu.variable', 'gpu_bench_model') }}"
"""

RETURN = r"""
_raw:
  description: The value of each variable named, in the order named.
  type: list
  elements: raw
"""

from ansible_collections.gpuhost.gpu.plugins.plugin_utils.renamed_variables import (
    RENAMED_VARIABLES,
    renamed_variable_message,
)

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display

display = Display()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        values = []
        for name in terms:
            former = RENAMED_VARIABLES.get(name)
            if former is not None and former in variables:
                # Ansible shows a warning once however many tasks and hosts repeat it.
                display.warning(renamed_variable_message(name, former))
                name = former
            elif name not in variables:
                raise AnsibleError(f"gpuhost.gpu.variable: expected a variable that is set; found {name!r} unset. "
                                   "Set it, or name a variable of the role or playbook that reads it")
            values.append(self._templar.template(variables[name]))
        return values
