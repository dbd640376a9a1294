#!/usr/bin/python
"""Ansible module: write one host's report files on the controller, named after the host, whole or not at all."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_report
short_description: Write a host's report files, C(<dest>/<host><suffix>), atomically and only when they change
description:
  - Writes each of O(files) to C(<dest>/<host><suffix>) on the machine it runs on (the controller, with
    C(delegate_to) C(localhost)), by the same rules as M(gpuhost.gpu.gpu_audit_report) follows for the audit's reports.
  - "The host name becomes the file name as it is, or the module fails before writing anything: a name that is
    empty, C(.) or C(..), holds C(/), NUL or another non-printable character, or is over 200 bytes is refused,
    with what to do."
  - Each file is written whole or not at all (a temporary file in the same directory, flushed to disk, renamed
    over the old one, removed when anything fails). A file is rewritten only when its content differs; a file
    replaced keeps its mode, a new one gets C(0644). A directory where a file goes fails the task, also in check
    mode.
  - Check mode says what would change and writes nothing; diff mode shows the changed files.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  dest:
    description: Directory for the files; created when missing.
    type: path
    required: true
  host:
    description: The inventory name of the host, the start of every file name.
    type: str
    required: true
  files:
    description:
      - Mapping of file name suffix (C(-gate.json)) to the file's text. A suffix may not hold C(/), NUL or another
        non-printable character.
    type: dict
    required: true
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Write the gate's verdict beside the audit's reports
  gpuhost.gpu.host_report:
    dest: "{{ playbook_dir }}/../reports"
    host: "{{ inventory_hostname }}"
    files:
      "-gate.json": "{{ gate_result | to_nice_json(sort_keys=true) }}\n"
      "-gate.md": "{{ lookup('ansible.builtin.template', 'gate.md.j2') }}"
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: Paths that were (or in check mode would be) written because their content changed.
  returned: always
  type: list
  elements: str
  sample: [reports/gpu-node-1-gate.json]
paths:
  description: Per suffix of O(files), the path of its file.
  returned: always
  type: dict
  sample: {"-gate.json": reports/gpu-node-1-gate.json, "-gate.md": reports/gpu-node-1-gate.md}
"""

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import REPORT_MODE, host_file
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError, plan_files

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "dest": {"type": "path", "required": True},
        "host": {"type": "str", "required": True},
        "files": {"type": "dict", "required": True},
    }


def suffix_problem(suffix: str, content: object) -> str | None:
    if not suffix or "/" in suffix or not suffix.isprintable():
        return (f"suffix {suffix!r}: expected a file name ending without '/', NUL or non-printable characters, "
                "such as '-gate.json'")
    if not isinstance(content, str):
        return (f"suffix {suffix!r}: expected the file's text as a string; found a {type(content).__name__}. "
                "Render it to text first (for example with to_nice_json)")
    return None


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    dest, host, files = module.params["dest"], module.params["host"], module.params["files"]
    problems = [why for suffix, content in files.items() for why in [suffix_problem(suffix, content)] if why]
    if problems:
        module.fail_json(msg="host_report: " + "; ".join(problems))
    try:
        paths = {suffix: host_file(dest, host, suffix) for suffix in files}
        planned = plan_files({paths[suffix]: content for suffix, content in files.items()}, at_most=REPORT_MODE)
    except ReportFileError as exc:
        module.fail_json(msg=f"host_report: {exc}")
    changed = planned.changed
    diffs = planned.diff() if module._diff else []
    try:
        planned.commit(module.check_mode, create_dirs=True)
    except ReportFileError as exc:
        module.fail_json(msg=f"host_report: {exc}; check that {dest} is a writable directory",
                         changed=bool(exc.written), written=sorted(exc.written))
    result = {"changed": bool(changed), "written": sorted(changed), "paths": paths}
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
