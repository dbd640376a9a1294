"""What a finding asks of the host, as a scheduler or an operator acts on it: a closed vocabulary, in order.

The order is that of disruption, each step taking the host further out of service than the one before, as
in NVIDIA's recovery chain for a GPU node (drain, then reset the GPU, then restart the OS):

- ``none``: nothing to do to the host's running state (context, or a setting to change when convenient).
- ``drain``: stop placing work on the host until a person does what the remedy says (hardware, a setting).
- ``reset_gpu``: drain, then reset the GPU (``nvidia-smi -r``, or a reboot where a reset is refused).
- ``reboot``: drain, then restart the operating system.
- ``reinstall_driver``: drain, install the right NVIDIA driver (or fabric manager), then restart.
- ``fix_hypervisor``: drain; the fix lies outside this host, on the hypervisor (a VM setting, an IOMMU
  parameter), and takes a cold restart of the VM from there; nothing done on the host itself helps.

The catalog (catalog.py) declares one action per finding id; a host's action is the most disruptive of its
findings' actions (finding.judgement), so one record carries it to every view.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

ACTIONS = ("none", "drain", "reset_gpu", "reboot", "reinstall_driver", "fix_hypervisor")
ACTION_RANK = {name: rank for rank, name in enumerate(ACTIONS)}
# A critical finding makes the host unfit; until it is fixed the host takes no work, so it asks at least this.
CRITICAL_AT_LEAST = "drain"


def most_disruptive(actions: Iterable[Any]) -> str:
    """The furthest-reaching of ``actions``; "none" without any. Values outside the vocabulary (a report edited
    by hand, an older report without actions) are skipped rather than guessed at."""
    known = [a for a in actions if a in ACTION_RANK]
    return max(known, key=ACTION_RANK.__getitem__, default="none")
