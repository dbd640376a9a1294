#!/usr/bin/python
"""Ansible module: measure NCCL collectives per message size, check the values, find the best NCCL settings."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_bench
short_description: Benchmark NCCL collectives per message size, with values checked, a timeout and tuning
description:
  - Runs an all-reduce sweep (all-gather and reduce-scatter when asked) over message sizes and returns, per size,
    the time (us), algbw and busbw (GB/s, 1e9) and the count of wrong values, out-of-place and in-place, in the
    shape nccl-tests prints them; the NCCL version and the transport NCCL chose per channel (P2P/IPC, P2P/CUMEM,
    SHM, NET) from C(NCCL_DEBUG=INFO).
  - "Engines: the nccl-tests binaries (C(all_reduce_perf) ...); torch.distributed with the nccl backend, one
    process per GPU, in the interpreter given as O(python); torch.distributed with the gloo backend on the CPU,
    which runs the same harness on a machine without a GPU. Given O(log), parses an existing nccl-tests output
    (text or C(-J) JSON) instead of running anything."
  - Every run has a deadline. A sweep that hangs is killed with all its ranks and reported as an C(nccl_timeout)
    finding naming the size that hung, not as a stuck play.
  - With O(tune), runs the sweep once per candidate environment and reports the best per size class
    (latency-bound small messages, bandwidth-bound large ones) and the one environment to deploy with.
  - Thresholds per size turn the numbers into findings (C(id), C(severity), C(summary), C(evidence), C(remedy)),
    as the host audit's findings. The defaults catch the host-memory fallback of a host without GPU P2P.
  - "Reads the NCCL version that ran (nccl-tests' header, C(NCCL_DEBUG=INFO)) and the one torch in O(python)
    bundles (C(torch.cuda.nccl.version()), the one serving uses), and names a version with a known bug on these GPUs
    (a table with the affected versions, the GPUs and conditions, the symptom, the version to move to and the public
    source) as a C(nccl_known_bad_version) finding. Where torch's NCCL is 2.31 or later, the torch engine sets
    C(NCCL_RUN_DIAGNOSTICS=1) for the baseline sweep, so that NCCL checks every GPU pair at communicator start, and
    reports what NCCL said (RV(nccl_diagnostics))."
  - "Rows that nccl-tests printed as C(inf) or C(nan) (C(0.00 us / inf GB/s)) are no measurement: their numbers are
    null, the row is marked C(not_measured), and a curve with such rows is not called healthy."
  - "Every option is checked before anything runs; one that cannot mean anything (a negative size, a step factor
    under 2, a timeout that is not a positive finite number, an environment variable name such as C(A=B)) fails
    the task with what was expected."
  - "Read-only; C(changed) is always false. In check mode a sweep, which loads every GPU for minutes, is not run
    unless O(run_in_check_mode) is true: the module returns C(skipped) with the reason. O(log) is read in check
    mode as well."
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  engine:
    description:
      - C(auto) parses O(log) when given; otherwise uses nccl-tests when C(all_reduce_perf) is found (in
        O(nccl_tests_dir) or on PATH), otherwise torch with NCCL when O(python) sees a CUDA device, and fails
        with what is missing when neither is there. C(torch-gloo) is never chosen by C(auto).
    type: str
    choices: [auto, nccl-tests, torch-nccl, torch-gloo]
    default: auto
  python:
    description:
      - The interpreter with torch that runs the harness, usually the serving venv's python
        (for example C(/opt/sglang/.venv/bin/python)). Defaults to the interpreter running this module.
    type: path
  nccl_tests_dir:
    description: Where the nccl-tests binaries are (the directory, or its C(build/) subdirectory). Default PATH.
    type: path
  log:
    description:
      - An nccl-tests output to parse instead of running, either the text a binary printed (NCCL lines
        interleaved are fine) or the JSON file written with C(-J). Read where the module runs.
    type: path
  collectives:
    description: Collectives to measure; results for the first one are returned as RV(results).
    type: list
    elements: str
    choices: [all_reduce, all_gather, reduce_scatter]
    default: [all_reduce]
  min_bytes:
    description: Smallest message size in bytes (the whole buffer, as nccl-tests counts it).
    type: int
    default: 8
  max_bytes:
    description: Largest message size in bytes. Default 1 GiB, and 4 MiB for C(torch-gloo).
    type: int
  step_factor:
    description: Each size is the previous one times this factor (nccl-tests C(-f)).
    type: int
    default: 2
  nranks:
    description: Ranks (GPUs) to use. Default every GPU the engine sees; 2 for C(torch-gloo).
    type: int
  iters:
    description: Timed iterations per size and placement.
    type: int
    default: 20
  warmup:
    description: Untimed iterations before them.
    type: int
    default: 5
  timeout:
    description:
      - Seconds one sweep (one candidate, every size and collective) may take before all its processes are killed
        and the size that hung is reported. For the torch engines the clock starts once every rank has joined
        (see O(startup_timeout)); for nccl-tests it covers the whole binary run. With O(tune) the run takes at
        most this times the number of candidates.
    type: float
    default: 300
  startup_timeout:
    description:
      - Seconds the torch engines' ranks may take to start (import torch, join the process group, NCCL's
        initialisation) before they are killed and a hang at start-up is reported.
    type: float
    default: 120
  check:
    description: Check the values each collective delivers and count the wrong ones.
    type: bool
    default: true
  env:
    description:
      - Environment for every run (C(NCCL_*) settings). C(NCCL_DEBUG=INFO) is added for the NCCL engines unless
        set here, to name the transports.
    type: dict
    default: {}
  serving_env:
    description:
      - C(sglang) runs every sweep with the environment SGLang gives NCCL when it serves (its
        C(entrypoints/engine.py)) C(NCCL_CUMEM_ENABLE=0) and C(NCCL_NVLS_ENABLE=0) unless O(env) or the candidate
        sets them, C(CUDA_DEVICE_MAX_CONNECTIONS=8) always), so that the baseline is the NCCL that serves.
      - C(nccl-defaults) adds nothing. RV(serving_env) says which was used, and the report repeats it.
    type: str
    choices: [sglang, nccl-defaults]
    default: sglang
  tune:
    description: Run the sweep under each of O(candidates) and recommend the best environment.
    type: bool
    default: false
  candidates:
    description:
      - Candidate environments for O(tune), each C({name, env}), applied over O(env). The first is the baseline.
      - "Default: C(as-is) (nothing added), C(p2p-disabled) (C(NCCL_P2P_DISABLE=1)), C(p2p-level-sys)
        (C(NCCL_P2P_LEVEL=SYS)), C(proto-ll), C(proto-ll128), C(proto-simple) (C(NCCL_PROTO))."
    type: list
    elements: dict
  thresholds:
    description:
      - Limits per message size, each C({size_bytes, max_time_us}) and/or C({size_bytes, min_busbw_gbps}), with
        optional C(collective) (default all_reduce), C(severity) and C(why). The better of the two placements is
        judged at the measured size nearest to C(size_bytes) (within a factor of 2).
      - "Default for the GPU engines: all-reduce of 16 KiB within 10 us + 2 us per ring hop (2(n-1) hops: 14 us for
        2 GPUs, 22 us for 4, 38 us for 8), and at least 8 GB/s busbw at 64 MiB (warning). Nothing is
        judged by default for C(torch-gloo). An empty list judges nothing."
      - "Each engine times one operation its own way: C(nccl-tests) the mean over ranks, the torch loop
        (C(torch-nccl)) the slowest rank, with torch's cost per call. The defaults were calibrated on nccl-tests,
        where the 16 KiB limit is critical; with C(torch-nccl) no calibration exists yet, so its defaults only warn.
        RV(thresholds) says each limit's C(timing) and C(calibration); limits given here are taken as calibrated."
    type: list
    elements: dict
  model:
    description:
      - A model to price the measured all-reduce latency for, a known model's name (C(glm-5), C(llama-3-70b)) or a
        mapping of its shape C({name, layers, allreduces_per_layer, hidden_size, dtype_bytes, tensor_parallel_size}).
        Adds RV(communication_ceiling) and a C(communication_ceiling) finding.
      - C(model_profile), the option's former name, is a deprecated alias, to be removed after 2027-06-01.
    aliases: [model_profile]
    type: raw
  concurrency:
    description: Concurrent streams for the second figure of RV(communication_ceiling) (batch 1 is always given).
    type: int
    default: 64
  gpu_names:
    description:
      - The host's GPU models (as nvidia-smi names them, for example the audit's C(gpus.devices[].name)), to match
        NCCL versions with known bugs on them. Default what the engine saw (torch's device names); nothing from a
        log.
    type: list
    elements: str
  probe:
    description:
      - The result of M(gpuhost.gpu.gpu_p2p_probe) on the same host, when it ran. With it,
        RV(communication_ceiling) is the one figure the deployment gate computes too, the same model and
        tensor-parallel size giving the same figure and basis.
      - An all-reduce over 3 or more GPUs no slower than two of the probe's GPU-to-GPU copies is a transfer test laid
        out as all_reduce_perf and is not used, nor one measured over another rank count than the model's; the
        ceiling is then estimated from the probe's slowest small-copy latency (C(basis) C(estimated_from_pair_latency)).
    type: dict
  run_in_check_mode:
    description:
      - Run the benchmark in check mode too. By default check mode runs no sweep (it loads every GPU of the host for
        minutes, also on a host that already serves) and returns C(skipped) with the reason; O(log) is always read.
    type: bool
    default: false
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; never changes anything. In check mode only O(log) is read, unless O(run_in_check_mode).
  - The torch engines write a self-contained harness to a temporary directory and run it as
    C(<python> collective_harness.py --json-config FILE); it needs only the standard library and torch.
  - torch.distributed.all_reduce works in place, so the torch engines report all_reduce C(in_place) only
    (C(out_of_place) is null); all_gather and reduce_scatter have both.
"""

EXAMPLES = r"""
- name: All-reduce sweep on every GPU with the serving venv's torch
  gpuhost.gpu.nccl_bench:
    engine: torch-nccl
    python: /opt/sglang/.venv/bin/python
  register: bench

- name: Find the best NCCL settings for this host
  gpuhost.gpu.nccl_bench:
    python: /opt/sglang/.venv/bin/python
    tune: true
    max_bytes: 268435456
  register: tuned

- name: Judge a log brought from a Slurm job, with our own baseline
  gpuhost.gpu.nccl_bench:
    log: /tmp/all_reduce_perf.out
    thresholds:
      - {size_bytes: 16384, max_time_us: 20}
      - {size_bytes: 67108864, min_busbw_gbps: 30}
  delegate_to: localhost

- name: Benchmark in check mode too (by default check mode runs no sweep)
  gpuhost.gpu.nccl_bench:
    python: /opt/sglang/.venv/bin/python
    run_in_check_mode: true
    gpu_names: "{{ ansible_facts.gpu_host.gpus.devices | map(attribute='name') | list }}"

- name: Run the harness on the CPU (no GPU needed)
  gpuhost.gpu.nccl_bench:
    engine: torch-gloo
    python: /opt/venvs/torch-cpu/bin/python
    nranks: 4
    max_bytes: 1048576
"""

RETURN = r"""
engine:
  description: The engine that produced the numbers (C(nccl-tests) for a log).
  returned: always
  type: str
  sample: torch-nccl
source:
  description: C(run) or C(log).
  returned: always
  type: str
status:
  description: How the (baseline) sweep ended, C(ok), C(timeout) or C(error).
  returned: always
  type: str
nranks:
  description: Ranks that took part.
  returned: always
  type: int
  sample: 8
nccl_version:
  description: The NCCL library that ran, when known.
  returned: always
  type: str
  sample: 2.27.3
collective:
  description: >-
    The collective RV(results) belongs to; null for a log that does not show which one it measured (no all-reduce
    threshold is applied to it, and RV(per_collective) keys its results C(unknown)).
  returned: always
  type: str
results:
  description:
    - Per message size, C(size_bytes), C(count), C(type), C(redop), and C(out_of_place) and C(in_place) each
      C({time_us, algbw_gbps, busbw_gbps, wrong}) (null when not measured; C(wrong) null when not checked).
    - C(not_measured), only on a row where the tool printed inf or nan, lists those placements; their time and
      bandwidths are null.
  returned: always
  type: list
  elements: dict
  sample:
    - {size_bytes: 16384, count: 4096, type: float, redop: sum, out_of_place: null,
       in_place: {time_us: 17.1, algbw_gbps: 0.96, busbw_gbps: 0.96, wrong: 0}}
per_collective:
  description: For each collective measured, C(results), C(avg_busbw_gbps) and C(out_of_bounds) (wrong values).
  returned: always
  type: dict
env:
  description: The environment of the baseline sweep (O(env) plus the first candidate's).
  returned: always
  type: dict
serving_env:
  description: >-
    Which environment the sweeps ran with: C(mode) (sglang, nccl-defaults, or log when read from a log),
    C(added) (the variables added as SGLang adds them), C(replaced) (values SGLang overrides, as they were),
    C(kept) (variables SGLang sets only when unset, which O(env) set already) and C(source).
    RV(env) and RV(recommended_env) stay without them: SGLang adds them itself.
  returned: always
  type: dict
transports:
  description: >-
    What NCCL_DEBUG=INFO said: C(nccl_version), C(connections), C(transports) (name -> count), C(env),
    C(p2p_used) and C(p2p_refusals) (each C(reason), C(host), C(devices), C(index_kind), C(bus_ids), C(ranks),
    C(message): where NCCL said P2P could not be enabled), as nccl_debug.parse_nccl_debug gives it; null for gloo
    or when no NCCL lines were printed.
  returned: always
  type: dict
thresholds:
  description: The thresholds that were applied (the defaults, or O(thresholds)), each with the engine's C(timing)
    rule (C(mean over ranks) or C(max over ranks)) and its C(calibration) (null where it only warns).
  returned: always
  type: list
violations:
  description: Each breached threshold with C(metric), C(limit), C(measured), C(measured_size_bytes), C(placement).
  returned: always
  type: list
unjudged_thresholds:
  description: Thresholds no measured size could judge, with the reason.
  returned: always
  type: list
tuning:
  description: >-
    With O(tune): C(candidates) (each C(name), C(env), C(status), C(wrong), C(small) {size_bytes, time_us} at the
    size nearest 16 KiB, C(large) {size_bytes, busbw_gbps} at the largest size, C(score), C(results)),
    C(best) {small, large}, C(recommended) {name, env, score, why}.
  returned: always
  type: dict
recommended_env:
  description: >-
    The environment to deploy with: with O(tune), O(env) plus the recommended candidate's; without, O(env) when
    the run was healthy; null when no environment worked.
  returned: always
  type: dict
hung_at:
  description: On timeout, the collective and size that did not finish.
  returned: always
  type: dict
versions:
  description: >-
    What ran: C(torch_version), C(cuda_version), C(python), C(devices) (torch engines), C(avg_busbw_gbps) (logs),
    and C(torch_nccl_version), the NCCL that torch in O(python) bundles (null when torch does not say).
  returned: always
  type: dict
nccl_diagnostics:
  description: >-
    What NCCL's own check at communicator start said (C(NCCL_RUN_DIAGNOSTICS=1), NCCL 2.31 on): C(requested) and
    C(why), C(lines) (each C(tag) OK or INFO, C(check) such as p2p, C(message), C(raw) as NCCL printed it),
    C(p2p) (C(status) ok, failed or flagged, C(passed), C(total) peer accesses) and C(completed) (C(ms), C(ranks)).
    Null for a log that holds no C(NCCL DIAG) line.
  returned: always
  type: dict
findings:
  description: >-
    Worst first, each C(id), C(severity), C(summary), C(evidence), C(remedy): C(nccl_small_message_latency),
    C(nccl_low_bus_bandwidth), C(nccl_wrong_values), C(nccl_timeout), C(nccl_run_failed), C(nccl_no_p2p_transport),
    C(nccl_p2p_refused) (the GPU pairs where C(NCCL_DEBUG=INFO) said P2P could not be enabled, and why),
    C(nccl_tuning_recommendation), C(nccl_tuning_no_working_candidate), C(nccl_results_not_measured) (inf or nan
    printed), C(nccl_known_bad_version) (with the version to move to), C(nccl_diagnostics_p2p_failed) and
    C(nccl_diagnostics_flagged) (what NCCL's diagnostics said).
  returned: always
  type: list
  elements: dict
notes:
  description: >-
    What the reader of the result should know, for example that a log does not name the collective it measured
    (so no all-reduce threshold and no communication ceiling apply to it).
  returned: when there is something to say
  type: list
  elements: str
elapsed_s:
  description: Seconds the sweeps took, start-up included, all candidates together.
  returned: always
  type: float
startup_s:
  description: Torch engines, seconds until every rank of the baseline sweep had joined; null otherwise.
  returned: always
  type: float
communication_ceiling:
  description: >-
    The communication ceiling: the decode rate that all-reduce latency alone allows for O(model) (the figure of
    bench/host_ceiling.py, the same the deployment gate shows): C(batch_1) and C(batch_<concurrency>)
    (O(concurrency) streams), each with C(model), C(batch), C(tensor_parallel_size), C(allreduces_per_step),
    C(allreduce_bytes), C(allreduce_latency_us), C(latency_basis), C(basis) (C(measured_all_reduce), or
    C(estimated_from_pair_latency) where O(probe) shows the measured figure is no all-reduce at the model's
    rank count), C(source), C(assumptions), C(comm_us_per_step), C(comm_us_per_token),
    C(max_tokens_per_s_single_stream), C(max_tokens_per_s_per_stream), C(max_tokens_per_s_aggregate),
    C(summary) and C(notes); and the two one-line C(summary) and C(summary_batch).
  returned: when O(model) is given
  type: dict
  sample:
    summary: all-reduce alone limits single-stream decode to 465 tok/s on this host (measured all-reduce over 8 GPUs)
"""

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import add_communication_ceiling
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_judge import COLLECTIVES, ENGINES, BenchInputError
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_runner import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    BenchFailure,
    BenchSkipped,
    run_bench,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "engine": {"type": "str", "choices": list(ENGINES), "default": "auto"},
        "python": {"type": "path"},
        "nccl_tests_dir": {"type": "path"},
        "log": {"type": "path"},
        "collectives": {"type": "list", "elements": "str", "choices": list(COLLECTIVES), "default": ["all_reduce"]},
        "min_bytes": {"type": "int", "default": 8},
        "max_bytes": {"type": "int"},
        "step_factor": {"type": "int", "default": 2},
        "nranks": {"type": "int"},
        "iters": {"type": "int", "default": 20},
        "warmup": {"type": "int", "default": 5},
        "timeout": {"type": "float", "default": DEFAULT_TIMEOUT_S},
        "startup_timeout": {"type": "float", "default": DEFAULT_STARTUP_TIMEOUT_S},
        "check": {"type": "bool", "default": True},
        "env": {"type": "dict", "default": {}},
        "serving_env": {"type": "str", "choices": ["sglang", "nccl-defaults"], "default": "sglang"},
        "tune": {"type": "bool", "default": False},
        "candidates": {"type": "list", "elements": "dict"},
        "thresholds": {"type": "list", "elements": "dict"},
        "model": {"type": "raw", "aliases": ["model_profile"], "deprecated_aliases": [
            {"name": "model_profile", "date": "2027-06-01", "collection_name": "gpuhost.gpu"}]},
        "concurrency": {"type": "int", "default": 64},
        "gpu_names": {"type": "list", "elements": "str"},
        "probe": {"type": "dict"},
        "run_in_check_mode": {"type": "bool", "default": False},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    try:
        result = run_bench(module.params, tmpdir=module.tmpdir, warn=module.warn, check_mode=module.check_mode)
        if module.params["model"] is not None:
            add_communication_ceiling(result, module.params["model"], module.params["concurrency"],
                                      module.params["probe"])
    except BenchSkipped as exc:
        module.exit_json(changed=False, skipped=True, msg=str(exc))
    except BenchFailure as exc:
        module.fail_json(msg=str(exc), **exc.details)
    except (BenchInputError, ModelError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
