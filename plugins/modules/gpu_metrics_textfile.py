#!/usr/bin/python
"""Ansible module: write a node_exporter textfile atomically, reporting a change only when a series changed."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_metrics_textfile
short_description: Write the audit's metrics where node_exporter's textfile collector reads them
description:
  - Writes O(content), a Prometheus text exposition (the C(metrics) return of M(gpuhost.gpu.gpu_audit_report)), to
    O(path) on the host, mode C(0644). The file is written whole or not at all (a temporary file in the same directory,
    flushed to disk, then renamed over the old one), so node_exporter never reads half a file; the temporary
    file's name does not end in C(.prom), so the collector never reads it either.
  - "Changed only when a series other than the O(heartbeat) ones changed (or the file is new, or its mode was
    not C(0644)). The heartbeat (C(gpuhost_last_audit_timestamp_seconds), the time of the audit) moves on every
    run, so the file is rewritten every run, and Prometheus sees when the audit last ran; but a new time alone
    is not a change of the host: counting it would make every audit report changed, bury the runs where
    something did change, and fail every idempotence check."
  - Check mode writes nothing and says what would be written; diff mode shows the file before and after.
  - O(directory_missing) says what to do where the directory is missing, that is where node_exporter's textfile
    collector is not set up.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  path:
    description: The textfile, for example C(/var/lib/prometheus/node-exporter/gpuhost.prom). Its name should end
      in C(.prom), the files the collector reads.
    type: path
    required: true
  content:
    description: The text exposition to write.
    type: str
    required: true
  directory_missing:
    description:
      - What to do when the directory of O(path) does not exist. C(skip) writes nothing and reports no change,
        C(create) creates it (mode C(0755)), C(fail) fails the task.
    type: str
    choices: [skip, create, fail]
    default: fail
  unwritable:
    description:
      - What to do when the file cannot be written (no permission, a read-only file system). C(fail) fails the
        task; C(warn) writes nothing, warns and reports no change, for audits that write metrics where they can.
    type: str
    choices: [fail, warn]
    default: fail
  heartbeat:
    description: Metric names whose samples may change without the file counting as changed.
    type: list
    elements: str
    default: [gpuhost_last_audit_timestamp_seconds]
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode and diff mode.
seealso:
  - module: gpuhost.gpu.gpu_audit_report
"""

EXAMPLES = r"""
- name: Write the host's metrics where node_exporter reads them
  gpuhost.gpu.gpu_metrics_textfile:
    path: /var/lib/prometheus/node-exporter/gpuhost.prom
    content: "{{ gpu_audit_reports.metrics[inventory_hostname] }}"
    directory_missing: skip
"""

RETURN = r"""
path:
  description: The textfile.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/gpuhost.prom
written:
  description: Whether the file was written (in check mode, always false).
  returned: always
  type: bool
msg:
  description: What was done, or in check mode what would be, or why nothing was written.
  returned: always
  type: str
  sample: "/var/lib/prometheus/node-exporter/gpuhost.prom: written, 412 series"
"""

import os

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import (
    Plan,
    ReportFileError,
    make_directory,
    plan_files,
    shown,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prom_text import same_except

from ansible.module_utils.basic import AnsibleModule

MODE = 0o644


def get_argument_spec() -> dict:
    return {
        "path": {"type": "path", "required": True},
        "content": {"type": "str", "required": True},
        "directory_missing": {"type": "str", "choices": ["skip", "create", "fail"], "default": "fail"},
        "unwritable": {"type": "str", "choices": ["fail", "warn"], "default": "fail"},
        "heartbeat": {"type": "list", "elements": "str", "default": ["gpuhost_last_audit_timestamp_seconds"]},
    }


def series_count(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def plan(path: str, content: str, heartbeat: list[str]) -> tuple[Plan, bool]:
    """The file planned (written when its bytes or its mode differ), and whether writing it is a change: a new
    time stamp of the audit alone is written, but changes nothing that matters."""
    if os.path.isdir(path):
        raise ReportFileError(f"{path} is a directory, expected a textfile or nothing there: remove it, or set the "
                              "textfile path (gpu_audit_metrics_textfile) to a file name ending in .prom")
    planned = plan_files({path: content}, mode=MODE)
    found = planned.files[0]
    return planned, (found.before is None or found.mode_differs
                     or not same_except(shown(found.before), content, heartbeat))


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    path, content = module.params["path"], module.params["content"]
    directory = os.path.dirname(path) or "."
    result = {"path": path, "written": False}
    missing = not os.path.lexists(directory)
    if missing and module.params["directory_missing"] == "skip":
        module.exit_json(changed=False, msg=f"{directory} does not exist (node_exporter's textfile collector is not "
                                            "set up here): nothing written", **result)
    if missing and module.params["directory_missing"] == "fail":
        module.fail_json(msg=f"{directory} does not exist, expected the directory node_exporter's textfile collector "
                             "reads: install and configure node_exporter (the gpu_metrics role), or let the directory "
                             "be created (directory_missing: create)", **result)
    if os.path.lexists(directory) and not os.path.isdir(directory):
        module.fail_json(msg=f"{directory} is not a directory, expected the one node_exporter's textfile collector "
                             "reads: remove or rename it, or choose another path", **result)
    try:
        planned, changed = plan(path, content, module.params["heartbeat"])
    except ReportFileError as exc:
        module.fail_json(msg=f"gpu_metrics_textfile: {exc}", **result)
    series = series_count(content)
    if module._diff and changed:
        result["diff"] = planned.diff()[0]
    if not planned.changed:
        module.exit_json(changed=False, msg=f"{path}: up to date, {series} series", **result)
    if module.check_mode:
        what = "would write" if changed else "would refresh the audit's time stamp in"
        module.exit_json(changed=changed, msg=f"check mode: {what} {path}, {series} series"
                                              + (f" (and create {directory})" if missing else ""), **result)
    try:
        if missing:
            make_directory(directory, mode=0o755)
        planned.commit()
    except ReportFileError as exc:
        if module.params["unwritable"] == "warn":
            module.warn(f"{exc}: the metrics textfile was not written. Run the audit with become (the directory "
                        "belongs to root), or set gpu_audit_metrics_textfile to a writable path")
            module.exit_json(changed=False, msg=f"{path}: not written ({exc})", **result)
        module.fail_json(msg=f"{exc}; run the task with become (the "
                             "directory belongs to root), or set the textfile path (gpu_audit_metrics_textfile) to a "
                             "writable directory", **result)
    result["written"] = True
    module.exit_json(changed=changed, msg=f"{path}: {'written' if changed else 'audit time stamp refreshed'}, "
                                          f"{series} series", **result)


if __name__ == "__main__":
    main()
