#!/usr/bin/python
"""Ansible module: decide from the audit, benchmark and probe facts whether a model may be deployed, and how."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: deploy_gate
short_description: Pass or block a model deployment on a GPU host, with every reason and the launch settings
description:
  - Reads the host's audit (M(gpuhost.gpu.gpu_host_facts)), optionally its NCCL benchmark (M(gpuhost.gpu.nccl_bench))
    and P2P proof (M(gpuhost.gpu.gpu_p2p_probe)), and the model to deploy from the inventory, and returns C(pass) or
    C(block) with every reason, each naming the finding or the fact behind it.
  - Derives the SGLang launch settings the facts call for, the tensor-parallel size and which GPUs
    (C(CUDA_VISIBLE_DEVICES)), the backend flags the known-good table gives for the GPUs' architecture,
    the model and the SGLang version, C(--disable-custom-all-reduce) unless P2P was proven between every pair
    of the chosen GPUs (C(--enable-p2p-check) instead for two GPUs, or an NVLink mesh of any size, whose P2P the
    driver claims, so that SGLang tests CUDA IPC itself), the NCCL environment that won the benchmark's tuning
    (C(NCCL_P2P_DISABLE=1) when P2P is missing), and the communication ceiling in tokens per second the
    benchmark's latency allows.
  - Reports the all-reduce SGLang will really run (RV(launch.all_reduce)) as SGLang decides it; custom all-reduce
    at tensor-parallel sizes 2, 4, 6 and 8 only, above 2 GPUs only with NVLink between every pair (so PCIe GPUs at
    TP 4 or 8 run NCCL whatever P2P can do), up to 8 MiB; from SGLang 0.5.12 its v2 on NVLink up to 16 MiB (per
    release, gate/all_reduce.py RULES); the summary and the communication ceiling follow that path.
  - With O(sglang_help), the arguments are checked against the installed SGLang; a renamed option
    (C(--nsa-decode-backend) -> C(--dsa-decode-backend) from SGLang 0.5.13, and back on 0.5.12 and older) is
    translated, C(--dp-size N --enable-dp-attention) becomes C(--attn-dp-size N) where the switch is deprecated,
    an option or value it refuses blocks.
  - A critical finding blocks unless its id is listed in O(accept); accepted findings are returned under
    RV(accepted) as an audit trail.
  - "Tensor-parallel size C(auto): the smallest power of two (at least the model's C(min_gpus), dividing its
    attention heads when given) whose GPUs hold the weights, the KV cache and the headroom; among the groups of
    that size, the one with the fewest pairs without P2P, then the most pairs with proven P2P, then the fewest
    NUMA nodes, then the shortest topology distance (NV# < PIX < PXB < PHB < NODE < SYS)."
  - Pure. It reads nothing on the host, changes nothing, runs in check mode and on captured facts alike, and
    answers odd or missing facts with a verdict that says what could not be read, never with a traceback.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  audit:
    description:
      - The host's audit, C(ansible_facts.gpu_host) as M(gpuhost.gpu.gpu_host_facts) returns it (also from a capture).
    type: dict
    required: true
  bench:
    description:
      - The registered result of M(gpuhost.gpu.nccl_bench) on this host. Its C(findings) count like the audit's; its
        C(recommended_env) (or C(tuning.recommended_env)) becomes the serving environment; its all-reduce
        times (C(results), or the recommended candidate's under C(tuning.candidates)) give the communication
        ceiling at the chosen tensor-parallel size.
    type: dict
  probe:
    description:
      - The registered result of M(gpuhost.gpu.gpu_p2p_probe). A pair counts as proven when its C(proof) shows peer
        access and no wrong element (indexes mapped through C(visible), the probe's C(CUDA_VISIBLE_DEVICES), when
        present), or when a C(pairs) entry C({src, dst, verified}) or C({gpus, verified}) says so. Its
        C(findings) count like the audit's. Logs of p2pBandwidthLatencyTest or nvbandwidth prove nothing.
    type: dict
  model:
    description:
      - "The model to deploy, as the inventory gives it (C(deploy_model)). Every key is optional:
        C(name), C(family) (matched against the known-good table), C(path);
        C(weights_gib) (size of the weights), or C(params_b) with C(bytes_per_param) (default 2) to estimate it;
        C(kv_cache_gib_per_gpu), or C(kv_cache_fraction) of each GPU's memory (default 0.10);
        C(memory_headroom_fraction) (default 0.10);
        C(min_gpus) (default 1); C(tensor_parallel_size), a whole number or C(auto) (default);
        C(attention_heads) (or C(num_attention_heads));
        C(min_compute_capability) (C('8.0'), C('sm_90')); C(min_driver) (C('570')); C(min_cuda) (C('12.8')), the
        CUDA version the driver supports;
        for the communication ceiling, C(layers), C(hidden_size), C(allreduces_per_layer) (default 2),
        C(dtype_bytes) (default 2), or C(shape), a known model's name (C(glm-5), C(llama-3-70b)) or a mapping
        of the model's shape (C(name), C(layers), C(allreduces_per_layer), C(hidden_size), C(dtype_bytes),
        C(extra_allreduces), C(tensor_parallel_size), C(notes)); a C(family) that names a known model is used as
        well. C(comm_profile), the key's former name, is still read as C(shape), with a note in RV(notes) that
        asks for C(shape); both given and different block with C(model_invalid)."
      - Quote versions in YAML, C('12.10') read unquoted is the number 12.1.
      - "C(notes) is free text. Any other key blocks with C(model_invalid), naming the closest valid key
        (C(model.weight_gib: unknown key; did you mean weights_gib?)): read as absent, a misspelled key would leave
        its default in place and the gate would judge a model other than the one meant."
      - Taken as any type so that a value that is not a mapping blocks with a message naming the variable it came
        from (O(labels)), instead of failing on Ansible's type conversion.
    type: raw
    required: true
  accept:
    description:
      - Ids of critical findings accepted as a risk (for example C(p2p_not_supported) on a VM whose hypervisor
        cannot be changed yet). They are listed under RV(accepted) instead of blocking. Accepting
        C(p2p_not_supported) also accepts the measured cost of missing P2P (C(nccl_small_message_latency),
        C(p2p_small_copy_latency)) while P2P is indeed missing between the chosen GPUs.
      - Of the gate's own reasons only C(p2p_not_supported), C(driver_version_unknown), C(cuda_version_unknown)
        and C(compute_capability_unknown) can be accepted; a too old driver or too little memory cannot.
      - An id the findings catalog has retired and renamed is read as the id that renamed it, and RV(notes) asks
        for the new id; a retired id without a successor accepts nothing, and RV(notes) says so.
    type: list
    elements: str
    default: []
  sglang_version:
    description:
      - The SGLang version that will serve (C(0.5.9), C(0.5.10rc1)), checked against the versions each known-good
        entry is known good for. Without it, matching entries are applied with a note.
    type: str
  sglang_help:
    description:
      - The standard output of C(python -m sglang.launch_server --help) of the SGLang that will serve (the sglang
        role keeps it as C(sglang_result.launch_help_output)). Each argument is checked against it, as argparse
        would take it; an option renamed in this SGLang is translated with a note; an unknown option, or a value
        outside the choices the help shows, is left out and blocks with C(sglang_flag_unsupported).
      - Without it the arguments pass unchanged, with a note that they were not checked.
    type: str
  known_good_overrides:
    description:
      - Entries added to the known-good table, checked before the shipped ones, each C({id, arch, models,
        sglang_versions, flags, env, purpose, source, note}) (see C(plugins/module_utils/gate/known_good.py)). An entry
        with the id of a shipped one replaces it; C(disabled) C(true) removes it.
      - An entry with a key not in that list, or anything but a list of mappings, blocks with
        C(known_good_override_invalid), named as O(labels) says.
    type: raw
    default: []
  labels:
    description:
      - "What the messages call O(model), O(accept) and O(known_good_overrides), by option name; the variable the
        user wrote, for example C({model: deploy_model}). An option not listed is called by its own name."
      - The C(deployment_gate) role names the inventory variables C(deploy_model), C(deploy_accept_findings) and
        C(deploy_known_good_overrides) when the values came from them.
    type: dict
    default: {}
  model_dir:
    description:
      - The model's directory on the host the gate runs on; the gate reads its C(config.json) and counts the
        all-reduces one decode step runs (C(plugins/module_utils/model/config_json.py)). Omitted, C(path) of O(model)
        when it has one; with neither, no C(config.json) is read.
      - When the counts are modelled, they (C(layers), C(hidden_size), C(allreduces_per_layer), C(dtype_bytes),
        C(extra_allreduces)) price the communication ceiling instead of the known model's, a note names each field
        where the two disagree, and the ceiling's C(source) ends in C(collectives per step from the model's
        config.json).
      - A C(config.json) that is missing, unreadable, not JSON or of an architecture the counts do not cover leaves
        the known model's counts, with a note saying why; without one the ceiling is not modelled, never guessed.
        It never fails the task.
    type: path
  pcie_ipc_all_reduce:
    description:
      - Launch with SGLang's opt-in FlashInfer PCIe IPC all-reduce (C(SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1), SGLang
        0.5.21 and later, 2, 4 or 8 GPUs) where the gate recommends it, RV(launch.pcie_ipc).
      - It is recommended only for PCIe GPUs whose P2P O(probe) proved between every pair, since it maps peer memory
        with no P2P check of its own; anywhere else it is never set, whatever this option says, and a benchmark
        environment that sets it loses it, with a note.
    type: bool
    default: false
  fail_on_block:
    description: Fail the task when the verdict is C(block), with the reasons in the message.
    type: bool
    default: false
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; reads and changes nothing.
  - "site.yml (role C(deployment_gate)) feeds it from these inventory variables: C(deploy_model), the model
    to deploy; C(deploy_accept_findings), the accepted finding ids; C(deploy_known_good_overrides); the SGLang
    version is the stack profile's; the --help is the sglang role's, or the file C(deployment_gate_sglang_help_file)
    names."
"""

EXAMPLES = r"""
# group_vars for a Proxmox guest with 8x RTX PRO 6000 and no P2P (accepted until the hypervisor is fixed):
#   deploy_model:
#     name: GLM-5-NVFP4
#     family: glm-5
#     path: /models/GLM-5-NVFP4
#     weights_gib: 403
#     tensor_parallel_size: auto
#     attention_heads: 64
#     min_compute_capability: "8.0"
#     min_driver: "570"
#     min_cuda: "12.8"
#   deploy_accept_findings: [p2p_not_supported]

- name: Audit the host
  gpuhost.gpu.gpu_host_facts:

- name: Benchmark all-reduce and tune NCCL
  gpuhost.gpu.nccl_bench:
    python: /opt/sglang/.venv/bin/python
    tune: true
  register: bench

- name: Prove P2P between the GPUs
  gpuhost.gpu.gpu_p2p_probe:
    python: /opt/sglang/.venv/bin/python
  register: probe

- name: Decide whether and how to deploy
  gpuhost.gpu.deploy_gate:
    audit: "{{ ansible_facts['gpu_host'] }}"
    bench: "{{ bench }}"
    probe: "{{ probe }}"
    model: "{{ deploy_model }}"
    accept: "{{ deploy_accept_findings | default([]) }}"
    sglang_version: "0.5.10.post1"
    sglang_help: "{{ sglang_result.launch_help_output | default(omit) }}"
    known_good_overrides: "{{ deploy_known_good_overrides | default([]) }}"
  register: gate

- name: Stop here when the gate blocks
  ansible.builtin.assert:
    that: gate.verdict == 'pass'
    fail_msg: "{{ gate.reasons | map(attribute='summary') | list }}"

- name: Record a backend setting verified on this version, for this site only
  gpuhost.gpu.deploy_gate:
    audit: "{{ ansible_facts['gpu_host'] }}"
    model: "{{ deploy_model }}"
    sglang_version: "0.5.12"
    known_good_overrides:
      - id: site-sm120-glm5-0512
        arch: sm_120
        models: ["glm-5*"]
        sglang_versions: "==0.5.12"
        flags: ["--nsa-decode-backend", "tilelang", "--kv-cache-dtype", "bfloat16"]
        purpose: correctness
        source: smoke test on gpu-node-3, 2026-06-01
    fail_on_block: true
"""

RETURN = r"""
verdict:
  description: C(pass) or C(block).
  returned: always
  type: str
  sample: block
reasons:
  description: >-
    Every reason the deployment is blocked, each C(id), C(source) (audit, bench, probe or gate), C(severity),
    C(summary), C(evidence) and C(remedy). Empty on pass.
  returned: always
  type: list
  elements: dict
  sample:
    - id: p2p_not_supported
      source: gate
      severity: critical
      summary: "No working GPU peer-to-peer between 28 of the 28 pairs of the chosen GPUs [0, 1, 2, 3, 4, 5, 6, 7]"
accepted:
  description: Critical findings accepted through O(accept), each as in RV(reasons) plus C(accepted_because).
  returned: always
  type: list
  elements: dict
resolved:
  description: >-
    Findings the launch settings make moot, each with C(resolved_by): the tuning's environment applied, or P2P and
    NCCL findings at tensor-parallel size 1.
  returned: always
  type: list
  elements: dict
other_findings:
  description: >-
    Findings below critical (C(id), C(source), C(severity), C(summary)); they do not block. (Not named
    C(warnings): Ansible prints that key of a result as its own warnings.)
  returned: always
  type: list
  elements: dict
notes:
  description: Why each launch setting is what it is, and what could not be checked.
  returned: always
  type: list
  elements: str
launch:
  description: The settings to deploy with, derived even when blocked as far as the facts allow.
  returned: always
  type: dict
  contains:
    tensor_parallel_size:
      description: GPUs in the tensor-parallel group; null when none could be chosen.
      type: int
      sample: 8
    gpus:
      description: Indexes of the chosen GPUs.
      type: list
      elements: int
      sample: [0, 1, 2, 3, 4, 5, 6, 7]
    cuda_visible_devices:
      description: The same, as the value of C(CUDA_VISIBLE_DEVICES).
      type: str
      sample: "0,1,2,3,4,5,6,7"
    args:
      description: >-
        SGLang arguments the facts call for (C(--tp), known-good backend flags, C(--disable-custom-all-reduce));
        the serving role adds the model path, host, port and API key.
      type: list
      elements: str
      sample: ["--tp", "8", "--nsa-decode-backend", "trtllm", "--disable-custom-all-reduce"]
    env:
      description: Environment for the serving processes (the benchmark's NCCL settings, C(NCCL_P2P_DISABLE)).
      type: dict
      sample: {NCCL_P2P_DISABLE: "1"}
    custom_all_reduce:
      description: >-
        Whether SGLang's custom all-reduce will run (C(path) custom in RV(launch.all_reduce)); null at tensor-parallel
        size 1 or when only SGLang's start-up can tell.
      type: bool
    all_reduce:
      description: >-
        The all-reduce SGLang will run: C(path) (custom, nccl, or null when only its start-up can tell), C(off_by)
        (flag, sglang), C(brief), C(reason), C(p2p_check) (assumed: without C(--enable-p2p-check) SGLang asks
        nobody; cuda_ipc: its CUDA IPC test; driver: only with C(SGLANG_SKIP_P2P_CHECK=1)), C(rule) (the version
        rule applied), C(nvlink_mesh) (null when unknown) and C(nvlink_pairs).
      type: dict
    flag_check:
      description: C(checked) (against O(sglang_help)), C(translated) options and C(refused) ones.
      type: dict
    p2p_cache:
      description: >-
        SGLang's cached P2P verdict tied to the P2P facts: C(file), C(facts) (fingerprint), C(env), C(read_by_sglang),
        C(source); null below 2 GPUs.
      type: dict
    pcie_ipc:
      description: >-
        SGLang's opt-in PCIe IPC all-reduce: C(available) (0.5.21 on), C(recommended) (PCIe GPUs with P2P proven by
        the probe only), C(applied) (set in C(env)), C(why), C(env); null below 2 GPUs.
      type: dict
    communication_ceiling_basis:
      description: >-
        What the NCCL-measured communication ceiling is for the path that runs, C(nccl), C(nccl_lower_bound)
        (custom all-reduce takes the small messages) or C(nccl_path_unknown); null without a ceiling.
      type: str
    p2p:
      description: C(state) (proven, claimed, unknown, absent, partial, n/a) and the count of pairs per level.
      type: dict
    memory:
      description: Per GPU of the group, GiB needed (weights, KV cache, headroom) and available.
      type: dict
    communication_ceiling_tok_s:
      description: >-
        The communication ceiling: the single-stream decode rate all-reduce latency alone allows; null without a
        benchmark's all-reduce or a probe's GPU-to-GPU copy latency.
      type: float
      sample: 32.7
    communication_ceiling:
      description: >-
        The communication ceiling's full result (model/ceiling.py): C(basis) C(measured_all_reduce) (an
        all-reduce measured over the serving rank count) or C(estimated_from_pair_latency) (the probe's copy
        latency times the hops of the algorithm NCCL picks, with C(estimate)), C(source), C(assumptions),
        C(comm_us_per_token), C(max_tokens_per_s_single_stream) and the rest.
      type: dict
    known_good_source:
      description: The known-good entries applied (C(id), C(arch), C(models), C(sglang_versions), C(flags), C(source)).
      type: list
      elements: dict
model:
  description: The model's name as the gate refers to it.
  returned: always
  type: str
sglang_version:
  description: O(sglang_version) as read.
  returned: always
  type: str
summary:
  description: One line with the verdict and the main settings.
  returned: always
  type: str
  sample: "pass: GLM-5-NVFP4 with --tp 8 on GPUs 0,1,2,3,4,5,6,7; custom all-reduce off; NCCL_P2P_DISABLE=1"
"""


from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.decide import decide
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.model_dir import read_model_config

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "audit": {"type": "dict", "required": True},
        "bench": {"type": "dict"},
        "probe": {"type": "dict"},
        # raw: the gate itself says what a non-mapping is, under the name the user wrote (labels).
        "model": {"type": "raw", "required": True},
        "accept": {"type": "list", "elements": "str", "default": []},
        "sglang_version": {"type": "str"},
        "known_good_overrides": {"type": "raw", "default": []},
        "labels": {"type": "dict", "default": {}},
        "sglang_help": {"type": "str"},
        "fail_on_block": {"type": "bool", "default": False},
        "model_dir": {"type": "path"},
        "pcie_ipc_all_reduce": {"type": "bool", "default": False},
    }


def model_dir(params: dict) -> str | None:
    """The directory whose config.json the gate reads: model_dir, else the model's own path."""
    if params["model_dir"]:
        return params["model_dir"]
    path = params["model"].get("path") if isinstance(params["model"], dict) else None
    # Taken as written, as the server is given it (--model-path): a "~" there is no home directory to SGLang either.
    return path.strip() if isinstance(path, str) and path.strip() else None


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    directory = model_dir(params)
    # Read-only, so check mode reads it too; a file that cannot be read is a note of the gate, never a failure.
    config, config_problem = read_model_config(directory) if directory else (None, None)
    result = decide(params["audit"], params["model"], bench=params["bench"], probe=params["probe"],
                    accept=params["accept"], sglang_version=params["sglang_version"],
                    known_good_overrides=params["known_good_overrides"], sglang_help=params["sglang_help"],
                    labels=params["labels"], model_config=config, model_config_problem=config_problem,
                    pcie_ipc_all_reduce=params["pcie_ipc_all_reduce"])
    if params["fail_on_block"] and result["verdict"] == "block":
        module.fail_json(msg=result["summary"] + ": " + " | ".join(r["summary"] for r in result["reasons"]),
                         changed=False, **result)
    module.exit_json(changed=False, msg=result["summary"], **result)


if __name__ == "__main__":
    main()
