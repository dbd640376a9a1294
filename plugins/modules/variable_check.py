#!/usr/bin/python
"""Ansible module: warn about variables that look like a role's (or a shared deploy_* one) but that nothing reads."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: variable_check
short_description: Warn about misspelled role variables, naming the closest real one
description:
  - A variable that starts with a role's prefix (C(gpu_audit_)) or a shared prefix (C(deploy_)) but that no role or
    playbook reads is a typo until proven otherwise. Read as unset, its default applies without a word
    (C(gpu_audit_captur) for C(gpu_audit_capture) audits the controller instead of replaying the capture). This
    module warns about each, naming the closest variable that exists
    (C(gpu_audit_captur is not a variable of role gpu_audit; did you mean gpu_audit_capture?)).
  - The names that exist are read from the roles' and playbooks' files, so a new variable needs no list kept by hand;
    suggestions come first from the role's C(meta/argument_specs.yml) options and C(defaults/main.yml).
  - Meant to run once per play on the controller (C(run_once), C(delegate_to) C(localhost)) with the variable names
    of every host of the play, so that a fleet of hundreds pays for one task.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  names:
    description:
      - The variable names to check, for example those of every host of the play
        (C(ansible_play_hosts_all | map('extract', hostvars\) | map('list'\) | flatten | unique)), which hold the
        inventory's and the extra variables.
    type: list
    elements: str
    required: true
  roles_dir:
    description:
      - The directory holding the roles (each C(<role>/meta/argument_specs.yml)); every role in it owns the prefix
        C(<role>_). A variable belongs to the role with the longest prefix it starts with (C(sglang_serve_port) to
        C(sglang_serve), not C(sglang)).
    type: path
    required: true
  roles:
    description: The roles whose variables are checked; empty checks every role of O(roles_dir).
    type: list
    elements: str
    default: []
  shared:
    description:
      - Prefixes of variables that several roles read (C(deploy_), for C(deploy_model), C(deploy_accept_findings),
        C(deploy_known_good_overrides)), checked against the names the roles read with that prefix.
    type: list
    elements: str
    default: []
  paths:
    description:
      - More directories whose files use variables (the playbooks, for C(gpu_audit_hosts)); their names count as
        existing. A directory that does not exist is skipped.
    type: list
    elements: path
    default: []
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; reads files on the machine it runs on, changes nothing.
  - It warns and never fails, so that a variable it does not know (one read by a play of your own) costs a warning,
    not a run.
"""

EXAMPLES = r"""
- name: Check the play's variable names
  gpuhost.gpu.variable_check:
    names: "{{ ansible_play_hosts_all | map('extract', hostvars) | map('list') | flatten | unique }}"
    roles_dir: "{{ role_path | dirname }}"
    roles: [deployment_gate]
    shared: [deploy_]
    paths: ["{{ role_path | dirname | dirname }}/playbooks"]
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
unknown:
  description: One entry per variable nothing reads, C(name), C(owner), C(suggestion) (null when none is close) and
    C(message).
  returned: always
  type: list
  elements: dict
  sample:
    - name: gpu_audit_captur
      owner: a variable of role gpu_audit
      suggestion: gpu_audit_capture
      message: gpu_audit_captur is not a variable of role gpu_audit; did you mean gpu_audit_capture?
"""

import os
import re

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import names_in_text, unknown_variables

from ansible.module_utils.basic import AnsibleModule

# Files that use variables: tasks, defaults, meta, templates.
SUFFIXES = (".yml", ".yaml", ".j2")


def get_argument_spec() -> dict:
    return {
        "names": {"type": "list", "elements": "str", "required": True},
        "roles_dir": {"type": "path", "required": True},
        "roles": {"type": "list", "elements": "str", "default": []},
        "shared": {"type": "list", "elements": "str", "default": []},
        "paths": {"type": "list", "elements": "path", "default": []},
    }


def read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""  # a file that cannot be read adds no names; the worst outcome is one warning too many


def texts(directory: str) -> dict[str, str]:
    """Path -> content of every file under directory that can use a variable; hidden directories skipped."""
    found = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(SUFFIXES):
                found[os.path.join(root, name)] = read(os.path.join(root, name))
    return found


def documented(text: str, prefix: str) -> set[str]:
    """Names declared as keys (an argument spec's options, a defaults file's variables)."""
    return set(re.findall(rf"^\s*({re.escape(prefix)}\w+):", text, re.MULTILINE))


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    roles_dir = params["roles_dir"]
    if not os.path.isdir(roles_dir):
        module.fail_json(msg=f"roles_dir: expected the directory holding the roles; found {roles_dir!r}, which is "
                             "not a directory. Pass the parent of a role's role_path")
    roles = sorted(d for d in os.listdir(roles_dir) if os.path.isdir(os.path.join(roles_dir, d, "meta")))
    unknown_roles = sorted(set(params["roles"]) - set(roles))
    if unknown_roles:
        module.fail_json(msg=f"roles: expected roles of {roles_dir} ({', '.join(roles)}); found "
                             f"{', '.join(unknown_roles)}. Name roles that exist")
    owners = {f"{role}_": f"a variable of role {role}" for role in roles}
    owners.update({prefix: f"one of the shared {prefix}* variables" for prefix in params["shared"]})
    files = texts(roles_dir)
    for path in params["paths"]:
        if os.path.isdir(path):
            files.update(texts(path))
    known: set[str] = set()
    for text in files.values():
        known |= names_in_text(text, owners)
    docs: dict[str, set[str]] = {prefix: set() for prefix in owners}
    for role in roles:
        for part in ("meta/argument_specs.yml", "defaults/main.yml"):
            text = files.get(os.path.join(roles_dir, role, part), "")
            docs[f"{role}_"] |= documented(text, f"{role}_")
            for prefix in params["shared"]:
                # A shared variable is documented where a role's defaults take it (deploy_model | default({})).
                docs[prefix] |= names_in_text(text, [prefix])
    checked = {f"{role}_" for role in (params["roles"] or roles)} | set(params["shared"])
    found = [entry for entry in unknown_variables(params["names"], owners, known, docs)
             if any(entry["owner"] == owners[prefix] for prefix in checked)]
    for entry in found:
        module.warn(entry["message"])
    module.exit_json(changed=False, unknown=found)


if __name__ == "__main__":
    main()
