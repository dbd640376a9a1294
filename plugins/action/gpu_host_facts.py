"""Action for gpu_host_facts: a task with ``bundle`` runs gpu_material_facts instead, with the same arguments.

The module every audited host runs ships only what a live or capture-replay audit imports (AnsiballZ sends
every module_utils file a module imports, on every run); reading support material (bug reports, pasted
outputs) is gpu_material_facts' job. This keeps ``gpuhost.gpu.gpu_host_facts: {bundle: ...}`` working as documented.
A ``bundle`` given with a ``capture`` goes to gpu_host_facts, whose argument check says they exclude each other.
"""

from __future__ import annotations

from ansible.plugins.action.normal import ActionModule as NormalAction

OFFLINE_MODULE = "gpuhost.gpu.gpu_material_facts"


class ActionModule(NormalAction):
    def _execute_module(self, module_name=None, module_args=None, *args, **kwargs):
        task_args = self._task.args
        if module_name is None and task_args.get("bundle") and not task_args.get("capture"):
            module_name = OFFLINE_MODULE
            module_args = {name: value for name, value in (module_args or task_args).items() if name != "capture"}
        return super()._execute_module(module_name, module_args, *args, **kwargs)
