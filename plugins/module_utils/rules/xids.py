"""The Xid errors the NVIDIA driver logs that matter most on a serving host: what each means and what to do.

After NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) and its A100/H100 memory error
management guide, and DCGM's health checks. ``severity`` is what the audit makes of one such event
this boot: ``critical`` when the GPU needs a reset, a reboot or service before it is trusted again,
``warning`` when it is usually an application's doing or recoverable but worth a look, ``info`` when
it only follows from another error or a killed process. Xid 79 (fallen off the bus) is judged by
the gpu_lost rule (rules/gpu_usable.py), not with the others. Unknown numbers are warnings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Xid:
    name: str
    meaning: str
    action: str
    severity: str


RESET = "Drain the GPU and reset it (`nvidia-smi -r -i <index>`, all GPUs of an NVSwitch board together) or reboot"

XIDS: dict[int, Xid] = {
    13: Xid("Graphics Engine Exception",
            "a program's kernel faulted on the GPU (out-of-range address, illegal instruction); usually the "
            "application, rarely the hardware", "check the application (compute-sanitizer); if it recurs across "
            "programs, run the GPU diagnostics (`dcgmi diag -r 3`)", "warning"),
    31: Xid("GPU memory page fault",
            "a program accessed GPU memory it does not own (an MMU fault): usually an application or library bug",
            "check the application; if it recurs across programs, run `dcgmi diag -r 3`", "warning"),
    43: Xid("GPU stopped processing",
            "the driver stopped a program's channel after the program faulted; the GPU itself is fine",
            "nothing for the GPU; look at the program that was stopped", "info"),
    45: Xid("Preemptive cleanup, due to previous errors",
            "the driver cleaned up after an earlier error or a killed process",
            "look at the Xid before it; alone it needs nothing", "info"),
    48: Xid("Double Bit ECC Error (DBE)",
            "an uncorrectable memory error: data was lost; the page is retired or the row remapped at the next reset",
            f"{RESET}; then check retired pages / row remapping; a GPU that repeats it needs RMA", "critical"),
    61: Xid("Internal micro-controller breakpoint/warning",
            "the GPU's firmware hit an internal error", "reset the GPU or reboot; update the driver; "
            "report it to NVIDIA if it recurs", "warning"),
    62: Xid("Internal micro-controller halt",
            "the GPU's firmware halted: the GPU no longer works", f"{RESET}; update the driver; recurring: hardware",
            "critical"),
    63: Xid("ECC page retirement or row remapping recording event",
            "the driver recorded a page retirement or row remap after memory errors",
            "reset the GPU when it is idle so that the retirement or remap takes effect; watch the counts", "warning"),
    64: Xid("ECC page retirement or row remapper recording failure",
            "the driver could not record a retirement or remap (InfoROM)", f"{RESET}; if it recurs the GPU needs RMA",
            "critical"),
    74: Xid("NVLink error", "an NVLink link failed or took errors",
            f"{RESET}; check `nvidia-smi nvlink -e`; recurring on one link: reseat, then RMA", "critical"),
    79: Xid("GPU has fallen off the bus", "the GPU stopped answering on PCIe",
            "cold reboot; check power, seating, risers and temperatures; recurring: RMA", "critical"),
    92: Xid("High single-bit ECC error rate", "corrected memory errors at a high rate",
            "watch the ECC counters; reset at the next opportunity; recurring: RMA", "warning"),
    94: Xid("Contained ECC error",
            "an uncorrectable memory error contained to the program that hit it; other programs go on",
            "restart the affected program; reset the GPU when idle so that the row remap applies", "warning"),
    95: Xid("Uncontained ECC error",
            "an uncorrectable memory error the GPU could not contain: every program on the GPU is affected",
            f"{RESET}; recurring: RMA", "critical"),
    119: Xid("GSP RPC timeout", "the GPU System Processor's firmware did not answer the driver in time",
             f"{RESET}; update the driver; persistent on one GPU: RMA", "critical"),
    120: Xid("GSP error", "the GPU System Processor's firmware reported an error",
             f"{RESET}; update the driver; persistent on one GPU: RMA", "critical"),
    154: Xid("GPU recovery action changed",
             "the driver says what the GPU needs to recover (the message names it: none, GPU reset, node reboot, "
             "drain P2P...)", "do what the message names: reset the GPU or reboot the node", "critical"),
}

# "... changed from 0x0 (None) to 0x1 (GPU Reset Required)": the action now needed.
_RECOVERY_TO_RE = re.compile(r"\bto\s+0x([0-9a-fA-F]+)")


def xid_severity(xid: int | None, message: str = "") -> str:
    """The severity of one Xid event; 154 naming no action (0x0) is only information."""
    if xid == 154:
        target = _RECOVERY_TO_RE.search(message or "")
        if target is not None and int(target.group(1), 16) == 0:
            return "info"
    known = XIDS.get(xid) if isinstance(xid, int) else None
    return known.severity if known else "warning"
