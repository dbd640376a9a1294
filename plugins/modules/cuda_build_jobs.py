#!/usr/bin/python
"""Ansible module: MAX_JOBS and NVCC_THREADS for a CUDA extension build, from the host's CPUs and free memory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_build_jobs
short_description: Plan MAX_JOBS and NVCC_THREADS for a CUDA extension build so that it does not run out of memory
description:
  - Reads the CPUs this process may run on, C(/proc/meminfo) (MemTotal, MemAvailable) and the cgroup limits above
    the process (cgroup v2 C(memory.max), C(memory.current), C(cpu.max); cgroup v1 C(memory.limit_in_bytes),
    C(memory.usage_in_bytes), C(cpu.cfs_quota_us)), since containers and systemd slices limit a build below what
    C(/proc) shows. Memory charged to a cgroup counts less its inactive page cache (C(memory.stat)).
  - "Then plans by this rule: C(nvcc_threads = max(1, min(nvcc_threads_cap, targets))), where C(targets) is the
    number of O(archs), an arch with C(+PTX) counting twice (C(nvcc --threads) compiles the targets of one file in
    parallel); C(headroom = max(headroom_min_gib, headroom_fraction x total memory));
    C(mem_jobs = floor((available - headroom) / (mem_per_thread_gib x nvcc_threads)));
    C(cpu_jobs = max(1, cpus // nvcc_threads)); C(max_jobs = min(cpu_jobs, mem_jobs, max_jobs_cap))."
  - When not even one job fits (C(mem_jobs < 1)) the module fails with the GiB one job needs and the GiB found,
    unless O(allow_low_memory) forces one job.
  - Read-only; runs the same in check mode and never reports a change.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  archs:
    description:
      - The architectures the build compiles for, in C(TORCH_CUDA_ARCH_LIST) form (C(12.0), C(9.0a), C(8.6+PTX)).
    type: list
    elements: str
    required: true
  targets:
    description:
      - The gencode targets the build really compiles, for an extension that ignores O(archs) and hard-codes its
        own; counted instead of O(archs). sgl-kernel compiles C(sm_80), C(sm_89), C(sm_90), C(sm_90a), C(sm_100a)
        and C(sm_120a) with CUDA 12.8 on x86_64, whatever C(TORCH_CUDA_ARCH_LIST) says
        (from its C(CMakeLists.txt); the stack profiles list them as C(gencode_targets)).
    type: list
    elements: str
  mem_per_thread_gib:
    description: Peak resident memory of one nvcc thread on this extension's kernels, in GiB (measured, worst case).
    type: float
    required: true
  headroom_min_gib:
    description: Memory left to the rest of the host, at least this many GiB.
    type: float
    default: 4
  headroom_fraction:
    description: Memory left to the rest of the host, at least this fraction of its total memory.
    type: float
    default: 0.15
  nvcc_threads_cap:
    description: The most threads one nvcc may use.
    type: int
    default: 4
  max_jobs_cap:
    description: The most parallel compiler jobs, however large the host.
    type: int
    default: 32
  max_jobs:
    description:
      - An explicit C(MAX_JOBS); it wins over the rule, which is still computed and reported beside it. C(0)
        leaves the choice to the rule.
      - With an override, a host too small for the rule is reported, not failed.
    type: int
    default: 0
  allow_low_memory:
    description: Force C(MAX_JOBS=1) when the rule finds that not even one job fits, instead of failing.
    type: bool
    default: false
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; reads and changes nothing.
"""

EXAMPLES = r"""
- name: Plan the flash-attention build
  gpuhost.gpu.cuda_build_jobs:
    archs: ["12.0"]
    mem_per_thread_gib: 5
  register: jobs

- name: Build with the planned parallelism
  ansible.builtin.command:
    argv: [/opt/sglang/.venv/bin/python, -m, pip, wheel, --no-deps, --no-build-isolation, flash-attn==2.8.3]
  environment:
    MAX_JOBS: "{{ jobs.max_jobs }}"
    NVCC_THREADS: "{{ jobs.nvcc_threads }}"
  changed_when: true

- name: Keep four jobs whatever the rule says (reported beside the rule's own answer)
  gpuhost.gpu.cuda_build_jobs:
    archs: ["9.0a", "12.0"]
    mem_per_thread_gib: 4
    max_jobs: 4
"""

RETURN = r"""
max_jobs:
  description: The C(MAX_JOBS) to build with, O(max_jobs) when given, else the rule's.
  returned: always
  type: int
  sample: 8
nvcc_threads:
  description: Threads per nvcc (C(NVCC_THREADS), C(SGL_KERNEL_COMPILE_THREADS)).
  returned: always
  type: int
  sample: 1
computed_max_jobs:
  description: What the rule gives, also when O(max_jobs) overrides it; null when the rule found no job fits.
  returned: always
  type: int
  sample: 8
overridden:
  description: Whether O(max_jobs) set the result.
  returned: always
  type: bool
forced:
  description: Whether O(allow_low_memory) forced one job that the rule would not allow.
  returned: always
  type: bool
explanation:
  description: One line saying how the numbers came about.
  returned: always
  type: str
  sample: >-
    MAX_JOBS=2, NVCC_THREADS=1: 1 target -> 1 nvcc thread per job (cap 4); 2 CPUs // 1 = 2 jobs;
    (20.3 GiB available - 4.0 GiB headroom) / (1 GiB x 1 thread) = 16 jobs; cap 32; limited by CPUs
inputs:
  description: What was read and asked.
  returned: always
  type: dict
  contains:
    cpus:
      description: CPUs the build may use (affinity, bounded by a cgroup CPU quota).
      type: int
    mem_total_gib:
      description: Total memory, bounded by a cgroup memory limit.
      type: float
    mem_available_gib:
      description: Available memory, bounded by what a cgroup memory limit leaves.
      type: float
    limits:
      description: Each source read and what it said.
      type: list
      elements: str
    archs:
      description: O(archs).
      type: list
      elements: str
    targets:
      description: Gencode targets counted, from O(targets) when given, else from O(archs).
      type: int
    gencode_targets:
      description: O(targets).
      type: list
      elements: str
    mem_per_thread_gib:
      description: O(mem_per_thread_gib).
      type: float
plan:
  description: >-
    The rule's numbers: C(cpu_jobs), C(mem_jobs), C(headroom_gib), C(usable_gib), C(gib_per_job), C(planned_gib);
    null when the rule found no job fits.
  returned: always
  type: dict
"""

from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.build_jobs import (
    JobsError,
    count_targets,
    plan_jobs,
    read_resources,
)

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "archs": {"type": "list", "elements": "str", "required": True},
        "targets": {"type": "list", "elements": "str"},
        "mem_per_thread_gib": {"type": "float", "required": True},
        "headroom_min_gib": {"type": "float", "default": 4.0},
        "headroom_fraction": {"type": "float", "default": 0.15},
        "nvcc_threads_cap": {"type": "int", "default": 4},
        "max_jobs_cap": {"type": "int", "default": 32},
        "max_jobs": {"type": "int", "default": 0},
        "allow_low_memory": {"type": "bool", "default": False},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    if params["max_jobs"] < 0:
        module.fail_json(msg=f"cuda_build_jobs: expected max_jobs of 0 (the rule decides) or more; found "
                             f"{params['max_jobs']}")
    # An extension that hard-codes its targets (sgl-kernel) compiles those, whatever the archs say.
    targets = len(params["targets"]) if params["targets"] else count_targets(params["archs"])
    if targets < 1:
        module.fail_json(msg=f"cuda_build_jobs: expected at least one architecture in archs (e.g. ['12.0']); "
                             f"found {params['archs']}")
    try:
        resources = read_resources()
    except JobsError as err:
        module.fail_json(msg=f"cuda_build_jobs: {err}")

    inputs = {**resources.as_dict(), "archs": params["archs"], "targets": targets,
              "gencode_targets": params["targets"],
              "mem_per_thread_gib": params["mem_per_thread_gib"]}
    try:
        plan = plan_jobs(cpus=resources.cpus, mem_total_gib=resources.mem_total_gib,
                         mem_available_gib=resources.mem_available_gib, targets=targets,
                         mem_per_thread_gib=params["mem_per_thread_gib"],
                         headroom_min_gib=params["headroom_min_gib"], headroom_fraction=params["headroom_fraction"],
                         nvcc_threads_cap=params["nvcc_threads_cap"], max_jobs_cap=params["max_jobs_cap"],
                         allow_low_memory=params["allow_low_memory"])
    except JobsError as err:
        if not params["max_jobs"]:
            module.fail_json(msg=f"cuda_build_jobs: {err}", inputs=inputs)
        threads = max(1, min(params["nvcc_threads_cap"], targets))
        module.exit_json(changed=False, max_jobs=params["max_jobs"], nvcc_threads=threads, computed_max_jobs=None,
                         overridden=True, forced=False, inputs=inputs, plan=None,
                         explanation=f"MAX_JOBS={params['max_jobs']} (set explicitly), NVCC_THREADS={threads}; "
                                     f"the rule would refuse: {err}")

    if params["max_jobs"]:
        module.exit_json(changed=False, max_jobs=params["max_jobs"], nvcc_threads=plan.nvcc_threads,
                         computed_max_jobs=plan.max_jobs, overridden=True, forced=plan.forced, inputs=inputs,
                         plan=plan.as_dict(),
                         explanation=f"MAX_JOBS={params['max_jobs']} (set explicitly; the rule gives "
                                     f"{plan.max_jobs}), NVCC_THREADS={plan.nvcc_threads}; rule: {plan.explanation}")
    module.exit_json(changed=False, max_jobs=plan.max_jobs, nvcc_threads=plan.nvcc_threads,
                     computed_max_jobs=plan.max_jobs, overridden=False, forced=plan.forced, inputs=inputs,
                     plan=plan.as_dict(), explanation=plan.explanation)


if __name__ == "__main__":
    main()
