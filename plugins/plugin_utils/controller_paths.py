"""Where the collection's paths on the controller lie: the one rule for a relative path, and the report directory.

A relative path a user gives (``reports``, ``captures/gpu-node-1.json``) means the directory ansible-playbook was
started from, as it does on a shell's command line. Left as it is, a module would take it from wherever it runs
(the playbook's directory, for a local module) and a lookup from the role's or the playbook's directory. The
shell's ``PWD`` names that directory as the user sees it (through symbolic links, as the paths the reports print);
the process's working directory stands in when ``PWD`` is not set.

Paths that start with ``/`` or ``~`` are kept as they are: ``~`` is the home of whoever reads the path (the
module that expands it), not necessarily the controller's user.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The variable that says where the reports go, read by every role and playbook that writes or reads them.
REPORT_DIR_VARIABLE = "gpuhost_report_dir"
# Its value when unset or empty: reports/ under the directory ansible-playbook runs from.
REPORT_DIR_DEFAULT = "reports"
# The variables it replaced (one per role or playbook), no longer read: a run that sets one is told so, since its
# reports would otherwise go somewhere else without a word.
RETIRED_REPORT_DIR_VARIABLES = (
    "gpu_audit_report_dir",
    "gpu_bench_report_dir",
    "deployment_gate_report_dir",
    "sglang_serve_report_dir",
    "proxmox_vm_gpu_report_dir",
    "proxmox_fix_report_dir",
    "gpu_analyze_report_dir",
)


def retired_report_dir_message(name: str, report_dir: str) -> str:
    return (f"{name} is no longer read: the collection's one report directory is {REPORT_DIR_VARIABLE}. The "
            f"reports of this run go to {report_dir}; set {REPORT_DIR_VARIABLE} instead of {name}.")


def launch_dir(environ: Mapping[str, str] | None = None) -> str:
    """The directory ansible-playbook was started from."""
    environ = os.environ if environ is None else environ
    return environ.get("PWD") or os.getcwd()


def resolve(path: str, base: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``path`` taken from ``base``, by default the directory ansible-playbook runs from; absolute, ``~`` and empty
    paths unchanged."""
    if not path or path[:1] in "/~":
        return path
    base = base or launch_dir(environ)
    return base + path if base.endswith("/") else f"{base}/{path}"
