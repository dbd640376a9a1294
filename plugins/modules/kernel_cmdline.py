#!/usr/bin/python
"""Ansible module: make the boot loader's kernel command line hold some parameters, keeping every other one."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Make the kernel command line that the boot loader passes hold some parameters
description:
  - Edits the kernel command line where the boot loader keeps it, C(GRUB_CMDLINE_LINUX_DEFAULT) in
    C(/etc/default/grub) (O(format=grub)) or the one line of C(/etc/kernel/cmdline) (O(format=kernel_cmdline),
    systemd-boot as C(proxmox-boot-tool) keeps it). It does not run C(update-grub) or C(proxmox-boot-tool refresh);
    the caller does, when RV(changed) is true.
  - "Each of O(params) ends up as one word: a missing one is appended, a key with a conflicting option
    (C(intel_iommu=off)) has it replaced and keeps its other options, a key given several times becomes one.
    Every other word, the quoting and the blanks stay as they were, so a line that holds the parameters already
    is not touched and a second run reports no change."
  - In C(/etc/default/grub) the last assignment counts, as in the shell; the value keeps its quotes. A file
    without the variable gets it appended. Words after C(--) are init's and never changed.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  path:
    description: The file to edit.
    type: path
    required: true
  format:
    description: How the file holds the command line.
    type: str
    choices: [grub, kernel_cmdline]
    required: true
  params:
    description: The parameters the command line must hold.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The parameter's name, such as C(intel_iommu).
        type: str
        required: true
      value:
        description:
          - The option it must carry among its comma-separated options, such as C(on).
          - Unset, the parameter need not be there; only O(params[].conflicts) are taken out (the word too,
            when nothing is left of it).
        type: str
      conflicts:
        description: Options that must not be there, such as C(off); each is taken out.
        type: list
        elements: str
        default: []
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode and diff mode (the file before and after).
  - A value quoted over several lines, or an unclosed quote, fails with the line to fix by hand.
seealso:
  - module: gpuhost.gpu.gpu_passthrough_host
"""

EXAMPLES = r"""
- name: Turn the Intel IOMMU on, in passthrough mode, for GRUB
  gpuhost.gpu.kernel_cmdline:
    path: /etc/default/grub
    format: grub
    params:
      - {name: intel_iommu, value: "on", conflicts: ["off"]}
      - {name: iommu, value: pt, conflicts: ["off", nopt]}
  register: cmdline

- name: Regenerate grub.cfg
  ansible.builtin.command:
    argv: [update-grub]
  when: cmdline.changed
  changed_when: true
"""

RETURN = r"""
changed:
  description: Whether the file was (or, in check mode, would be) rewritten.
  returned: always
  type: bool
cmdline_before:
  description: The kernel command line the file held.
  returned: always
  type: str
  sample: quiet
cmdline_after:
  description: The kernel command line it holds now (or would, in check mode).
  returned: always
  type: str
  sample: quiet intel_iommu=on iommu=pt
"""

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError, write_atomically
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import (
    CmdlineError,
    Edit,
    Rule,
    edit_grub_default,
    edit_kernel_cmdline_file,
)

from ansible.module_utils.basic import AnsibleModule

EDITORS = {"grub": edit_grub_default, "kernel_cmdline": edit_kernel_cmdline_file}


def get_argument_spec() -> dict:
    return {
        "path": {"type": "path", "required": True},
        "format": {"type": "str", "choices": ["grub", "kernel_cmdline"], "required": True},
        "params": {"type": "list", "elements": "dict", "required": True, "options": {
            "name": {"type": "str", "required": True},
            "value": {"type": "str"},
            "conflicts": {"type": "list", "elements": "str", "default": []},
        }},
    }


def rules_of(params: list[dict[str, Any]]) -> list[Rule]:
    return [Rule(p["name"], p.get("value"), frozenset(p.get("conflicts") or [])) for p in params]


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    path = module.params["path"]
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        module.fail_json(msg=f"expected the kernel command line in {path}, but it cannot be read "
                             f"({exc.strerror or exc}); check the boot loader in use and the path given")
    try:
        edit: Edit = EDITORS[module.params["format"]](text, rules_of(module.params["params"]))
    except CmdlineError as exc:
        module.fail_json(msg=f"{path}: {exc}")
    result: dict[str, Any] = {"changed": edit.changed, "cmdline_before": edit.cmdline_before,
                              "cmdline_after": edit.cmdline_after}
    if edit.changed and module._diff:
        result["diff"] = {"before_header": path, "after_header": path, "before": edit.text_before,
                          "after": edit.text_after}
    if edit.changed and not module.check_mode:
        try:
            # A crash leaves the old boot configuration or the new one, never a part of it.
            write_atomically(path, edit.text_after.encode("utf-8"))
        except ReportFileError as exc:
            module.fail_json(msg=f"{exc}; nothing was changed. Run the task with become, or check that {path} is "
                                 "the boot loader's file on a writable file system")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
