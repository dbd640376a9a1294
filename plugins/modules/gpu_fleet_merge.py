#!/usr/bin/python
"""Ansible module: rebuild fleet.md from the reports of one or several report directories."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_fleet_merge
short_description: Rebuild fleet.md from the host reports of one or several report directories
description:
  - "Reads, in each directory of O(dirs), where each host's row comes from (C(fleet.d/<host>.json), written by the
    audit, see M(gpuhost.gpu.gpu_fleet_sources)) and the host's JSON report, and writes C(<dest>/fleet.md) with one row
    per host, exactly as one run over all those hosts writes it: a host audited is shown from its report, a host its run
    could not reach (or whose audit failed) from its last report, with that report's date and the reason."
  - "Made for the runs an execution environment cannot keep together, such as the slices of an AWX sliced job, each
    a separate run over part of the inventory, into one directory or each into its own."
  - "A host found in several directories is taken from the first of O(dirs) that holds it, with a warning. Only
    C(fleet.md) and C(fleet.json) (its rows by host name, which a later run with
    O(gpuhost.gpu.gpu_audit_report#module:fleet_keep) keeps) are written, under the lock the audit takes on the
    table (C(<dest>/.fleet.lock)); the host reports are only read. A file is rewritten only when its content
    differs; check mode writes nothing; diff mode shows the change."
version_added: "1.1.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  dirs:
    description: The report directories to merge (each a C(gpuhost_report_dir) of a run); each must exist.
    type: list
    elements: path
    required: true
  dest:
    description: The directory for C(fleet.md) and C(fleet.json); the first of O(dirs) when not given.
    type: path
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - "Supports check mode and diff mode."
"""

EXAMPLES = r"""
- name: Rebuild fleet.md from the slices' reports
  gpuhost.gpu.gpu_fleet_merge:
    dirs: [/var/lib/gpuhost/reports]
"""

RETURN = r"""
written:
  description: The paths of fleet.md and fleet.json that were (or in check mode would be) written because their
    content changed.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/gpuhost/reports/fleet.json, /var/lib/gpuhost/reports/fleet.md]
fleet:
  description: Path of the fleet.md merged.
  returned: always
  type: str
hosts:
  description: Per host of the table, the directory its row was read from.
  returned: always
  type: dict
  sample: {gpu-node-1: /var/lib/gpuhost/reports}
stats:
  description: >-
    The fleet in the shape set_stats publishes, as M(gpuhost.gpu.gpu_audit_report)'s
    RV(gpuhost.gpu.gpu_audit_report#module:stats): per host its C(audit), C(verdict), C(worst_finding), C(action),
    C(report) (and C(msg) when lost), and C(counts).
  returned: always
  type: dict
"""

import contextlib
import os

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.fleet_runs import RUNS_DIR, merged_rows
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.fleet_table import FLEET_JSON, fleet_json, fleet_lock
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import REPORT_MODE
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError, plan_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.fleet_stats import fleet_stats, host_verdicts
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import fleet_markdown

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "dirs": {"type": "list", "elements": "path", "required": True},
        "dest": {"type": "path"},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    dirs = module.params["dirs"]
    missing = [d for d in dirs if not os.path.isdir(d)]
    if not dirs or missing:
        module.fail_json(msg="gpu_fleet_merge: expected existing report directories in dirs; "
                             + (f"not a directory: {', '.join(missing)}" if missing else "found none")
                             + ". Give the gpuhost_report_dir of each run (mounted into the execution environment "
                             "under AWX)")
    dest = module.params["dest"] or dirs[0]
    fleet = os.path.join(dest, "fleet.md")
    sources: dict[str, dict] = {}
    # The audit's runs into dest (fleet_keep) read and rewrite the table under this lock: the merged table is
    # written between them, never over a table one of them made meanwhile.
    lock = fleet_lock(dest, mode=REPORT_MODE) if not module.check_mode else contextlib.nullcontext()
    try:
        with lock:
            audited, absent, origin = merged_rows(dirs, module.warn)
            if not origin:
                module.fail_json(msg=f"gpu_fleet_merge: no {RUNS_DIR}/ with the rows of an audit in "
                                     f"{', '.join(dirs)}: expected the report directories of audits run with this "
                                     "version. Run playbooks/audit.yml into them first (or point dirs at them)")
            sources = {host: {"audit": row["status"], "msg": row["msg"]} for host, row in absent.items()}
            rows = {**{host: {"audit": "this run"} for host in audited}, **sources}
            planned = plan_files({fleet: fleet_markdown(audited, absent),
                                  os.path.join(dest, FLEET_JSON): fleet_json(rows)},
                                 warn=module.warn, at_most=REPORT_MODE)
            diffs = planned.diff() if module._diff else []
            changed = planned.commit(module.check_mode, create_dirs=True)
    except ReportFileError as exc:
        module.fail_json(msg=f"gpu_fleet_merge: {exc}; check that the directories are readable and that the "
                             "one for fleet.md is writable")
    reports = {host: os.path.join(origin[host], f"{host}.md") for host in [*audited, *absent]
               if host in audited or absent[host]["report"] is not None}
    result = {"changed": bool(changed), "written": sorted(changed), "fleet": fleet,
              "hosts": dict(sorted(origin.items())), "stats": fleet_stats(host_verdicts(audited), sources, reports)}
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
