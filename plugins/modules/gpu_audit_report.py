#!/usr/bin/python
"""Ansible module: write the audit reports of many hosts in one go, on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_audit_report
short_description: Write GPU host audit reports (JSON, Markdown) and the fleet summary
description:
  - Writes C(<dest>/<host>.json), C(<dest>/<host>.md) and its pictures (C(<host>-p2p.svg), the GPU pairs by P2P
    state, with a P2P matrix; C(<host>-nccl.svg) with an NCCL sweep) for every host given, and C(<dest>/fleet.md)
    with one row per host. Meant to run once, on the controller, with the facts of every host of the play,
    so that a fleet of hundreds writes its reports in one task instead of hundreds.
  - "Beside C(fleet.md), C(<dest>/fleet.json) holds its rows as data, keyed by the real host names (C(fleet.md)
    escapes them for Markdown): where each row comes from (C(audit)) and, for a host lost, the reason recorded
    (C(msg)). Runs that write one directory at once take turns on the table: each holds an exclusive lock on
    C(<dest>/.fleet.lock) from reading the table to writing the new one, so that none writes away the rows of
    another (AWX job slices with O(fleet_keep))."
  - "When the hosts include Proxmox VE nodes audited with their VM configs, a guest's P2P finding is linked to
    the VM that runs it (the guest's DMI product_uuid is the VM's smbios1 uuid): its remedy names that host,
    the VM id and the exact C(qm set) commands."
  - "Each host's report records what changed that matters since its last report (C(drift): driver, kernel and
    its command line, BIOS and VBIOS, the GPU set, links, IOMMU mode, P2P matrices, a linked guest's VM config)
    and, when a benchmark is folded in, when it was measured and on what facts (C(proof)); findings gpu_gone,
    gpu_added, link_trained_lower and p2p_proof_stale come from them (report/drift.py says how they persist)."
  - A file is rewritten only when its content differs, so a second run with the same facts reports no change.
    Check mode says what would change and writes nothing (and takes no lock); diff mode shows the changed files.
  - "Each file is written whole or not at all: a temporary file in the same directory, flushed to disk, then
    renamed over the old one; a write that fails removes its temporary file. A file replaced keeps its mode
    (new ones get C(0644)). An existing file that is not UTF-8 is replaced, with a warning. The temporary files
    a run killed while writing left behind (C(.gpuhost-<machine>-<pid>-*.tmp)) are removed by the next run that
    writes the directory: at once when that process is gone from this machine, else after an hour."
  - "Host names become file names as they are, or the module fails before writing anything: a name that is
    empty, C(.) or C(..), holds C(/), NUL or another non-printable character, is over 200 bytes, or is
    C(fleet) (the name of C(fleet.md)) is refused, whether in O(hosts), O(fleet_hosts), O(captures) or the
    existing table (C(fleet.json)). A directory where a report file goes fails the task with what to do, also in check
    mode."
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  dest:
    description: Directory for the reports; created when missing.
    type: path
    required: true
  hosts:
    description:
      - Mapping of inventory host name to its C(gpu_host) facts, as M(gpuhost.gpu.gpu_host_facts) returns them, or to
        the same as a JSON string (its C(facts_json) return), which a fleet passes far faster.
    type: dict
    required: true
  fleet:
    description: Also write C(fleet.md) covering the hosts given and those of O(fleet_hosts).
    type: bool
    default: true
  fleet_hosts:
    description:
      - The other hosts of the fleet table, so that it loses none (every host of the play, or of the fleet, that
        O(hosts) does not name), each with its registered M(gpuhost.gpu.gpu_host_facts) result, or an empty mapping
        when it has none. No report of theirs is written.
      - A host whose result carries C(ansible_facts.gpu_host) (audited in this run) is shown from those facts.
        Any other is shown from its last report, C(<dest>/<host>.json), marked C(unreachable) or C(failed) (with
        the result's C(msg)) or C(not audited), and with that file's date, its modification time in UTC (reports
        carry no timestamp, so that a re-run changes no file).
      - "A host the table already records as lost the same way (C(fleet.json)) keeps the reason recorded then:
        Ansible words one failure differently from run to run (a refused ssh connection reads C(Connection
        refused) or C(Broken pipe) by timing), and a re-run must change no file. The run's own message is in the
        host's task result."
    type: dict
    default: {}
  fleet_keep:
    description:
      - Also keep every host of the existing table (C(<dest>/fleet.json); in a directory written before it
        existed, the hosts of C(<dest>/fleet.d/)), as if given in O(fleet_hosts) with no result, so that a later
        phase (the benchmark) or another slice adds to the table and never shrinks it.
    type: bool
    default: false
  bench:
    description:
      - Mapping of host name to its benchmark results C({probe, nccl}) as the C(gpu_bench) role collects them.
        They are folded into the host's report (findings, tables, an SVG chart C(<host>-nccl.svg)).
      - A host not named here keeps the benchmark section of its existing JSON report, so an audit run does
        not erase the last measurement.
      - A benchmark section of another shape than the report reads (given here, or in an old report) is left
        out with a warning naming what is wrong; numbers that are not finite (C(inf), C(nan)) are written as
        null, with a warning.
    type: dict
    default: {}
  captures:
    description:
      - Mapping of host name to a capture's content (as read from a capture file, for example with
        C(lookup('ansible.builtin.file', path\) | from_json)); each is written to C(<captures_dest>/<host>.json).
        Empty writes none. The audit role does not use this, since M(gpuhost.gpu.gpu_host_facts) writes a capture on
        the host (O(gpuhost.gpu.gpu_host_facts#module:save_capture_path)) and returns only its path, and the role
        fetches it.
    type: dict
    default: {}
  captures_dest:
    description: Directory for the captures; required when O(captures) is not empty.
    type: path
  mode:
    description:
      - The most the permissions of the files written may be, as an octal string. A new file gets this mode; an
        existing one keeps its own less any permission beyond it (a C(0644) report becomes C(0600) under the
        default, a C(0400) one stays C(0400)).
      - The reports and captures hold kernel logs and command lines, DMI serials and UUIDs and VM configs, so by
        default only their owner reads them; give C("0640") or C("0644") to share them.
    type: raw
    default: "0600"
  metrics:
    description:
      - Also return, per host of O(hosts), its report as Prometheus metrics (RV(metrics)), for
        M(gpuhost.gpu.gpu_metrics_textfile) to write on the host. Rendered from the JSON report as this run leaves it
        (in check mode, as it would leave it), with the time of this run as C(gpuhost_last_audit_timestamp_seconds).
    type: bool
    default: false
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Write the reports of every host of the play
  gpuhost.gpu.gpu_audit_report:
    dest: "{{ playbook_dir }}/../reports"
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['ansible_facts',
                                                                                  'gpu_host']))) }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: Paths that were (or in check mode would be) written because their content changed.
  returned: always
  type: list
  elements: str
  sample: [reports/fleet.json, reports/fleet.md, reports/gpu-node-1.json, reports/gpu-node-1.md]
lines:
  description: >-
    Per host given, the line the audit prints: verdict, virtualization, GPU count, P2P, the worst finding, the
    Proxmox VM that runs it when linked, and the path of its Markdown report (C(Report: <path>)), or in check
    mode, when that report is missing or out of date, C(Check mode: would write <path>).
  returned: always
  type: dict
  sample:
    gpu-node-1: "gpu-node-1: fit (bare metal; 8 GPU(s); P2P ok) - no findings. Report: reports/gpu-node-1.md"
fleet:
  description: >-
    Per host of the fleet table, where its row comes from: C(this run), or why not (C(unreachable), C(failed),
    C(not audited)), its last report's date when it has one, and the reason recorded (the one the run gave, or the
    one recorded when the host was first lost that way, see O(fleet_hosts)).
  returned: always
  type: dict
  sample:
    gpu-node-1: {audit: this run}
    gpu-node-2: {audit: unreachable, report_date: "2026-12-01 09:14 UTC", msg: "Failed to connect to the host via ssh"}
reports:
  description: Per host, the paths of its JSON and Markdown reports.
  returned: always
  type: dict
metrics:
  description: Per host of O(hosts), its node_exporter textfile (Prometheus text exposition); the series are listed
    in plugins/module_utils/report/prometheus.py.
  returned: when O(metrics) is true
  type: dict
  sample:
    gpu-node-1: "# HELP gpuhost_gpus GPUs the audit saw ...\n# TYPE gpuhost_gpus gauge\ngpuhost_gpus 8\n"
findings:
  description: >-
    Per host given, the findings of its report as written (C(id), C(severity)): the audit's, and those that drift
    since its last report adds (gpu_gone, link_trained_lower, p2p_proof_stale...). The role's gpu_audit_fail_on reads
    these.
  returned: always
  type: dict
  sample:
    gpu-node-1: [{id: gpu_gone, severity: critical}]
stats:
  description: >-
    The run in the compact shape C(ansible.builtin.set_stats) publishes (AWX shows it as the job's artifacts):
    C(hosts), per host given and per host of O(fleet_hosts) that was unreachable or failed, its C(audit) (C(this
    run), C(unreachable), C(failed)), C(verdict), C(worst_finding) (C(severity: id); null when not judged or
    without findings) and C(action) (the host's action, none to fix_hypervisor; null when not judged),
    C(report) (its Markdown report, null when it has none) and, when lost, C(msg); C(counts),
    the number of hosts per verdict or status.
  returned: always
  type: dict
  sample:
    hosts:
      gpu-node-1: {audit: this run, verdict: unfit, worst_finding: "critical: p2p_not_supported",
                   action: drain, report: reports/gpu-node-1.md}
    counts: {unfit: 1}
drift:
  description: >-
    Per host given, its drift since its last report (report/drift.py), read from its JSON report as this run
    leaves it: C(items), the items its drift record holds (driver, cuda_driver, kernel, kernel_cmdline, bios,
    vbios, gpu_set, link, iommu, p2p, proxmox_vm_config; empty when none), and C(proof_stale), true when the
    report's P2P proof or benchmark was measured before a change that can invalidate it (p2p_proof_stale).
  returned: always
  type: dict
  sample:
    gpu-node-1: {items: [driver, link], proof_stale: true}
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

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.fleet_table import (
    FLEET_JSON,
    fleet_json,
    fleet_lock,
    lost_reason,
    recorded_rows,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.last_report import previous_report, report_date
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import check_host_names, parse_mode
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import (
    Plan,
    ReportFileError,
    plan_files,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import with_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.bench_shape import check_bench
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.drift import drift_return, with_drift
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.files_plan import FLEET_INDEX, planned_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.fleet_stats import fleet_stats, host_verdicts
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prom_text import ExpositionError
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prometheus import textfile
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import (
    merge_bench,
    report_json,
    verdict_line,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift_basis import guest_vm
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.fleet_class import class_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import (
    ambiguous_link,
    enrich_guest_findings,
)

from ansible.module_utils.basic import AnsibleModule

# Host names that would overwrite the fleet's own file.
RESERVED = (FLEET_INDEX,)


def get_argument_spec() -> dict:
    return {
        "dest": {"type": "path", "required": True},
        "hosts": {"type": "dict", "required": True},
        "fleet": {"type": "bool", "default": True},
        "fleet_hosts": {"type": "dict", "default": {}},
        "fleet_keep": {"type": "bool", "default": False},
        "bench": {"type": "dict", "default": {}},
        "captures": {"type": "dict", "default": {}},
        "captures_dest": {"type": "path"},
        "mode": {"type": "raw", "default": "0600"},
        "metrics": {"type": "bool", "default": False},
    }


def as_facts(value: object) -> object:
    """A host's facts given as gpu_host_facts' facts_json (a JSON string), or as they are."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def previous_bench(dest: str, host: str, warn=None) -> dict | None:
    """The benchmark section of a host's existing JSON report, if the report can carry it."""
    report = previous_report(dest, host, warn) or {}
    if "bench" not in report:
        return None
    return usable_bench(report["bench"], f"{host}: the benchmark section of {os.path.join(dest, host + '.json')}",
                        warn)


def usable_bench(bench: object, what: str, warn=None) -> dict | None:
    """The bench as a report can carry it (see report/bench_shape.py); what it cannot carry is said."""
    checked = check_bench(bench)
    if warn and checked.refused:
        shown = "; ".join(checked.refused[:5]) + (f"; and {len(checked.refused) - 5} more"
                                                  if len(checked.refused) > 5 else "")
        warn(f"{what} is not in the shape this version writes ({shown}): not kept. Run the benchmark again "
             "(playbooks/bench.yml) for a new one")
    if warn and checked.nulled:
        warn(f"{what} holds values that are not a finite number, written as null: {', '.join(checked.nulled[:5])}")
    return checked.bench


def fleet_rows(dest: str, hosts: dict, fleet_hosts: dict, warn=None,
               recorded: dict | None = None) -> tuple[dict, dict]:
    """The fleet table's hosts beyond `hosts`: those audited in this run (facts), and the absent ones.

    An absent host shows its last report with that file's modification time: the date of the audit it holds
    (a report is rewritten only when its content changes, so a later audit that found the same left it as it was).
    A host lost as the table last recorded it keeps the reason recorded then (files/fleet_table.py, lost_reason).
    """
    recorded = recorded or {}
    audited, absent = {}, {}
    for host, result in sorted(fleet_hosts.items()):
        if host in hosts:
            continue
        result = result if isinstance(result, dict) else {}
        facts = as_facts(result["facts_json"]) if result.get("facts_json") else \
            (result.get("ansible_facts") or {}).get("gpu_host")
        if isinstance(facts, dict) and "summary" in facts:
            audited[host] = merge_bench(facts, previous_bench(dest, host, warn))
            continue
        status = "unreachable" if result.get("unreachable") else "failed" if result.get("failed") else "not audited"
        report = previous_report(dest, host, warn)
        msg = str(result["msg"]) if status != "not audited" and result.get("msg") else None
        absent[host] = {"status": status, "msg": lost_reason(recorded.get(host), status, msg) if msg else None,
                        "report": report, "report_date": report_date(dest, host) if report else None}
    return audited, absent


def assembled(dest: str, hosts: dict, fleet: bool, captures: dict, captures_dest: str | None,
              bench: dict | None = None, fleet_hosts: dict | None = None,
              warn=None, recorded: dict | None = None) -> tuple[dict[str, str], dict, dict]:
    """The files to write (report/files_plan.py, and fleet.json beside fleet.md), the hosts' facts as written
    (benchmark merged, guests linked), and per host of the fleet table where its row comes from. ``recorded``: the
    table's rows as last written (files/fleet_table.py)."""
    bench = bench or {}
    hosts = {host: merge_bench(facts, usable_bench(bench[host], f"{host}: the benchmark results given", warn)
                               if bench.get(host) else previous_bench(dest, host, warn))
             for host, facts in hosts.items()}
    audited, absent = fleet_rows(dest, hosts, fleet_hosts or {}, warn, recorded)
    # The Proxmox hosts audited in this run link their guests, whether their reports are written here or not
    # (the benchmark's task writes the guests' reports only): a re-run then rewrites nothing.
    hosts = link_guests(hosts, audited, warn)
    hosts = add_drift(dest, hosts, audited, set(bench))
    # The other hosts audited in this run show in fleet.md as their own reports do (written by that audit: drift
    # and its findings): shown from their bare facts, a call that writes some hosts' reports only (the benchmark's)
    # would rewrite their rows, and the audit's next run would write them back.
    audited = add_drift(dest, audited, hosts, set())
    hosts, audited = add_class_findings(hosts, audited)
    files = planned_files(dest, hosts, FLEET_INDEX if fleet else None, listed=audited, absent=absent,
                          captures=captures, captures_dest=captures_dest or "")
    sources: dict[str, dict] = {}
    if fleet:
        sources = {host: {"audit": "this run"} for host in [*hosts, *audited]}
        sources.update({host: {"audit": row["status"], "report_date": row["report_date"], "msg": row["msg"]}
                        for host, row in absent.items()})
        files[os.path.join(dest, FLEET_JSON)] = fleet_json(sources)
    return files, hosts, dict(sorted(sources.items()))


def add_class_findings(hosts: dict, audited: dict) -> tuple[dict, dict]:
    """The VBIOS and driver consistency of each class among every host audited in this run (rules/fleet_class.py),
    folded into each host's record: its report, fleet row and metrics all carry it."""
    found = class_findings({**audited, **hosts})

    def fold(group: dict) -> dict:
        return {host: with_findings(facts, (f.as_dict() for f in found[host])) if host in found else facts
                for host, facts in group.items()}
    return fold(hosts), fold(audited)


def add_drift(dest: str, hosts: dict, others: dict, benched: set) -> dict:
    """Each host's drift since its last report and its proof's basis, with their findings (report/drift.py).
    A guest's VM config is read from its Proxmox host when that host was audited in the same run."""
    proxmox_hosts = {host: facts for host, facts in {**others, **hosts}.items() if facts.get("proxmox")}
    drifted = {}
    for host, facts in hosts.items():
        previous = previous_report(dest, host)  # read (and warned about) once already, by previous_bench
        vm_config = None if facts.get("proxmox") else guest_vm(facts, proxmox_hosts)
        drifted[host] = with_drift(facts, previous, report_date(dest, host) if previous is not None else None,
                                   bench_given=host in benched, now=int(time.time()), vm_config=vm_config)
    return drifted


def link_guests(hosts: dict, others: dict | None = None, warn=None) -> dict:
    """Each guest's host-side remedy, from the Proxmox hosts of the same run that run it (smbios1 uuid), among
    `hosts` and `others` (hosts audited in this run whose reports are not written here). A guest matched on several
    hosts (a cloned VM keeps its uuid) is warned about, naming them all."""
    proxmox_hosts = {host: facts for host, facts in {**(others or {}), **hosts}.items() if facts.get("proxmox")}
    if not proxmox_hosts:
        return hosts
    linked = {host: enrich_guest_findings(facts, proxmox_hosts) for host, facts in hosts.items()}
    for host, facts in sorted(linked.items()):
        said = ambiguous_link(host, facts)
        if said and warn:
            warn(said)
    return linked


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


def plan(module: AnsibleModule, dest: str, hosts: dict) -> tuple[Plan, dict, dict, dict]:
    """What to write (every report, each compared with what is there), the guest links, the fleet table's sources
    and each host's facts as reported (benchmark merged, guest linked, drift and its findings added)."""
    captures = {h: c for h, c in module.params["captures"].items() if c}
    if captures and not module.params["captures_dest"]:
        module.fail_json(msg="captures were given but no captures_dest to write them to")
    fleet_hosts = module.params["fleet_hosts"]
    # The table's rows as last written, by the real host names (never read back from fleet.md, whose names are
    # escaped for Markdown): the hosts fleet_keep keeps, and the reasons recorded for hosts lost.
    recorded = recorded_rows(dest, module.warn) if module.params["fleet"] else {}
    if module.params["fleet_keep"]:
        check_host_names(recorded, RESERVED)
        fleet_hosts = {**dict.fromkeys(recorded), **fleet_hosts}
    files, linked, fleet = assembled(dest, hosts, module.params["fleet"], captures, module.params["captures_dest"],
                                     module.params["bench"], fleet_hosts, module.warn, recorded)
    # The hosts' JSON reports (and fleet.json) were read already, and said so when not UTF-8.
    read_before = {os.path.join(dest, f"{host}.json") for host in hosts}
    if module.params["fleet"]:
        read_before.add(os.path.join(dest, FLEET_JSON))
    return (plan_files(files, warn=module.warn, warned=read_before, at_most=parse_mode(module.params["mode"])),
            guest_links(linked), fleet, linked)


def host_metrics(reports: dict[str, dict[str, Any]], now: int, warn: Callable[[str], None]) -> dict[str, str]:
    """Each host's textfile; one host's report that cannot be written as metrics loses its own, with a warning,
    never the fleet's reports, lines and stats that this run returns beside them."""
    metrics = {}
    for host, report in reports.items():
        if not report:
            continue
        try:
            metrics[host] = textfile(report, now, lambda message, host=host: warn(f"{host}: {message}"))
        except ExpositionError as exc:
            warn(f"{host}: no metrics written for this host: {exc}; its report is written as usual. Look at the "
                 "host's GPU list in its report, re-run the audit on it, and file the report if it repeats")
    return metrics


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    dest, hosts = module.params["dest"], {host: as_facts(facts) for host, facts in module.params["hosts"].items()}
    bad = sorted(h for h, facts in hosts.items() if not isinstance(facts, dict) or "summary" not in facts)
    if bad:
        module.fail_json(msg=f"no audit facts for {', '.join(bad)}: expected each host's ansible_facts.gpu_host "
                             "from gpu_host_facts; run the audit on those hosts first")
    # Runs writing one directory at once (job slices, fleet_keep) read and rewrite the fleet table one at a time:
    # a run that read the table before another wrote its rows would write them away. Check mode writes nothing,
    # so it takes no lock (and creates no directory for one).
    try:
        # What the arguments alone refuse fails before the lock creates the directory: nothing is written then.
        check_host_names([*hosts, *module.params["fleet_hosts"], *module.params["captures"]], RESERVED)
        mode = parse_mode(module.params["mode"])
        locked = module.params["fleet"] and not module.check_mode
        with fleet_lock(dest, mode=mode) if locked else contextlib.nullcontext():
            planned, links, fleet, reported = plan(module, dest, hosts)
            diffs = planned.diff() if module._diff else []
            changed = planned.changed
            try:
                planned.commit(module.check_mode, create_dirs=True)
            except ReportFileError as exc:
                module.fail_json(msg=f"cannot write the reports under {dest}: {exc}; set gpuhost_report_dir to a "
                                     "writable directory", changed=bool(exc.written), written=sorted(exc.written))
    except ReportFileError as exc:
        module.fail_json(msg=f"gpu_audit_report: {exc}")
    reports = {host: {"json": os.path.join(dest, f"{host}.json"), "markdown": os.path.join(dest, f"{host}.md")}
               for host in hosts}
    # The line, the findings and the verdicts are those of the report (drift findings included), not of the audit.
    lines = {host: verdict_line(host, reported[host], links.get(host), reports[host]["markdown"],
                                module.check_mode and reports[host]["markdown"] in changed)
             for host in sorted(hosts)}
    findings = {host: [{"id": f.get("id"), "severity": f.get("severity")} for f in facts.get("findings") or []]
                for host, facts in sorted(reported.items())}
    last = {host: os.path.join(dest, f"{host}.md") for host, row in fleet.items() if row.get("report_date")}
    # Each report as this run leaves it (written, or in check mode not): the content planned from these facts, which
    # is also what an unchanged file holds; no need to read the files back.
    as_left = {host: json.loads(report_json(host, facts)) for host, facts in sorted(reported.items())}
    result = {"changed": bool(changed), "written": sorted(changed), "reports": reports, "guest_links": links,
              "fleet": fleet, "lines": lines, "findings": findings,
              "drift": {host: drift_return(report) for host, report in as_left.items()},
              "stats": fleet_stats(host_verdicts(reported), fleet,
                                   {**last, **{h: r["markdown"] for h, r in reports.items()}})}
    if module.params["metrics"]:
        result["metrics"] = host_metrics(as_left, int(time.time()), module.warn)
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
