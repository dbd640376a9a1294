"""The report's `qm set` for a VM that hides KVM is the command the fix runs (issue 29).

The incident's VM 120 has `cpu: host,hidden=1` waiting in [PENDING]. The report said `qm set 120 --revert cpu`
while proxmox_vm_gpu (playbooks/proxmox_fix.yml) runs `qm set 120 --cpu host`: two wordings of one change, and
`--revert` would also drop any other pending cpu option. Both now come to the command the fix runs.
"""

from __future__ import annotations

import shlex

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import parse_vm_config
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_desired import desired_state
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import all_plans

from tests.unit.captures import audited, capture

NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"


def test_the_reports_cpu_command_is_the_one_the_fix_runs() -> None:
    (plan,) = [p for p in all_plans(audited(NO_CLIQUE)) if p.vmid == 120]
    config = parse_vm_config(capture(NO_CLIQUE)["files"]["/etc/pve/qemu-server/120.conf"].encode())
    state = desired_state(config, 120, [f"hostpci{n}" for n in range(8)])
    fix_cpu = {change.key: change.new for change in state.changes}["cpu"]

    assert plan.commands["cpu"] == shlex.join(["qm", "set", "120", "--cpu", fix_cpu]) == "qm set 120 --cpu host"
    remedy = next(f["remedy"] for f in audited(NO_CLIQUE)["findings"] if f["id"] == "proxmox_vm_hidden")
    assert "--revert" not in remedy and "qm set 120 --cpu host" in remedy
