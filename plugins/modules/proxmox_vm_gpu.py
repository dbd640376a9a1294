#!/usr/bin/python
"""Ansible module: bring a Proxmox VM's GPU passthrough config to what P2P between its GPUs needs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: proxmox_vm_gpu
short_description: Set a Proxmox VM's GPU passthrough so that the guest driver may grant P2P between its GPUs
description:
  - Runs on the Proxmox VE node that holds the VM. Reads C(<conf_dir>/<vmid>.conf), computes the config the VM's
    GPUs need for peer-to-peer, and, when it differs, makes the change with one C(qm set), after copying the
    config to O(backup_dir).
  - "The target, for each GPU of O(gpus): its own C(hostpciN) line naming the GPU's function (C(0000:41:00.0);
    a bare C(41:00) passes every function as C(hostpciN.0), C(.1), which C(-set device.hostpciN) cannot reach)
    with C(pcie=1) and without C(hidden) and C(x-vga); C(machine) of type q35; C(cpu: host) without C(hidden)
    (it runs QEMU with kvm=off, and the driver then ignores the clique); in C(args), one
    C(-set device.hostpciN.x-nv-gpudirect-clique=<id>) per GPU and no C(kvm=off), every other word kept;
    C(balloon: 0); C(numa: 1) as O(numa) says. Other options and other lines are not touched."
  - The value the VM starts with next time counts (the config with its [PENDING] changes applied); a value that
    already means the target (C(cputype=host), C(pcie=on), C(pc-q35-8.1)) is kept as written, so a second run
    reports no change.
  - "On a running VM, C(qm set) only stages the change in [PENDING]: RV(pending) and RV(restart_needed) are then
    true, and the change takes effect when QEMU starts again (RV(restart_command)). A reboot inside the guest
    is not enough: it keeps the same QEMU process and its old command line."
  - After C(qm set), the config is read again and the module fails when it does not hold the target.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes
options:
  vmid:
    description: The VM's id.
    type: int
    required: true
  gpus:
    description:
      - The GPUs to set up, each as a C(hostpciN) line of the VM or as a host PCI function (C(0000:41:00.0)).
        A function not passed yet gets the lowest free C(hostpciN) line.
      - By default, every C(hostpciN) line whose GPU function is an NVIDIA display controller on this host (read
        under O(sysfs_dir)); lines passed through a resource mapping are left out then and must be named here.
    type: list
    elements: str
  cliques:
    description:
      - Which GPUs may peer. A list of groups (group i gets clique id i), or a mapping of clique id (0..15) to a
        group; each group lists GPUs as in O(gpus), and every GPU is in exactly one group.
      - GPUs that may peer on the host (see the audit's P2P findings) share a group. By default all GPUs share one
        clique, the one most of them have already, else 0.
    type: raw
  numa:
    description:
      - "C(auto) sets C(numa: 1) when the host has several NUMA nodes (read under O(sysfs_dir)) and leaves C(numa)
        alone otherwise; C(true) sets C(numa: 1); C(false) sets C(numa: 0) when NUMA is on. C(numaN) lines are not
        managed."
    type: raw
    default: auto
  backup_dir:
    description: Where the config is copied before it is changed, as C(<vmid>.conf.<UTC time>).
    type: path
    default: /root/gpuhost-vm-backups
  conf_dir:
    description: Where qemu-server keeps this node's VM configs; another directory only for tests.
    type: path
    default: /etc/pve/qemu-server
  sysfs_dir:
    description: Where sysfs is mounted; another directory only for tests.
    type: path
    default: /sys
  config_text:
    description:
      - The VM's config as text, read instead of C(<conf_dir>/<vmid>.conf), to plan the change for a node replayed
        from a capture (the audit's C(gpu_audit_capture) holds its configs). Only in check mode, since there is
        no config to change; name the GPUs in O(gpus) then, as no sysfs is read for them.
    type: str
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode (the change, the commands and the diff are computed and nothing is written or run but
    C(qm status)) and diff mode (the managed lines before and after).
  - "C(qm) must be on the PATH of the node. C(qm status) gets 30 s to answer (in check mode too: past that, whether
    the VM runs is not known, with a warning) and C(qm set) 120 s (past that the module fails, naming the copy of
    the config to compare with)."
seealso:
  - module: gpuhost.gpu.gpu_host_facts
"""

EXAMPLES = r"""
- name: Give every NVIDIA GPU of VM 120 one clique, q35, pcie=1, cpu host, no ballooning
  gpuhost.gpu.proxmox_vm_gpu:
    vmid: 120
  register: vm_gpu

- name: Two cliques, one per CPU socket's GPUs
  gpuhost.gpu.proxmox_vm_gpu:
    vmid: 130
    gpus: [hostpci0, hostpci1, hostpci2, hostpci3]
    cliques:
      - [hostpci0, hostpci1]
      - [hostpci2, hostpci3]
    numa: true

- name: Restart QEMU for a staged change (a reboot inside the guest is not enough)
  ansible.builtin.command:
    cmd: "{{ vm_gpu.restart_command }}"
  when: vm_gpu.restart_needed | bool
  changed_when: true
"""

RETURN = r"""
changed:
  description: Whether C(qm set) ran (or would run, in check mode).
  returned: always
  type: bool
conf_file:
  description: The config read.
  returned: always
  type: str
  sample: /etc/pve/qemu-server/120.conf
gpus:
  description: The GPUs managed.
  returned: always
  type: list
  elements: dict
  contains:
    hostpci:
      description: Their C(hostpciN) line.
      type: str
      sample: hostpci0
    bdf:
      description: The host function the line names; null for a line passed through a resource mapping.
      type: str
      sample: "0000:41:00.0"
    clique:
      description: Their C(x-nv-gpudirect-clique).
      type: int
    added:
      description: Whether the line is new.
      type: bool
changes:
  description: Each key changed, with its value before and after; C(new) null for a key deleted.
  returned: always
  type: list
  elements: dict
  sample: [{"key": "cpu", "old": "host,hidden=1", "new": "host"}]
command:
  description: The C(qm set) run (or that would run, in check mode), as an argv list; empty when nothing changes.
  returned: always
  type: list
  elements: str
  sample: [qm, set, "120", --cpu, host, --balloon, "0"]
command_line:
  description: RV(command) as one line to paste into a shell; null when nothing changes.
  returned: always
  type: str
  sample: qm set 120 --cpu host --balloon 0
backup:
  description: The copy of the config made before C(qm set); null when nothing was changed.
  returned: always
  type: str
  sample: /root/gpuhost-vm-backups/120.conf.20250101T120000.000000Z
pending:
  description:
    - Whether some of the target is only in the config's [PENDING] section (the VM runs, so C(qm set) staged it).
    - In check mode with changes to make, whether the VM runs (C(qm status)), so they would be staged; null when
      that could not be asked.
  returned: always
  type: bool
pending_keys:
  description: The managed keys whose target value waits in [PENDING].
  returned: always
  type: list
  elements: str
restart_needed:
  description: Whether QEMU must stop and start again for the target to take effect (same as RV(pending)).
  returned: always
  type: bool
restart_command:
  description: What makes a pending change take effect; null when none is needed.
  returned: always
  type: str
  sample: qm shutdown 120 && qm start 120
msg:
  description: One line saying what happened and what is left to do.
  returned: always
  type: str
diff:
  description: The managed lines before and after, in diff mode.
  returned: when diff mode is on
  type: dict
"""

import os
import time
from pathlib import Path
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.virt import parse_node_names
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import is_nvidia_gpu
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    MAX_HOSTPCI,
    parse_bool,
    parse_hostpci,
    parse_vm_config,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.process import Finished, run_bounded
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_desired import (
    DesiredState,
    DesiredStateError,
    desired_state,
    gpu_function,
)

from ansible.module_utils.basic import AnsibleModule

# qm waits without end while pmxcfs (the cluster file system) does not answer, as on a node that lost quorum, and
# qm set for as long as another task holds the VM's lock. status answers at once on a healthy node; set writes
# one config, under qemu-server's own 10 s lock timeout.
QM_STATUS_TIMEOUT_S = 30
QM_SET_TIMEOUT_S = 120


def get_argument_spec() -> dict:
    return {
        "vmid": {"type": "int", "required": True},
        "gpus": {"type": "list", "elements": "str"},
        "cliques": {"type": "raw"},
        "numa": {"type": "raw", "default": "auto"},
        "backup_dir": {"type": "path", "default": "/root/gpuhost-vm-backups"},
        "conf_dir": {"type": "path", "default": "/etc/pve/qemu-server"},
        "sysfs_dir": {"type": "path", "default": "/sys"},
        "config_text": {"type": "str"},
    }


def read_sysfs(sysfs: str, relative: str) -> str | None:
    try:
        return Path(sysfs, relative).read_text(encoding="utf-8").strip().lower()
    except OSError:
        return None


def nvidia_gpu_lines(options: dict[str, str], sysfs: str, warn: Any) -> list[str]:
    """The hostpciN lines whose GPU function this host shows as an NVIDIA display controller."""
    found = []
    for index in range(MAX_HOSTPCI):
        entry_key = f"hostpci{index}"
        if entry_key not in options:
            continue
        entry = parse_hostpci(index, options[entry_key])
        bdf = gpu_function(entry.host_ids)
        if entry.mapping or bdf is None:
            continue
        vendor = read_sysfs(sysfs, f"bus/pci/devices/{bdf}/vendor")
        device_class = read_sysfs(sysfs, f"bus/pci/devices/{bdf}/class")
        if vendor is None:
            warn(f"{entry_key} passes {bdf}, which {sysfs}/bus/pci/devices does not show: it is left out; name it "
                 "in gpus to manage it")
        elif is_nvidia_gpu(vendor, device_class):
            found.append(entry_key)
    return found


def host_numa_nodes(sysfs: str) -> int | None:
    try:
        names = os.listdir(Path(sysfs, "devices/system/node"))
    except OSError:
        return None
    return len(parse_node_names(names)) or None


def numa_choice(value: Any) -> str | bool | None:
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() == "auto":
        return "auto"
    return parse_bool(str(value))


def backup(module: AnsibleModule, data: bytes, vmid: int) -> str:
    directory = Path(module.params["backup_dir"])
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now * 1e6) % 1000000:06d}Z"
    path = directory / f"{vmid}.conf.{stamp}"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(path, "xb") as handle:  # never over an earlier backup
            handle.write(data)
        path.chmod(0o600)
    except OSError as err:
        module.fail_json(msg=f"proxmox_vm_gpu: expected to copy the config to {path} before changing it; found "
                             f"{err.strerror or err}. Nothing was changed; choose a writable backup_dir.")
    return str(path)


def run_qm(argv: list[str], timeout_s: float) -> Finished:
    """``qm`` under a deadline: it blocks for as long as the cluster file system (pmxcfs) or the VM's lock does
    not answer, in check mode too (``qm status``)."""
    return run_bounded(argv, timeout_s, env={**os.environ, "LC_ALL": "C"})


def vm_running(module: AnsibleModule, qm: str | None, vmid: int) -> bool | None:
    """Whether the VM runs; None when qm cannot tell (no qm, an error, no answer within QM_STATUS_TIMEOUT_S)."""
    if qm is None:
        return None
    try:
        done = run_qm([qm, "status", str(vmid)], QM_STATUS_TIMEOUT_S)
    except OSError as err:
        module.warn(f"qm status {vmid} could not be run ({err.strerror or err}): whether the VM runs is not known")
        return None
    if done.timed_out:
        module.warn(f"qm status {vmid} gave no answer within {QM_STATUS_TIMEOUT_S} s (is pmxcfs, the cluster file "
                    "system, answering? pvecm status and systemctl status pve-cluster tell): whether the VM runs is "
                    "not known")
        return None
    return None if done.rc != 0 else "status: running" in done.stdout.decode("utf-8", "replace")


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    vmid = params["vmid"]
    conf = Path(params["conf_dir"]) / f"{vmid}.conf"
    if not 100 <= vmid <= 999999999:
        module.fail_json(msg=f"proxmox_vm_gpu: expected a VM id from 100 to 999999999; found {vmid}")
    numa = numa_choice(params["numa"])
    if numa is None:
        module.fail_json(msg=f"proxmox_vm_gpu: expected numa to be auto, true or false; found {params['numa']!r}")
    replay = params["config_text"] is not None
    if replay and not module.check_mode:
        module.fail_json(msg=f"proxmox_vm_gpu: expected check mode with config_text (a replayed config, nothing to "
                             f"change); found a run that would change VM {vmid}. Run with --check, or on the node "
                             "without config_text.")
    try:
        data = params["config_text"].encode("utf-8") if replay else conf.read_bytes()
    except OSError as err:
        module.fail_json(msg=f"proxmox_vm_gpu: expected the config of VM {vmid} at {conf}; found "
                             f"{err.strerror or err}. Run this on the node that holds the VM (qm list shows its VMs).")
    config = parse_vm_config(data)
    for warning in config.warnings:
        module.warn(f"{conf}: {warning}")
    options = config.effective()
    gpus = params["gpus"] or nvidia_gpu_lines(options, params["sysfs_dir"], module.warn)
    if not gpus:
        lines = ", ".join(f"{k}: {v}" for k, v in sorted(options.items()) if k.startswith("hostpci")) or "none"
        module.fail_json(msg=f"proxmox_vm_gpu: expected NVIDIA GPUs among the hostpci lines of VM {vmid}; found "
                             f"none ({lines}). Name them in gpus (hostpciN or 0000:41:00.0).")
    try:
        state = desired_state(config, vmid, gpus, cliques=params["cliques"], numa=numa,
                              host_numa_nodes=host_numa_nodes(params["sysfs_dir"]) if numa == "auto" else None)
    except DesiredStateError as err:
        module.fail_json(msg=f"proxmox_vm_gpu: {err}")
    for warning in state.warnings:
        module.warn(warning)

    result: dict[str, Any] = {
        "changed": state.changed, "conf_file": str(conf), "backup": None,
        "gpus": [{"hostpci": g.id, "bdf": g.bdf, "clique": g.clique, "added": g.added} for g in state.gpus],
        "changes": [c.as_dict() for c in state.changes], "command": state.argv(), "command_line": state.command(),
    }
    if module._diff:
        result["diff"] = {**state.diff(options), "before_header": str(conf), "after_header": str(conf)}
    qm = module.get_bin_path("qm")
    if not state.changed:
        pending_keys = state.pending_keys(config)
        module.exit_json(**result, **_pending(state, pending_keys),
                         msg=_message(state, "already has the target", pending_keys))
    if module.check_mode:
        # A replayed config's VM is not on this machine: whether it runs is unknown.
        running = None if replay else vm_running(module, qm, vmid)
        module.exit_json(**result, pending=running, pending_keys=[], restart_needed=running,
                         restart_command=state.restart_command() if running is not False else None,
                         msg=f"VM {vmid}: would run {state.command()}")
    if qm is None:
        module.fail_json(msg=f"proxmox_vm_gpu: expected the qm command of Proxmox VE on the PATH; found none "
                             f"({os.environ.get('PATH', '')}). Run this on the Proxmox VE node that holds VM {vmid}.",
                         **result)
    result["backup"] = backup(module, data, vmid)
    try:
        done = run_qm([qm, *state.argv()[1:]], QM_SET_TIMEOUT_S)
    except OSError as exc:
        module.fail_json(msg=f"proxmox_vm_gpu: expected to run {state.command()}; it could not start: "
                             f"{exc.strerror or exc}. The config was copied to {result['backup']} first.", **result)
    rc, out, err = done.rc, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    if done.timed_out:
        left = f" ({done.note})" if done.note else ""
        module.fail_json(msg=f"proxmox_vm_gpu: expected {state.command()} to finish; it gave no answer within "
                             f"{QM_SET_TIMEOUT_S} s and was stopped{left}. It may have changed the config or not: "
                             f"compare {conf} with the copy at {result['backup']}, check that pmxcfs answers "
                             "(pvecm status, systemctl status pve-cluster) and that no task holds the VM's lock "
                             f"(qm unlock {vmid} once none runs), then run this again.",
                         rc=rc, stdout=out, stderr=err, **result)
    if rc != 0:
        module.fail_json(msg=f"proxmox_vm_gpu: expected {state.command()} to succeed; it exited {rc}: "
                             f"{(err or out).strip()}. The config was copied to {result['backup']} first.",
                         rc=rc, stdout=out, stderr=err, **result)
    after = parse_vm_config(conf.read_bytes())
    wrong = state.mismatches(after.effective())
    if wrong:
        module.fail_json(msg=f"proxmox_vm_gpu: expected {conf} to hold the change after {state.command()}; found "
                             f"{'; '.join(wrong)}. Compare it with the copy at {result['backup']}.",
                         stdout=out, stderr=err, **result)
    pending_keys = state.pending_keys(after)
    module.exit_json(**result, **_pending(state, pending_keys),
                     msg=_message(state, f"ran {state.command()}", pending_keys))


def _pending(state: DesiredState, pending_keys: list[str]) -> dict[str, Any]:
    pending = bool(pending_keys)
    return {"pending": pending, "pending_keys": pending_keys, "restart_needed": pending,
            "restart_command": state.restart_command() if pending else None}


def _message(state: DesiredState, done: str, pending_keys: list[str]) -> str:
    if not pending_keys:
        return f"VM {state.vmid}: {done}"
    return (f"VM {state.vmid}: {done}; {', '.join(pending_keys)} wait in [PENDING] until QEMU starts again: run "
            f"{state.restart_command()} (a reboot inside the guest keeps the old QEMU and its command line)")


if __name__ == "__main__":
    main()
