#!/usr/bin/python
"""Ansible module: write the audit reports of many hosts in one go, on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_audit_report
short_description: Write GPU host audit reports (JSON, Markdown) and the fleet summary
description:
  - Writes C(<dest>/<host>.json) and C(<dest>/<host>.md) for every host given, and C(<dest>/fleet.md)
    with one row per host. Meant to run once, on the controller, with the facts of every host of the play,
    so that a fleet of hundreds writes its reports in one task instead of hundreds.
  - "When the hosts include Proxmox VE nodes audited with their VM configs, a guest's P2P finding is linked to
    the VM that runs it (the guest's DMI product_uuid is the VM's smbios1 uuid): its remedy names that host,
    the VM id and the exact C(qm set) commands."
  - A file is rewritten only when its content differs, so a second run with the same facts reports no change.
    Check mode says what would change and writes nothing; diff mode shows the changed files.
version_added: "1.0.0"
options:
  dest:
    description: Directory for the reports; created when missing.
    type: path
    required: true
  hosts:
    description: Mapping of inventory host name to its C(gpu_host) facts, as M(gpu_host_facts) returns them.
    type: dict
    required: true
  fleet:
    description: Also write C(fleet.md) covering the hosts given.
    type: bool
    default: true
  bench:
    description:
      - Mapping of host name to its benchmark results C({probe, nccl}) as the C(gpu_bench) role collects them.
        They are folded into the host's report (findings, tables, an SVG chart C(<host>-nccl.svg)).
      - A host not named here keeps the benchmark section of its existing JSON report, so an audit run does
        not erase the last measurement.
    type: dict
    default: {}
  captures:
    description:
      - Mapping of host name to the capture M(gpu_host_facts) returned with O(gpu_host_facts#module:save_capture);
        each is written to C(<captures_dest>/<host>.json). Empty writes none.
    type: dict
    default: {}
  captures_dest:
    description: Directory for the captures; required when O(captures) is not empty.
    type: path
author:
  - GPU host audit maintainers
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Write the reports of every host of the play, and the captures they returned
  gpu_audit_report:
    dest: "{{ playbook_dir }}/../reports"
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['ansible_facts',
                                                                                  'gpu_host']))) }}"
    captures: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['audit',
                                                                                     'capture']))) }}"
    captures_dest: "{{ playbook_dir }}/../captures"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: Paths that were (or in check mode would be) written because their content changed.
  returned: always
  type: list
  elements: str
  sample: [reports/gpu-node-1.json, reports/gpu-node-1.md, reports/fleet.md]
reports:
  description: Per host, the paths of its JSON and Markdown reports.
  returned: always
  type: dict
guest_links:
  description: >-
    Per guest that a Proxmox host of the same run runs (DMI product_uuid = the VM's smbios1 uuid): C(proxmox_host),
    C(vmid), C(proxmox_vm), and for each of the guest's findings fixed on the host (C(p2p_not_supported),
    C(qemu_machine_i440fx)) its C(remedy) with the C(qm set) commands for that VM. Empty without Proxmox hosts.
  returned: always
  type: dict
  sample:
    glm5-vm:
      proxmox_host: pve-node-1
      vmid: "120"
      proxmox_vm: glm5
      remedies:
        p2p_not_supported: "This guest is VM 120 (glm5) on the Proxmox host pve-node-1 ..."
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpuhost.report.plot import sweep_svg
from ansible.module_utils.gpuhost.report.render import fleet_markdown, host_markdown, merge_bench, report_json
from ansible.module_utils.gpuhost.rules.proxmox_plans import enrich_guest_findings


def get_argument_spec() -> dict:
    return {
        "dest": {"type": "path", "required": True},
        "hosts": {"type": "dict", "required": True},
        "fleet": {"type": "bool", "default": True},
        "bench": {"type": "dict", "default": {}},
        "captures": {"type": "dict", "default": {}},
        "captures_dest": {"type": "path"},
    }


def previous_bench(dest: str, host: str) -> dict | None:
    """The benchmark section of a host's existing JSON report, if any."""
    text = current_content(os.path.join(dest, f"{host}.json"))
    try:
        bench = json.loads(text).get("bench") if text else None
    except (ValueError, AttributeError):
        return None
    return bench if isinstance(bench, dict) else None


def planned_files(dest: str, hosts: dict, fleet: bool, captures: dict, captures_dest: str | None,
                  bench: dict | None = None) -> dict[str, str]:
    files = {}
    bench = bench or {}
    hosts = {host: merge_bench(facts, bench.get(host) or previous_bench(dest, host)) for host, facts in hosts.items()}
    hosts = link_guests(hosts)
    for host, facts in sorted(hosts.items()):
        rows = ((facts.get("bench") or {}).get("nccl") or {}).get("results")
        if rows:
            files[os.path.join(dest, f"{host}-nccl.svg")] = sweep_svg(f"{host}: NCCL all-reduce", _sweeps(facts))
    for host, capture in sorted(captures.items()):
        files[os.path.join(captures_dest or "", f"{host}.json")] = json.dumps(capture, indent=1, sort_keys=True) + "\n"
    for host, facts in sorted(hosts.items()):
        files[os.path.join(dest, f"{host}.json")] = report_json(host, facts)
        files[os.path.join(dest, f"{host}.md")] = host_markdown(host, facts)
    if fleet:
        files[os.path.join(dest, "fleet.md")] = fleet_markdown(hosts)
    return files


def link_guests(hosts: dict) -> dict:
    """Each guest's host-side remedy, from the Proxmox hosts of the same run that run it (smbios1 uuid)."""
    proxmox_hosts = {host: facts for host, facts in hosts.items() if facts.get("proxmox")}
    if not proxmox_hosts:
        return hosts
    return {host: enrich_guest_findings(facts, proxmox_hosts) for host, facts in hosts.items()}


def guest_links(linked_hosts: dict) -> dict:
    """Per linked guest, its VM and the host-side remedy of each finding the link filled in."""
    links: dict[str, dict] = {}
    for host, facts in sorted(linked_hosts.items()):
        for finding in facts.get("findings") or []:
            evidence = finding.get("evidence") or {}
            if not isinstance(evidence, dict) or "proxmox_host" not in evidence:
                continue
            link = links.setdefault(host, {"proxmox_host": evidence["proxmox_host"], "vmid": evidence.get("vmid"),
                                           "proxmox_vm": evidence.get("proxmox_vm"), "remedies": {}})
            link["remedies"][finding["id"]] = finding.get("remedy") or ""
    return links


def _sweeps(facts: dict) -> dict[str, list]:
    """The baseline sweep, plus each tuning candidate's when tuning ran."""
    nccl = facts["bench"]["nccl"]
    sweeps = {"as run": nccl["results"]}
    for candidate in (nccl.get("tuning") or {}).get("candidates") or []:
        if candidate.get("results"):
            sweeps[str(candidate.get("name"))] = candidate["results"]
    return sweeps


def current_content(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def write_atomically(module: AnsibleModule, path: str, content: str) -> None:
    directory = os.path.dirname(path)
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".gpu-audit-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(content)
    os.chmod(tmp, 0o644)
    module.atomic_move(tmp, path)


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    dest, hosts = module.params["dest"], module.params["hosts"]
    bad = sorted(h for h, facts in hosts.items() if not isinstance(facts, dict) or "summary" not in facts)
    if bad:
        module.fail_json(msg=f"no audit facts for {', '.join(bad)}: expected each host's ansible_facts.gpu_host "
                             "from gpu_host_facts; run the audit on those hosts first")
    captures = {h: c for h, c in module.params["captures"].items() if c}
    if captures and not module.params["captures_dest"]:
        module.fail_json(msg="captures were given but no captures_dest to write them to")
    files = planned_files(dest, hosts, module.params["fleet"], captures, module.params["captures_dest"],
                          module.params["bench"])
    links = guest_links(link_guests(hosts))
    changed = {path: content for path, content in files.items() if current_content(path) != content}
    diffs = [{"before_header": path, "after_header": path, "before": current_content(path) or "",
              "after": content} for path, content in changed.items()] if module._diff else []
    if changed and not module.check_mode:
        try:
            for path, content in changed.items():
                os.makedirs(os.path.dirname(path), exist_ok=True)
                write_atomically(module, path, content)
        except OSError as exc:
            module.fail_json(msg=f"cannot write the reports under {dest}: {exc.strerror or exc}; "
                                 "set gpu_audit_report_dir to a writable directory")
    reports = {host: {"json": os.path.join(dest, f"{host}.json"), "markdown": os.path.join(dest, f"{host}.md")}
               for host in hosts}
    result = {"changed": bool(changed), "written": sorted(changed), "reports": reports, "guest_links": links}
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
