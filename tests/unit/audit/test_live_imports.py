"""The module every audited host runs compiles only the code its audit runs.

AnsiballZ ships gpu_host_facts' module_utils as source in a zip, from which Python can cache no bytecode: every
module imported is compiled again on every host at every run, and that compiling is most of what the audit costs
beyond ``setup`` (scripts/bench_audit.py). So the parsers of fallbacks (nvidia-smi's text where NVML answers,
lspci where sysfs tells, dcgmi's output, the fabric manager's log, the kernel command line's splitting) are
imported where they are used. Each case runs the module in a fresh interpreter over a capture and lists what it
imported; the capture without NVML, and the NVSwitch host's fabric manager, show that the check sees a parser
when it does run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import CAPTURES, ROOT
from tests.unit.captures import H100, INCIDENT, MICROVM, NO_NVML

PARSERS = "ansible_collections.gpuhost.gpu.plugins.module_utils.parsers."
FALLBACKS = {"nvidia_smi_topo", "nvidia_smi_topo_cells", "lspci", "dcgm_diag", "fabric_manager_log", "kernel_cmdline"}

# Runs gpu_host_facts as Ansible would, then prints the parsers it imported.
DRIVER = """
import json, sys
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpuhost.gpu.plugins.modules import gpu_host_facts
with patch_module_args(json.loads(sys.argv[1])):
    try:
        gpu_host_facts.main()
    except SystemExit:
        pass
prefix = "ansible_collections.gpuhost.gpu.plugins.module_utils.parsers."
print(json.dumps(sorted(name[len(prefix):] for name in sys.modules if name.startswith(prefix))), file=sys.stderr)
"""


def imported_parsers(capture: str) -> set[str]:
    args = {"capture": str(CAPTURES / f"{capture}.json"), "_ansible_check_mode": True}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "collections"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(args)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert not result.get("failed"), result
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("capture", [INCIDENT, MICROVM])
def test_a_host_whose_nvml_and_sysfs_answer_imports_no_fallback_parser(capture: str) -> None:
    assert imported_parsers(capture) & FALLBACKS == set()


def test_a_host_with_nvswitches_reads_the_fabric_manager_and_no_other_fallback() -> None:
    assert imported_parsers(H100) & FALLBACKS == {"fabric_manager_log"}


def test_a_host_without_nvml_imports_what_reads_nvidia_smi() -> None:
    assert {"nvidia_smi_topo", "nvidia_smi_failure"} <= imported_parsers(NO_NVML)
