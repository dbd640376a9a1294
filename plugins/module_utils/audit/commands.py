"""The commands the audit runs, written once: the argv a gatherer runs, the key it is shown under
(a capture's ``commands`` entry, a line of ``problems``: the argv joined by spaces, as
``capture_format.command_key`` writes it), and what the audit reads from its output, in the words the
from_material section of a capture built from material uses (material/capture.py ``seen``, ``unread``, ``not_seen``).

The gatherers (audit/*.py) run these, audit/seen.py asks the source whether it saw them, and
material/capture.py files pasted outputs under their keys: a command spelled anywhere else would be
one that material can never answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import command_key
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_health import (
    HEALTH_QUERY_FIELDS,
    HEALTH_QUERY_FIELDS_OLD,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import QUERY_GPU_FIELDS
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_capability import COMBINATIONS, capability_name


@dataclass(frozen=True)
class Command:
    argv: list[str]
    reads: str  # what the audit takes from the output, as the from_material section says it

    @property
    def key(self) -> str:
        return command_key(self.argv)


def _query_gpu(fields: tuple[str, ...] | list[str], reads: str) -> Command:
    return Command(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"], reads)


QUERY_GPU = _query_gpu(QUERY_GPU_FIELDS, "GPU list from nvidia-smi --query-gpu (the audit's fields)")
_HEALTH = "GPU health from nvidia-smi --query-gpu (ECC, retired pages, clocks)"
HEALTH_QUERY = _query_gpu(HEALTH_QUERY_FIELDS, _HEALTH)
# Drivers before R530 name the clocks field otherwise; the audit asks again with the old name.
HEALTH_QUERY_OLD = _query_gpu(HEALTH_QUERY_FIELDS_OLD, _HEALTH)
LIST_GPUS = Command(["nvidia-smi", "-L"], "GPU count from nvidia-smi -L")
_SMI_Q_READS = "GPU details and health from {} (BAR1, virtualization mode, row remapping, fabric)"
SMI_Q_XML = Command(["nvidia-smi", "-q", "-x"], _SMI_Q_READS.format("nvidia-smi -q -x"))
SMI_Q_TEXT = Command(["nvidia-smi", "-q"], _SMI_Q_READS.format("nvidia-smi -q"))
TOPO_MATRIX = Command(["nvidia-smi", "topo", "-m"], "topology matrix (nvidia-smi topo -m)")
# nvidia-smi topo -p2p letters for each matrix the audit keeps.
P2P_LETTERS = {"read": "r", "write": "w", "nvlink": "n", "atomics": "a"}
# Every capability nvidia-smi topo -p2p takes (its help calls "p" prop): material may hold a matrix
# the audit does not read, kept under its own command.
TOPO_P2P = {letter: Command(["nvidia-smi", "topo", "-p2p", letter],
                            f"P2P {name} matrix (nvidia-smi topo -p2p {letter})")
            for name, letter in {**P2P_LETTERS, "prop": "p"}.items()}
# Matrices only material holds: several capabilities at once (topo -p2p rw prints one matrix), and one
# whose capability the material does not state, filed under the command without one, which nvidia-smi refuses
# and so no live audit ever records (material/capture.py files them, audit/gpus.py reads them).
TOPO_P2P_MATERIAL = {letters: Command(["nvidia-smi", "topo", "-p2p", *([letters] if letters else [])],
                                      f"P2P matrix of {capability_name(letters)} (nvidia-smi topo -p2p {letters})"
                                      if letters else "P2P matrix of a capability not stated (nvidia-smi topo -p2p)")
                     for letters in (*COMBINATIONS, "")}
LSPCI = Command(["lspci", "-vvv", "-D"], "lspci -vvv -D (ACS and port types when config space is unreadable)")
DMESG = Command(["dmesg"], "kernel log (dmesg)")
# The kernel's messages of this boot from the journal, read when dmesg is refused (dmesg_restrict):
# members of the systemd-journal or adm groups may read it.
JOURNAL = Command(["journalctl", "-k", "-b", "--no-pager", "-q"], "kernel log (journal)")
FABRIC_MANAGER = Command(["systemctl", "is-active", "nvidia-fabricmanager"],
                         "fabric manager state (systemctl is-active nvidia-fabricmanager)")
# Read only when the service is not running: why it stopped (a driver of another version, most often).
FABRIC_MANAGER_JOURNAL = Command(["journalctl", "-u", "nvidia-fabricmanager", "-b", "--no-pager", "-q", "-n", "200"],
                                 "fabric manager log (journalctl -u nvidia-fabricmanager)")
# Opt-in only (audit/dcgm_diag.py): level 1 takes seconds to a minute and loads every GPU while it runs.
DCGM_DIAG = Command(["dcgmi", "diag", "-r", "1", "--json"], "DCGM diagnostic (dcgmi diag -r 1 --json)")
# Read only while the service runs: the installed package's version, compared with the loaded driver's (the
# running binary refused nothing, but the next start of a package of another version will). dpkg-query expands
# the backslash-n escape of its format itself.
FABRIC_MANAGER_PACKAGE = Command(["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package} ${Version}\\n",
                                  "nvidia-fabric*manager*"], "fabric manager package version (dpkg-query -W)")
# The driver, CUDA and NCCL packages and unattended-upgrades itself, with their selection (hold) and state
# (parsers/dpkg_list.py). Patterns that match nothing make dpkg-query exit 1 with the others still listed.
DPKG_GPU_PACKAGES = Command(["dpkg-query", "-W", "-f=${db:Status-Abbrev}\t${binary:Package}\t${Version}\n",
                             "nvidia-*", "libnvidia-*", "cuda-*", "libcuda*", "libnccl*", "unattended-upgrades"],
                            "NVIDIA driver, CUDA and NCCL packages and their holds (dpkg-query -W)")
DETECT_VIRT = {flag: Command(["systemd-detect-virt", flag], "systemd-detect-virt") for flag in ("--vm", "--container")}
PVEVERSION = Command(["pveversion"], "pveversion")
# Each nvidia-smi output the GPU facts can come from (audit/gpus.py, audit/smi_q_gather.py).
GPU_LISTS = (QUERY_GPU, SMI_Q_XML, SMI_Q_TEXT, TOPO_MATRIX, *(TOPO_P2P[letter] for letter in P2P_LETTERS.values()))
