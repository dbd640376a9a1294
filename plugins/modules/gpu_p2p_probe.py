#!/usr/bin/python
"""Ansible module: prove GPU peer-to-peer data really arrives, and measure copies by peer and by host path."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_p2p_probe
short_description: Prove that data written from one GPU arrives at another, and time it per message size
description:
  - For every ordered GPU pair, asks torch whether peer access can be enabled, copies a known pattern from one
    GPU into the other's memory and checks it at the destination (by the copy engine and by a kernel), under a
    deadline, so that a hang becomes a finding and not a stuck play. C(nvidia-smi topo -p2p) saying OK is not
    proof; on some GPUs a granted P2P window is a private mirror and the peer reads zeros (NVIDIA/nccl#2335).
  - Times copies per message size (8 B to 256 MiB, 4 KiB to 1 MiB densely) by the peer path and by the
    host-memory path (through a pinned host buffer), and returns them as matrices.
  - Given O(log), reads the output of cuda-samples C(p2pBandwidthLatencyTest) (a paste cut short too, whose
    peer-access lines and connectivity settle access per pair) or C(simpleP2P) (peer access per pair, its copy
    figure), or of C(nvbandwidth) (text, or JSON from C(-j)) instead, or the probe's own output saved with
    O(save_log) on an earlier run, told apart by content. Only the probe's own output carries the proof (data
    checked at the destination); the tools' logs show access and timings, not that the data arrived.
  - Findings in the audit's shape (C(id), C(severity), C(summary), C(evidence), C(remedy)).
  - "Every option is checked before anything runs; a timeout that is not a positive finite number, a negative size
    or GPU index fails the task with what was expected, and never becomes a finding."
  - "Read-only; C(changed) is always false. In check mode the probe, which loads every GPU pair, is not run unless
    O(run_in_check_mode) is true: the module returns C(skipped) with the reason. O(log) is read in check mode as
    well."
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  python:
    description:
      - The interpreter with a CUDA build of torch that runs the probe, usually the serving venv's python.
        Defaults to the interpreter running this module.
    type: path
  log:
    description:
      - Output to read instead of probing; p2pBandwidthLatencyTest, simpleP2P or nvbandwidth (text or C(-j)
        JSON, whole or a matrix cut out of it, C([...]) where rows were cut), or the probe's own JSON lines
        kept with O(save_log).
    type: path
  save_log:
    description:
      - After a real probe, write what the probe printed (JSON lines) to this path on the host, so that the run can
        be replayed later with O(log), on this host or on the controller. Not written in check mode.
    type: path
  devices:
    description: GPU indexes to probe (CUDA_VISIBLE_DEVICES for the probe). Default every GPU.
    type: list
    elements: int
  sizes:
    description: Message sizes in bytes to time. Default 8 B to 256 MiB, with every power of two from 4 KiB to 1 MiB.
    type: list
    elements: int
  proof_bytes:
    description: Bytes of the pattern copied and checked for every pair.
    type: int
    default: 4194304
  timeout:
    description: Seconds the whole probe may take; past it the probe is killed and the pair it was on is named.
    type: float
    default: 300
  max_small_latency_us:
    description:
      - A copy between two GPUs of about 16 KiB (the probe) or 16 bytes (p2pBandwidthLatencyTest) slower than this
        is the host-memory path (critical). With P2P such a copy takes 0.4-2.3 us; through host memory 11-22 us.
    type: float
    default: 5.0
  manifest:
    description:
      - The expected-host manifest of the host's class, as data, as for gpu_host_facts
        (docs/host_manifest.schema.json). Its C(bandwidth.peer_min_gbps) is judged here, where peer bandwidth is
        measured (by the probe, or read from O(log)); GPU pairs below it give C(manifest_peer_bandwidth_below).
      - Unset or empty, no floor is judged.
    type: dict
  missing_gpu:
    description: What to do when the interpreter sees no CUDA device, C(fail) or C(skip) (return skipped).
    type: str
    choices: [fail, skip]
    default: fail
  run_in_check_mode:
    description:
      - Run the probe in check mode too. By default check mode runs no probe (it copies data between every GPU pair
        for minutes, also on a host that already serves) and returns C(skipped) with the reason; O(log) is always
        read.
    type: bool
    default: false
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; never changes anything. In check mode only O(log) is read, unless O(run_in_check_mode).
  - The probe is a self-contained script (standard library and torch) written to a temporary directory and run
    as C(<python> p2p_harness.py --json-config FILE).
"""

EXAMPLES = r"""
- name: Prove P2P between every GPU pair with the serving venv's torch
  gpuhost.gpu.gpu_p2p_probe:
    python: /opt/sglang/.venv/bin/python
  register: p2p

- name: Read a p2pBandwidthLatencyTest log brought from another host
  gpuhost.gpu.gpu_p2p_probe:
    log: /tmp/p2pBandwidthLatencyTest.out
  delegate_to: localhost

- name: Probe and keep the probe's output, to replay it later with log
  gpuhost.gpu.gpu_p2p_probe:
    python: /opt/sglang/.venv/bin/python
    save_log: /var/log/gpuhost/p2p-probe.jsonl

- name: Probe only the GPUs of one tensor-parallel group, small sizes only
  gpuhost.gpu.gpu_p2p_probe:
    python: /opt/sglang/.venv/bin/python
    devices: [0, 1, 2, 3]
    sizes: [4096, 16384, 65536, 1048576]
"""

RETURN = r"""
source:
  description: C(probe), C(log) (a tool's output) or C(probe-log) (the probe's own output, replayed).
  returned: always
  type: str
tool:
  description: What measured, C(torch), C(p2pBandwidthLatencyTest), C(simpleP2P) or C(nvbandwidth).
  returned: always
  type: str
cut:
  description:
    - p2pBandwidthLatencyTest logs only. Where a paste cut short ends (C(matrix), C(rows) printed, C(of) GPUs);
      its peer access and the rows printed are used, the rest is null. Null for a whole output.
  returned: when a p2pBandwidthLatencyTest log was read
  type: dict
memcpy_peer:
  description:
    - simpleP2P logs only. Its C(cudaMemcpyPeer / cudaMemcpy between GPU0 and GPU1) figure (C(pair),
      C(gb_per_s)), copies both ways with peer access on; null when the paste does not show it.
  returned: when a simpleP2P log was read
  type: dict
passed:
  description: simpleP2P logs only. Its C(Test passed) line; null when the paste ends before its result.
  returned: when a simpleP2P log was read
  type: bool
status:
  description: C(ok), C(timeout) or C(error).
  returned: always
  type: str
devices:
  description: The GPUs (index, name) as the probe saw them.
  returned: always
  type: list
access:
  description: Whether GPU row can access GPU column's memory (null on the diagonal or when unknown).
  returned: always
  type: list
proof:
  description: >-
    Per pair, C(ce_wrong) and C(sm_wrong) (elements that did not arrive, by copy engine and by kernel),
    C(zeros_at_destination), C(elements), C(peer_access); null for logs.
  returned: always
  type: list
matrices:
  description: >-
    Each C(name), C(kind) (latency, bandwidth), C(unit) (us, ns for nvbandwidth's latencies, GB/s), C(path) (peer,
    host, p2p_enabled, p2p_disabled), C(size_bytes), C(bidirectional), C(measured_by) and C(values) (rows: source
    GPU, columns: destination); C(values_us) beside latencies printed in ns, C(sum) for nvbandwidth's SUM line. A
    matrix pasted without its title has null C(name), C(kind) and C(unit), and is not judged.
  returned: always
  type: list
hung_at:
  description: On timeout, the pair, phase and size that did not finish.
  returned: always
  type: dict
findings:
  description: >-
    Worst first: C(p2p_write_not_arriving), C(p2p_probe_timeout), C(p2p_small_copy_latency),
    C(p2p_peer_access_unavailable), C(p2p_no_gain).
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_harness
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_judge import DEFAULT_MAX_SMALL_LATENCY_US
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_runner import (
    DEFAULT_TIMEOUT_S,
    ProbeFailure,
    ProbeSkipped,
    run_probe,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import ReportFileError, write_atomically

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "python": {"type": "path"},
        "log": {"type": "path"},
        "save_log": {"type": "path"},
        "devices": {"type": "list", "elements": "int"},
        "sizes": {"type": "list", "elements": "int"},
        "proof_bytes": {"type": "int", "default": p2p_harness.DEFAULT_PROOF_BYTES},
        "timeout": {"type": "float", "default": DEFAULT_TIMEOUT_S},
        "max_small_latency_us": {"type": "float", "default": DEFAULT_MAX_SMALL_LATENCY_US},
        "manifest": {"type": "dict"},
        "missing_gpu": {"type": "str", "choices": ["fail", "skip"], "default": "fail"},
        "run_in_check_mode": {"type": "bool", "default": False},
    }


def save_log(path: str, text: str, warn) -> None:
    """Keep the probe's output whole at ``path``; a failure costs the run nothing but the copy."""
    try:
        write_atomically(path, text.encode("utf-8"))
    except ReportFileError as exc:
        warn(f"could not keep the probe's output in {path}: {exc.reason or exc}")


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    try:
        result = run_probe(module.params, tmpdir=module.tmpdir, check_mode=module.check_mode, warn=module.warn,
                           keep_log=save_log)
    except ProbeSkipped as exc:
        module.exit_json(changed=False, skipped=True, msg=str(exc))
    except ProbeFailure as exc:
        module.fail_json(msg=str(exc), **exc.details)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
