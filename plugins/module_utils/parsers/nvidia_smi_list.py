"""Parser for ``nvidia-smi -L``: the GPUs the driver lists, and the MIG devices under each.

Pure functions from text to typed data: no Ansible, no subprocess. The parser raises only
``NvidiaSmiParseError`` (a ``ValueError``) and says what it expected, what it found and what to do.
Lines are ``GPU 0: NAME (UUID: GPU-...)`` (older drivers may leave out the UUID) with indented
``MIG 1g.10gb Device 0: (UUID: MIG-...)`` lines under a GPU in MIG mode.

Output schema: ``parse_list_gpus`` -> a list of ``ListedGpu(index: int, name: str, uuid: str | None,
mig_devices: list[MigDevice(profile: str, device: int, uuid: str)])``, in the order printed; empty
output gives an empty list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import output_lines, smi_error
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import failure_in

_LIST_GPU_RE = re.compile(r"^GPU (\d{1,6}): (.+?)(?: \(UUID: ([^)\s]+)\))?$")
_LIST_MIG_RE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d{1,6}): \(UUID: ([^)\s]+)\)$")


@dataclass(frozen=True)
class MigDevice:
    profile: str
    device: int
    uuid: str


@dataclass(frozen=True)
class ListedGpu:
    """One ``GPU n: NAME (UUID: ...)`` line of ``nvidia-smi -L`` and the MIG devices listed under it."""

    index: int
    name: str
    uuid: str | None
    mig_devices: list[MigDevice] = field(default_factory=list)


def parse_list_gpus(text: str) -> list[ListedGpu]:
    """Parse ``nvidia-smi -L``. Empty output gives an empty list; any line that is neither a GPU nor a
    MIG line raises ``NvidiaSmiParseError`` (check ``nvidia_smi_failure`` first for error messages)."""
    what = "nvidia-smi -L"
    gpus: list[ListedGpu] = []
    for line in output_lines(text, what):
        if not line.strip():
            continue
        gpu = _LIST_GPU_RE.match(line.rstrip())
        mig = _LIST_MIG_RE.match(line.rstrip())
        if gpu:
            index = int(gpu.group(1))
            if any(known.index == index for known in gpus):
                raise smi_error(what, f"GPU {index} listed once", line, "Capture the output again.")
            gpus.append(ListedGpu(index=index, name=gpu.group(2).strip(), uuid=gpu.group(3), mig_devices=[]))
        elif mig and gpus:
            gpus[-1].mig_devices.append(MigDevice(profile=mig.group(1), device=int(mig.group(2)),
                                                  uuid=mig.group(3)))
        else:
            failure = failure_in(line)
            todo = (f"nvidia-smi reported a failure ({failure[0]}); see nvidia_smi_failure()." if failure
                    else "Pass the output of `nvidia-smi -L` only.")
            raise smi_error(what, "lines 'GPU <n>: <name> (UUID: ...)' and indented MIG lines", line, todo)
    return gpus
