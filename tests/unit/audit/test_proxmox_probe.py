"""The Proxmox code loads on Proxmox VE nodes only.

Modules reach a host as source and the host compiles every file it imports on every run, so code that
a host does not need costs every host of a fleet. Only a Proxmox VE node needs the VM config parsers,
the Proxmox gatherer and rules; only a saved capture needs the capture code.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import proxmox_probe
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import proxmox_config

from tests.paths import ROOT
from tests.unit.captures import CAPTURES, H100

MODULE_UTILS = "ansible_collections.gpuhost.gpu.plugins.module_utils"
PROXMOX_MODULES = {f"{MODULE_UTILS}.{name}" for name in (
    "audit.proxmox", "audit.proxmox_vm", "parsers.proxmox_config", "rules.proxmox", "rules.proxmox_plans",
    "audit.capture_privacy")}
AUDIT_IN_A_FRESH_PYTHON = """
import json, sys
import tests.conftest
import gpu_host_facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
with open(sys.argv[1]) as handle:
    found = facts.audit(ReplaySource(json.load(handle)), facts.resolve_subsets(["all"]), RuleOptions())
MODULE_UTILS = "ansible_collections.gpuhost.gpu.plugins.module_utils"
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith(MODULE_UTILS)),
                  "proxmox": "proxmox" in found}))
"""


def test_the_probe_reads_the_directory_the_parsers_name() -> None:
    assert proxmox_probe.QEMU_SERVER_DIR == proxmox_config.QEMU_SERVER_DIR


def loaded_by_an_audit_of(name: str) -> dict:
    run = subprocess.run([sys.executable, "-c", AUDIT_IN_A_FRESH_PYTHON, str(CAPTURES / f"{name}.json")],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


@pytest.mark.parametrize(("name", "node"), [(H100, False), ("proxmox-host-8xRTXPRO6000-vm-no-clique", True)])
def test_proxmox_code_loads_on_proxmox_nodes_only(name: str, node: bool) -> None:
    loaded = loaded_by_an_audit_of(name)
    assert loaded["proxmox"] is node
    capture_code = "ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_privacy"
    assert sorted(PROXMOX_MODULES & set(loaded["modules"])) == sorted(PROXMOX_MODULES - {capture_code} if node else [])


SMI_Q_MODULES = {f"ansible_collections.gpuhost.gpu.plugins.module_utils.{name}" for name in (
    "audit.smi_q", "audit.smi_q_gather", "parsers.nvidia_smi_q", "parsers.nvidia_smi_q_xml",
    "parsers.nvidia_smi_q_text")}


@pytest.mark.parametrize(("name", "reads_q"), [(H100, False), ("proxmox-q35-guest-8xRTXPRO6000-no-nvml", True)])
def test_the_nvidia_smi_q_reader_loads_on_hosts_without_nvml_only(name: str, reads_q: bool) -> None:
    loaded = SMI_Q_MODULES & set(loaded_by_an_audit_of(name)["modules"])
    assert loaded == (SMI_Q_MODULES if reads_q else set())
