"""What a failed nvidia-smi run says, whatever it was asked: the kind of failure and what to do.

Pure functions from (exit status, stdout, stderr) to data: no Ansible, no subprocess.
``classify_nvidia_smi_failure`` returns ``NvidiaSmiFailure(kind, message, remedy)`` or None when the
run succeeded: ``kind`` is one of not_installed (rc None), timeout (rc 124), invalid_field,
version_mismatch, driver_not_loaded, nvml_not_found, gpu_lost, device_handle_error, no_devices,
nvml_init_failed, failed (any other non-zero status); ``message`` is the line that says it (with
the library version for a mismatch); ``remedy`` what to do. ``nvidia_smi_failure`` gives the same
as one string ``"<kind>: <message>"``. ``failure_in`` finds a known failure inside output that a
parser was given instead of the report it expects: ``(kind, message, remedy)`` or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import strip_ansi

# What an older nvidia-smi prints for a --query-gpu field it does not know; nvidia_smi_query reads the
# field's name from it.
INVALID_FIELD_RE = re.compile(r'Field "([^"]+)" is not a valid field to query')

# (kind, pattern, what to do). Order matters: the first match wins, most specific first.
_FAILURES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("invalid_field", INVALID_FIELD_RE,
     "This nvidia-smi is older than the query; ask again without that field."),
    ("version_mismatch", re.compile(r"Driver/library version mismatch", re.IGNORECASE),
     "The loaded kernel module and the user-space library differ (driver updated without reboot): "
     "reboot, or unload and reload the nvidia modules."),
    # Any character for the apostrophe: copies of this message often carry a typographic one.
    ("driver_not_loaded", re.compile(r"couldn.t communicate with the NVIDIA driver", re.IGNORECASE),
     "The kernel module is not loaded: check `lsmod | grep nvidia`, dmesg, Secure Boot signing, and that "
     "the driver was built for the running kernel."),
    ("nvml_not_found", re.compile(r"couldn't find libnvidia-ml\.so|NVML Shared Library Not Found", re.IGNORECASE),
     "The user-space driver (libnvidia-ml.so) is missing: install the driver's utils package."),
    ("gpu_lost", re.compile(r"GPU is lost", re.IGNORECASE),
     "A GPU fell off the bus: read dmesg for Xid 79, check power and seating, then reboot."),
    ("device_handle_error", re.compile(r"Unable to determine the device handle for GPU", re.IGNORECASE),
     "NVML cannot open one GPU: read dmesg for Xid errors; in a VM check the passthrough and the host."),
    ("no_devices", re.compile(r"No devices were found", re.IGNORECASE),
     "The driver sees no GPU: check `lspci -nn -d 10de:`, that the GPU is bound to nvidia (not vfio-pci) "
     "and, in a VM, that it is passed through."),
    ("nvml_init_failed", re.compile(r"Failed to initialize NVML", re.IGNORECASE),
     "NVML did not start: read the reason after the colon (permissions, container runtime, driver state)."),
)


@dataclass(frozen=True)
class NvidiaSmiFailure:
    kind: str
    message: str
    remedy: str


def failure_in(text: str) -> tuple[str, str, str] | None:
    """The first known failure in ``text``: (kind, the line that says it, remedy)."""
    lines = [line.strip() for line in strip_ansi(text).split("\n") if line.strip()]
    for kind, pattern, remedy in _FAILURES:
        for position, line in enumerate(lines):
            if pattern.search(line):
                message = " ".join(line.split())
                # The mismatch report names the library version on the next line.
                if kind == "version_mismatch" and position + 1 < len(lines) and "version" in lines[position + 1]:
                    message = f"{line} {lines[position + 1]}"
                return kind, message, remedy
    return None


def classify_nvidia_smi_failure(rc: int | None, stdout: str, stderr: str) -> NvidiaSmiFailure | None:
    """What went wrong with an nvidia-smi run, or None when it succeeded and printed no known failure.

    ``rc`` None means the binary was not found; 124 means no answer in time (see source.py).
    """
    text = "\n".join(part for part in (stderr, stdout) if isinstance(part, str))
    if rc is None:
        return NvidiaSmiFailure("not_installed", _first_line(text) or "nvidia-smi not found",
                                "Install the NVIDIA driver's utilities (nvidia-smi comes with them).")
    if rc == 124:
        return NvidiaSmiFailure("timeout", _first_line(text) or "nvidia-smi gave no answer in time",
                                "A wedged GPU or driver makes nvidia-smi hang: read dmesg for Xid errors.")
    found = failure_in(text)
    if found is not None:
        return NvidiaSmiFailure(*found)
    if rc != 0:
        return NvidiaSmiFailure("failed", f"exit status {rc}: {_first_line(text) or 'no message'}",
                                "Run the same nvidia-smi command by hand and read its message.")
    return None


def nvidia_smi_failure(rc: int | None, stdout: str, stderr: str) -> str | None:
    """``"<kind>: <message>"`` for a failed nvidia-smi run (kinds: not_installed, timeout, invalid_field,
    version_mismatch, driver_not_loaded, nvml_not_found, gpu_lost, device_handle_error, no_devices,
    nvml_init_failed, failed), or None when the run succeeded."""
    failure = classify_nvidia_smi_failure(rc, stdout, stderr)
    return None if failure is None else f"{failure.kind}: {failure.message}"


def _first_line(text: str) -> str:
    for line in strip_ansi(text).split("\n"):
        if line.strip():
            return " ".join(line.split())
    return ""
