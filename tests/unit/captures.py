"""The committed host captures and their audits, shared by the tests that replay them."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests import paths

CAPTURES = paths.CAPTURES

H100 = "baremetal-8xH100-SXM"
PRO6000 = "baremetal-8xRTXPRO6000-p2p-ok"
INCIDENT = "proxmox-q35-guest-8xRTXPRO6000-p2p-NS"
I440FX = "proxmox-i440fx-guest-2xA6000"
RTX4090 = "baremetal-4xRTX4090-consumer"
HYPERVISOR = "proxmox-host-4xRTXPRO6000-vfio"
MICROVM = "firecracker-microvm-no-gpu"
# GPUs the host cannot use, and GPU health: the incident guest after a driver upgrade without a reboot and
# without nvidia-ml-py, the RTX PRO 6000 host with a GPU fallen off the bus, the H100 host with an Xid 48.
MISMATCH = "proxmox-q35-guest-8xRTXPRO6000-driver-mismatch"
NO_NVML = "proxmox-q35-guest-8xRTXPRO6000-no-nvml"
GPU_LOST = "baremetal-8xRTXPRO6000-gpu-lost"
H100_SICK = "baremetal-8xH100-SXM-xid48-row-remap"
ALL = (H100, PRO6000, INCIDENT, I440FX, RTX4090, HYPERVISOR, MICROVM, MISMATCH, NO_NVML, GPU_LOST, H100_SICK)


@cache
def read(name: str) -> str:
    return (CAPTURES / f"{name}.json").read_text(encoding="utf-8")


def capture(name: str) -> dict[str, Any]:
    """A fresh copy of a committed capture, safe to change."""
    return json.loads(read(name))


def audit(data: dict[str, Any], **options: Any) -> dict[str, Any]:
    return facts.audit(ReplaySource(data), facts.resolve_subsets(["all"]), RuleOptions(**options))


@cache
def _audited(name: str) -> str:
    return json.dumps(audit(capture(name)))


def audited(name: str) -> dict[str, Any]:
    """The audit of an unchanged capture (computed once per run), a fresh copy each call."""
    return json.loads(_audited(name))
