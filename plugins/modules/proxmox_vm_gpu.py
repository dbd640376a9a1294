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
  - "The fix is a state machine: its state (C(planned), C(backed_up), C(applied), C(restarting), C(restarted),
    C(proven), C(rolling_back), C(rolled_back)) is recorded in C(<backup_dir>/<vmid>.p2p-fix.json) on the node,
    written atomically before each step. A later run reads it: an open fix keeps the backup it began with (a
    second run of the two-step flow, or one after a run cut anywhere, returns it in RV(backup)), a cut rollback
    is finished first, and RV(next) says what the run does next. O(step) runs the other steps: C(restart),
    C(restore), C(proven)."
  - "O(step=restart) brings the VM to run the new config: C(qm shutdown) (C(qm stop) past O(shutdown_timeout)),
    C(qm start), and C(qm status) until it runs. When the VM does not start with the new config, the backup is
    put back and the VM started as it was, and RV(rolled_back) and RV(reason) say so (the module does not fail:
    the caller reports and fails)."
  - "O(step=restore) puts the backup back (byte for byte, over the config, in place), the VM stopped first and
    started after when it ran before the fix. O(step=proven) records that the guest was measured with the change
    and the change kept."
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
  step:
    description:
      - C(apply) brings the config to the target (after finishing a cut rollback, if any); C(restart) stops and
        starts the VM of an open fix so that QEMU runs the new config; C(restore) puts the fix's backup back and
        runs the VM as it was; C(proven) records that the guest was measured with the change and it is kept.
    type: str
    choices: [apply, restart, restore, proven]
    default: apply
  shutdown_timeout:
    description: O(step=restart), seconds C(qm shutdown) waits for the guest to power off before C(qm stop) cuts it.
    type: int
    default: 180
  start_timeout:
    description: O(step=restart) and O(step=restore), seconds to wait for C(qm status) to say running after
      C(qm start).
    type: int
    default: 120
  reason:
    description: O(step=restore), why the backup is put back, as the record and the report should say it.
    type: str
  backup:
    description:
      - O(step=restore), the backup to put back when the node holds no record of an open fix (a backup made before
        the state file existed); the record's backup otherwise.
    type: path
  verdict:
    description: O(step=proven), the verdict of the fix's report, kept in the record.
    type: str
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
  - "A state file that is no record of this VM's fix makes the module fail naming it: compare the config with the
    newest backup beside it, then move the file away to start afresh."
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

- name: Restart QEMU for a staged change (a reboot inside the guest is not enough), rolling back if it fails
  gpuhost.gpu.proxmox_vm_gpu:
    vmid: 120
    step: restart
  register: vm_gpu_restart
  when: vm_gpu.next in ['restart', 'start']

- name: Put the config back when the guest's probe fails
  gpuhost.gpu.proxmox_vm_gpu:
    vmid: 120
    step: restore
    reason: the P2P probe found data that did not arrive
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
  description:
    - The copy of the config made before C(qm set), by this run or by the run that began the open fix; null when
      no fix is open.
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
fix:
  description:
    - The record of the fix on the node after this step (null when there is none), and where it is (C(file)).
  returned: always
  type: dict
  contains:
    state:
      description: planned, backed_up, applied, restarting, restarted, proven, rolling_back or rolled_back.
      type: str
    backup:
      description: The backup of the config the VM had before the fix.
      type: str
    was_running:
      description: Whether the VM ran when the fix began.
      type: bool
    reason:
      description: Why it was rolled back.
      type: str
    verdict:
      description: The report's verdict, when proven.
      type: str
    history:
      description: The states, each with when it was recorded (UTC), oldest first.
      type: list
      elements: dict
    file:
      description: The state file.
      type: str
  sample: {state: applied, backup: /root/gpuhost-vm-backups/120.conf.20250101T120000.000000Z,
           file: /root/gpuhost-vm-backups/120.p2p-fix.json}
next:
  description:
    - "What the run does next: C(none) (no change, or the fix is proven), C(restart) (the change waits in
      [PENDING]: restart the VM when allowed), C(start) (the fix stopped the VM and was cut: start it, O(step=restart)),
      C(wait_start) (the VM is stopped: the change takes effect at its next start), C(measure) (the VM runs the new
      config: measure the guest, then O(step=proven) or O(step=restore)), C(report_rolled_back) (this step rolled
      the fix back: report and fail)."
  returned: always
  type: str
restarted:
  description: Whether this step started the VM with the new config.
  returned: always
  type: bool
rolled_back:
  description: Whether this step put the backup back.
  returned: always
  type: bool
reason:
  description: Why this step rolled the fix back; null when it did not.
  returned: always
  type: str
diff:
  description: The managed lines before and after, in diff mode.
  returned: when diff mode is on
  type: dict
"""

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.virt import parse_node_names
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import is_nvidia_gpu
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    MAX_HOSTPCI,
    VmConfig,
    parse_bool,
    parse_hostpci,
    parse_vm_config,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.process import Finished, run_bounded
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import proxmox_fix_state as fix
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_desired import (
    DesiredState,
    DesiredStateError,
    desired_state,
    gpu_function,
)

from ansible.module_utils.basic import AnsibleModule

# qm waits without end while pmxcfs (the cluster file system) does not answer, as on a node that lost quorum, and
# qm set for as long as another task holds the VM's lock. status answers at once on a healthy node; set writes
# one config, under qemu-server's own 10 s lock timeout; stop kills QEMU.
QM_STATUS_TIMEOUT_S = 30
QM_SET_TIMEOUT_S = 120
QM_STOP_TIMEOUT_S = 120
# How often qm status is asked while waiting for the VM to run.
POLL_S = 1.0


def get_argument_spec() -> dict:
    return {
        "vmid": {"type": "int", "required": True},
        "gpus": {"type": "list", "elements": "str"},
        "cliques": {"type": "raw"},
        "numa": {"type": "raw", "default": "auto"},
        "backup_dir": {"type": "path", "default": "/root/gpuhost-vm-backups"},
        "conf_dir": {"type": "path", "default": "/etc/pve/qemu-server"},
        "sysfs_dir": {"type": "path", "default": "/sys"},
        "step": {"type": "str", "choices": ["apply", "restart", "restore", "proven"], "default": "apply"},
        "shutdown_timeout": {"type": "int", "default": 180},
        "start_timeout": {"type": "int", "default": 120},
        "reason": {"type": "str"},
        "backup": {"type": "path"},
        "verdict": {"type": "str"},
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


def utc_now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1e6) % 1000000:06d}Z"


def backup_path(directory: Path, vmid: int) -> Path:
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now * 1e6) % 1000000:06d}Z"
    return directory / f"{vmid}.conf.{stamp}"


def write_backup(path: Path, data: bytes) -> None:
    with open(path, "xb") as handle:  # never over an earlier backup
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    path.chmod(0o600)


def write_atomically(path: Path, text: str) -> None:
    """The file whole or not at all, as a kill at any point leaves it: a temporary file beside it, synced, renamed."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def put_back(backup: Path, conf: Path) -> None:
    """The backup over the config, written in place as cp does: /etc/pve (pmxcfs) takes that, and refuses the
    chmod a copy module may attempt. Byte for byte, [PENDING] section, snapshots and comments included, which
    qm set of the old values cannot write back."""
    shutil.copyfile(backup, conf)


def run_qm(argv: list[str], timeout_s: float) -> Finished:
    """``qm`` under a deadline: it blocks for as long as the cluster file system (pmxcfs) or the VM's lock does
    not answer, in check mode too (``qm status``)."""
    return run_bounded(argv, timeout_s, env={**os.environ, "LC_ALL": "C"})


def said(done: Finished) -> str:
    text = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else "no output"


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


class Node:
    """The node's side of one VM's fix: its config, its record, qm. Every step that changes something is
    recorded first (fix.advance then save), so that a run cut anywhere leaves a record the next run can act on."""

    def __init__(self, module: AnsibleModule, vmid: int) -> None:
        self.module, self.vmid = module, vmid
        params = module.params
        self.conf = Path(params["conf_dir"]) / f"{vmid}.conf"
        self.backup_dir = Path(params["backup_dir"])
        self.state_file = self.backup_dir / fix.state_file_name(vmid)
        self.qm = module.get_bin_path("qm")

    def fail(self, msg: str, **extra: Any) -> NoReturn:
        self.module.fail_json(msg=f"proxmox_vm_gpu: {msg}", **extra)
        raise AssertionError("unreachable")  # fail_json exits; this tells the type checker

    def load(self) -> fix.FixRecord | None:
        try:
            text = self.state_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            self.fail(f"expected to read the record of VM {self.vmid}'s fix at {self.state_file}; found "
                      f"{getattr(err, 'strerror', None) or err}. Nothing was changed.")
        try:
            return fix.parse_record(text, self.vmid)
        except fix.FixStateError as err:
            self.fail(f"expected {self.state_file} to record VM {self.vmid}'s P2P fix; {err}. Nothing was changed: "
                      f"compare {self.conf} with the newest backup beside the file ({self.vmid}.conf.*), put that "
                      "back if the fix should be undone, then move the file away to start afresh.")

    def save(self, record: fix.FixRecord) -> None:
        try:
            self.backup_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            for stale in self.backup_dir.glob(f".{self.state_file.name}.*.tmp"):  # left by a run killed mid-write
                stale.unlink(missing_ok=True)
            write_atomically(self.state_file, fix.render_record(record))
        except OSError as err:
            self.fail(f"expected to record the fix's state ({record.state}) in {self.state_file}; found "
                      f"{err.strerror or err}. The fix stopped before its next step; choose a writable backup_dir.",
                      fix=self.described(record))

    def advance(self, record: fix.FixRecord, state: str, **changes: Any) -> fix.FixRecord:
        try:
            moved = fix.advance(record, state, utc_now(), **changes)
        except fix.FixStateError as err:
            self.fail(f"VM {self.vmid}: {err}; record {self.state_file}.", fix=self.described(record))
        self.save(moved)
        return moved

    def described(self, record: fix.FixRecord | None) -> dict[str, Any] | None:
        if record is None:
            return None
        described = record.as_dict()
        described.pop("format")
        return {**described, "file": str(self.state_file)}

    def read_config(self) -> tuple[bytes, VmConfig]:
        try:
            data = self.conf.read_bytes()
        except OSError as err:
            self.fail(f"expected the config of VM {self.vmid} at {self.conf}; found {err.strerror or err}. Run this "
                      "on the node that holds the VM (qm list shows its VMs).")
        return data, parse_vm_config(data)

    def need_qm(self) -> str:
        if self.qm is None:
            self.fail(f"expected the qm command of Proxmox VE on the PATH; found none ({os.environ.get('PATH', '')}). "
                      f"Run this on the Proxmox VE node that holds VM {self.vmid}.")
        return self.qm

    def running(self) -> bool | None:
        return vm_running(self.module, self.qm, self.vmid)

    def qm_run(self, words: list[str], timeout_s: float) -> Finished:
        argv = [self.need_qm(), *words]
        try:
            return run_qm(argv, timeout_s)
        except OSError as err:
            return Finished(rc=None, stdout=b"", stderr=f"could not start: {err.strerror or err}".encode(),
                            timed_out=False)

    def start_and_wait(self, timeout_s: int) -> str | None:
        """Start the VM and wait for it to run; None when it runs, else what went wrong."""
        done = self.qm_run(["start", str(self.vmid)], max(timeout_s, QM_STATUS_TIMEOUT_S))
        if done.timed_out:
            return f"qm start {self.vmid} gave no answer within {max(timeout_s, QM_STATUS_TIMEOUT_S)} s"
        if done.rc != 0:
            return f"qm start {self.vmid} exited {done.rc}: {said(done)}"
        deadline = time.monotonic() + max(timeout_s, 0)
        while self.running() is not True:
            if time.monotonic() >= deadline:
                return f"qm status {self.vmid} did not say running within {timeout_s} s of qm start"
            time.sleep(POLL_S)
        return None

    def stop(self) -> str | None:
        """Stop the VM (when it runs, or qm cannot tell); None when it is stopped, else what went wrong."""
        if self.running() is False:
            return None
        done = self.qm_run(["stop", str(self.vmid)], QM_STOP_TIMEOUT_S)
        if self.running() is False:
            return None
        if done.timed_out:
            return f"qm stop {self.vmid} gave no answer within {QM_STOP_TIMEOUT_S} s"
        return f"qm stop {self.vmid} exited {done.rc}: {said(done)}"

    def roll_back(self, record: fix.FixRecord, reason: str, start_timeout: int) -> fix.FixRecord:
        """Put the record's backup back and run the VM as it was when the fix began; the record rolled_back.
        Each part is safe to do again, so a rollback cut anywhere is finished by the next run."""
        if record.state != fix.ROLLING_BACK:
            record = self.advance(record, fix.ROLLING_BACK, reason=reason)
        backup = Path(record.backup or "")
        if not backup.is_file():
            self.fail(f"expected the backup of VM {self.vmid}'s config before the fix at {backup} to roll the fix back "
                      f"({reason}); found no such file. The config was not changed back: put the config the VM had "
                      f"back at {self.conf} by hand (a copy elsewhere, or qm set of the changed keys), then move "
                      f"{self.state_file} away.", fix=self.described(record))
        problem = self.stop()
        if problem:
            self.fail(f"expected VM {self.vmid} to stop before its config is put back ({reason}); {problem}. Nothing "
                      f"was put back yet: stop it (qm stop {self.vmid}) and run this again, which finishes the "
                      "rollback.", fix=self.described(record))
        try:
            put_back(backup, self.conf)
        except OSError as err:
            self.fail(f"expected to copy {backup} over {self.conf} ({reason}); found {err.strerror or err}. The VM is "
                      f"stopped: copy it by hand (cp -- {backup} {self.conf}), then qm start {self.vmid}.",
                      fix=self.described(record))
        if fix.start_after_rollback(record):
            problem = self.start_and_wait(start_timeout)
            if problem:
                self.fail(f"VM {self.vmid}'s config before the fix is back at {self.conf} (from {backup}, {reason}), "
                          f"but the VM does not run with it: {problem}. Look at the node's task log (journalctl -u "
                          f"pvedaemon), start it (qm start {self.vmid}), then run this again to record it.",
                          fix=self.described(record))
        return self.advance(record, fix.ROLLED_BACK)


def outcome(node: Node, record: fix.FixRecord | None, **result: Any) -> dict[str, Any]:
    return {"restarted": False, "rolled_back": False, "reason": None, **result, "fix": node.described(record)}


def apply_step(module: AnsibleModule, node: Node) -> None:
    params, vmid = module.params, node.vmid
    numa = numa_choice(params["numa"])
    if numa is None:
        module.fail_json(msg=f"proxmox_vm_gpu: expected numa to be auto, true or false; found {params['numa']!r}")
    replay = params["config_text"] is not None
    if replay and not module.check_mode:
        module.fail_json(msg=f"proxmox_vm_gpu: expected check mode with config_text (a replayed config, nothing to "
                             f"change); found a run that would change VM {vmid}. Run with --check, or on the node "
                             "without config_text.")
    if replay:
        data = params["config_text"].encode("utf-8")
        config = parse_vm_config(data)
        record = None  # the node's record is on the node, not in its capture
    else:
        record = node.load()
        if record is not None and fix.opening(record, False) == fix.OPEN_FINISH_ROLLBACK:
            finish_rollback(module, node, record)
        data, config = node.read_config()
    conf = node.conf
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

    opening = fix.opening(record, not state.changed)
    result: dict[str, Any] = {
        "changed": state.changed, "conf_file": str(conf),
        "backup": record.backup if opening == fix.OPEN_CONTINUE and record is not None else None,
        "gpus": [{"hostpci": g.id, "bdf": g.bdf, "clique": g.clique, "added": g.added} for g in state.gpus],
        "changes": [c.as_dict() for c in state.changes], "command": state.argv(), "command_line": state.command(),
    }
    if module._diff:
        result["diff"] = {**state.diff(options), "before_header": str(conf), "after_header": str(conf)}
    if opening == fix.OPEN_NONE:
        pending_keys = state.pending_keys(config)
        module.exit_json(**result, **_pending(state, pending_keys), **outcome(node, record, next=fix.NEXT_NONE),
                         msg=_message(state, "already has the target", pending_keys))
    if not state.changed:  # an open fix whose config holds the target: settle the record by what the node shows
        pending_keys = state.pending_keys(config)
        record = settle(module, node, record, pending_keys)
        seen = fix.Observed(has_target=True, running=node.running(), pending=bool(pending_keys))
        done = f"already has the target (the fix begun with the backup {record.backup} is {record.state})"
        module.exit_json(**result, **_pending(state, pending_keys),
                         **outcome(node, record, next=fix.next_step(record, seen)),
                         msg=_message(state, done, pending_keys))
    if module.check_mode:
        # A replayed config's VM is not on this machine: whether it runs is unknown.
        running = None if replay else node.running()
        planned = record if record is not None and record.is_open else None
        module.exit_json(**result, pending=running, pending_keys=[], restart_needed=running,
                         restart_command=state.restart_command() if running is not False else None,
                         **outcome(node, planned, next=fix.NEXT_RESTART if running else fix.NEXT_WAIT_START),
                         msg=f"VM {vmid}: would run {state.command()}")
    node.need_qm()
    if record is None or not record.is_open:
        record = begin_fix(module, node, record, data, result)
    record = set_config(module, node, record, state, result)
    after = parse_vm_config(node.conf.read_bytes())
    pending_keys = state.pending_keys(after)
    record = settle(module, node, record, pending_keys)
    seen = fix.Observed(has_target=True, running=node.running(), pending=bool(pending_keys))
    module.exit_json(**result, **_pending(state, pending_keys),
                     **outcome(node, record, next=fix.next_step(record, seen)),
                     msg=_message(state, f"ran {state.command()}", pending_keys))


def begin_fix(module: AnsibleModule, node: Node, previous: fix.FixRecord | None, data: bytes,
              result: dict[str, Any]) -> fix.FixRecord:
    """A new fix: planned (with the backup's path), the backup written, backed_up."""
    path = backup_path(node.backup_dir, node.vmid)
    record = fix.begin(node.vmid, str(path), node.running(), utc_now(), previous)
    node.save(record)
    try:
        write_backup(path, data)
    except OSError as err:
        module.fail_json(msg=f"proxmox_vm_gpu: expected to copy the config to {path} before changing it; found "
                             f"{err.strerror or err}. Nothing was changed; choose a writable backup_dir.",
                         fix=node.described(record))
    result["backup"] = str(path)
    return node.advance(record, fix.BACKED_UP)


def set_config(module: AnsibleModule, node: Node, record: fix.FixRecord, state: DesiredState,
               result: dict[str, Any]) -> fix.FixRecord:
    """qm set, then the config read again; the record applied once it holds the target."""
    vmid, conf, backup = node.vmid, node.conf, result["backup"]
    described = node.described(record)
    try:
        done = run_qm([node.need_qm(), *state.argv()[1:]], QM_SET_TIMEOUT_S)
    except OSError as exc:
        module.fail_json(msg=f"proxmox_vm_gpu: expected to run {state.command()}; it could not start: "
                             f"{exc.strerror or exc}. The config was copied to {backup} first.",
                         **result, fix=described)
    rc, out, err = done.rc, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    if done.timed_out:
        left = f" ({done.note})" if done.note else ""
        module.fail_json(msg=f"proxmox_vm_gpu: expected {state.command()} to finish; it gave no answer within "
                             f"{QM_SET_TIMEOUT_S} s and was stopped{left}. It may have changed the config or not: "
                             f"compare {conf} with the copy at {backup}, check that pmxcfs answers "
                             "(pvecm status, systemctl status pve-cluster) and that no task holds the VM's lock "
                             f"(qm unlock {vmid} once none runs), then run this again.",
                         rc=rc, stdout=out, stderr=err, **result, fix=described)
    if rc != 0:
        module.fail_json(msg=f"proxmox_vm_gpu: expected {state.command()} to succeed; it exited {rc}: "
                             f"{(err or out).strip()}. The config was copied to {backup} first; the next run carries "
                             "the fix on from there, or puts that copy back (step restore).",
                         rc=rc, stdout=out, stderr=err, **result, fix=described)
    wrong = state.mismatches(parse_vm_config(conf.read_bytes()).effective())
    if wrong:
        module.fail_json(msg=f"proxmox_vm_gpu: expected {conf} to hold the change after {state.command()}; found "
                             f"{'; '.join(wrong)}. Compare it with the copy at {backup}.",
                         stdout=out, stderr=err, **result, fix=described)
    return node.advance(record, fix.APPLIED)


def settle(module: AnsibleModule, node: Node, record: fix.FixRecord, pending_keys: list[str]) -> fix.FixRecord:
    """The record moved on to what the node shows (a run cut after a step but before recording it, or a VM
    started by hand): recorded, except in check mode."""
    while True:  # backed_up may settle to applied, then applied to restarted
        running = node.running() if record.state in (fix.APPLIED, fix.RESTARTING) else None
        moved = fix.settled(record, fix.Observed(has_target=True, running=running, pending=bool(pending_keys)))
        if moved is None:
            return record
        record = fix.advance(record, moved, utc_now()) if module.check_mode else node.advance(record, moved)


def finish_rollback(module: AnsibleModule, node: Node, record: fix.FixRecord) -> NoReturn:
    reason = f"{record.reason or 'a rollback'} (an earlier run was cut while putting the config back; this run " \
             "finished it)"
    if module.check_mode:
        module.exit_json(changed=True, backup=record.backup, **outcome(node, record, next=fix.NEXT_REPORT_ROLLED_BACK),
                         msg=f"VM {node.vmid}: would finish putting back {record.backup}: {reason}")
    record = node.roll_back(record, record.reason or "a rollback", module.params["start_timeout"])
    module.exit_json(changed=True, backup=record.backup, conf_file=str(node.conf),
                     **outcome(node, record, next=fix.NEXT_REPORT_ROLLED_BACK, rolled_back=True, reason=reason),
                     msg=f"VM {node.vmid}: {reason}; its config is {record.backup} again")
    raise AssertionError("unreachable")


def restart_step(module: AnsibleModule, node: Node) -> None:
    vmid, params = node.vmid, module.params
    record = node.load()
    if record is None or not record.is_open:
        node.fail(f"expected an open fix of VM {vmid} to restart (state applied, restarting or restarted in "
                  f"{node.state_file}); found {record.state if record else 'no record'}. Run the step apply first.",
                  fix=node.described(record))
    _data, config = node.read_config()
    running = node.running()
    if running is None:  # a start of a VM that runs would fail, and roll a working change back
        node.fail(f"expected qm status {vmid} to say whether VM {vmid} runs before restarting it; it could not tell "
                  "(see the warning). Nothing was done: check that qm answers (pvecm status, systemctl status "
                  "pve-cluster), then run this again.", fix=node.described(record))
    stop_first, start = fix.restart_plan(record, running, bool(config.pending.options or config.pending_delete))
    if not start:
        record = settle(module, node, record, [])
        module.exit_json(changed=False, backup=record.backup, **outcome(node, record, next=fix.NEXT_MEASURE),
                         msg=f"VM {vmid}: already runs the new config")
    if module.check_mode:
        module.exit_json(changed=True, backup=record.backup, **outcome(node, record, next=fix.NEXT_MEASURE),
                         msg=f"VM {vmid}: would {'shut down and ' if stop_first else ''}start")
    record = node.advance(record, fix.RESTARTING)
    if stop_first:
        timeout = params["shutdown_timeout"]
        done = node.qm_run(["shutdown", str(vmid), "--timeout", str(timeout)], timeout + QM_STATUS_TIMEOUT_S)
        if done.timed_out or done.rc != 0:
            module.warn(f"qm shutdown {vmid} did not power the guest off within {timeout} s ({said(done)}): qm stop")
            problem = node.stop()
            if problem:
                node.fail(f"expected VM {vmid} to stop for its new config; {problem}. Its config holds the fix, "
                          "QEMU may still run the old one: run this again, which carries on from here.",
                          fix=node.described(record))
    problem = node.start_and_wait(params["start_timeout"])
    if problem:
        reason = f"VM {vmid} did not start with the new config: {problem}"
        record = node.roll_back(record, reason, params["start_timeout"])
        module.exit_json(changed=True, backup=record.backup, conf_file=str(node.conf),
                         **outcome(node, record, next=fix.NEXT_REPORT_ROLLED_BACK, rolled_back=True, reason=reason),
                         msg=f"{reason}; its config before the fix ({record.backup}) is back and it runs as it was")
    record = node.advance(record, fix.RESTARTED)
    module.exit_json(changed=True, backup=record.backup, **outcome(node, record, next=fix.NEXT_MEASURE, restarted=True),
                     msg=f"VM {vmid}: {'shut down and ' if stop_first else ''}started; it runs the new config")


def restore_step(module: AnsibleModule, node: Node) -> None:
    vmid, params = node.vmid, module.params
    reason = params["reason"] or "asked to put the config back"
    record = node.load()
    if record is None or record.state in (fix.PLANNED, fix.ROLLED_BACK):
        if not params["backup"]:
            done = "it was rolled back already" if record is not None and record.state == fix.ROLLED_BACK else \
                "no fix of it changed the config"
            module.exit_json(changed=False, backup=record.backup if record else None,
                             **outcome(node, record, next=fix.NEXT_NONE),
                             msg=f"VM {vmid}: nothing to put back: {done} ({node.state_file})")
        # A backup named by hand (one made before the state file existed): a fix open from it.
        record = fix.FixRecord(vmid=vmid, state=fix.APPLIED, backup=params["backup"])
    elif params["backup"] and params["backup"] != record.backup:
        node.fail(f"expected backup to be the open fix's backup {record.backup} (or left out); found "
                  f"{params['backup']}. Leave it out to put back the config the VM had before the fix.",
                  fix=node.described(record))
    if module.check_mode:
        module.exit_json(changed=True, backup=record.backup, **outcome(node, record, next=fix.NEXT_REPORT_ROLLED_BACK),
                         msg=f"VM {vmid}: would put {record.backup} back ({reason})")
    record = node.roll_back(record, reason, params["start_timeout"])
    module.exit_json(changed=True, backup=record.backup, conf_file=str(node.conf),
                     **outcome(node, record, next=fix.NEXT_REPORT_ROLLED_BACK, rolled_back=True, reason=reason),
                     msg=f"VM {vmid}: its config before the fix ({record.backup}) is back ({reason})")


def proven_step(module: AnsibleModule, node: Node) -> None:
    vmid = node.vmid
    record = node.load()
    if record is not None and record.state == fix.PROVEN:
        module.exit_json(changed=False, backup=None, **outcome(node, record, next=fix.NEXT_NONE),
                         msg=f"VM {vmid}: its fix was proven already")
    if record is None or record.state != fix.RESTARTED:
        node.fail(f"expected VM {vmid}'s fix to be restarted (the guest measured with the new config) to record it "
                  f"proven; found {record.state if record else 'no record'} in {node.state_file}.",
                  fix=node.described(record))
    if not module.check_mode:
        record = node.advance(record, fix.PROVEN, verdict=module.params["verdict"])
    module.exit_json(changed=True, backup=None, **outcome(node, record, next=fix.NEXT_NONE),
                     msg=f"VM {vmid}: the fix is proven and kept")


STEPS = {"apply": apply_step, "restart": restart_step, "restore": restore_step, "proven": proven_step}


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    vmid = module.params["vmid"]
    if not 100 <= vmid <= 999999999:
        module.fail_json(msg=f"proxmox_vm_gpu: expected a VM id from 100 to 999999999; found {vmid}")
    STEPS[module.params["step"]](module, Node(module, vmid))


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
