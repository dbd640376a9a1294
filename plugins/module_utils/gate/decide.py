"""The deployment gate: audit, benchmark and probe facts plus the model to deploy in; pass or block out,
with every reason and the SGLang launch settings the facts call for.

Pure functions over plain data: the ``gpu_host`` facts of gpu_host_facts, the result of nccl_bench,
the result of gpu_p2p_probe and the model to deploy from the inventory (deploy_model). Only the audit is
needed; the benchmark and the probe make the decision better informed. Whatever shape the inputs have, the gate
answers with a verdict: a missing or unreadable fact becomes a reason or a note, never an exception.

Policy, in one place:

- Every critical finding blocks unless its id is listed in ``accept``; accepted ones are reported
  back under ``accepted`` as an audit trail. The audit's ``p2p_not_supported`` is judged again for
  the GPUs the gate chooses (the audit judged every GPU), under the same id. A retired id the list
  still names is read as the id that renamed it, or accepts nothing, with a note either way (accept_list.py).
- P2P has three levels: *proven* (gpu_p2p_probe copied data between the pair and checked it at the
  destination), *claimed* (NVML / ``nvidia-smi topo -p2p r`` says OK) and *absent* (any other status,
  or a probe that saw the data not arrive). SGLang's custom all-reduce maps peer memory directly and
  checks nothing by default, so on a GPU whose P2P grant is a private mirror it returns wrong sums
  without an error (NVIDIA/nccl#2335): the gate allows it only when P2P is proven between every pair of
  the chosen GPUs; otherwise ``--disable-custom-all-reduce``, except for two GPUs with P2P claimed, where
  ``--enable-p2p-check`` makes SGLang test CUDA IPC itself. NCCL is left to its own P2P detection when
  P2P is claimed, and told ``NCCL_P2P_DISABLE=1`` when it is absent (which then needs
  ``p2p_not_supported`` accepted to pass).
- What the gate allows is not what runs: SGLang switches its custom all-reduce off by itself above two
  GPUs without an NVLink mesh, and at sizes other than 2, 4, 6, 8 (all_reduce.py). The launch reports
  the path that will run (``launch.all_reduce``), and the summary and the communication ceiling follow it.
- The arguments are checked against the installed SGLang's ``--help`` when given (flag_check.py): known
  renames are translated, an option or value it refuses blocks with ``sglang_flag_unsupported``.
- Accepting ``p2p_not_supported`` also accepts what missing P2P measurably costs (the benchmark's
  small-message latency, the probe's slow small copies): those findings are its consequences, and
  each is still listed under ``accepted`` with the finding that covers it.
- A benchmark finding whose remedy the launch applies (``nccl_tuning_recommendation``: deploy with
  the environment that won) is resolved by the launch and listed under ``resolved``.
- At tensor-parallel size 1 nothing is all-reduced: P2P and NCCL findings do not apply.
- Tensor-parallel size "auto": the smallest power of two (at least ``min_gpus``, dividing the attention
  heads when given) whose GPUs hold the weights plus KV cache plus headroom; among the groups of that
  size, the one with the fewest pairs without P2P, then the most proven pairs, then the fewest NUMA
  nodes, then the shortest topology distance (NV# < PIX < PXB < PHB < NODE < SYS).
- Backend flags come from the known-good table (known_good.py) for the chosen GPUs' architecture,
  the model and the SGLang version; an entry known good only for other versions is not applied.

decide() runs the steps in this order, each writing its reasons and notes into one ``Decision``
(decision.py): the driver and CUDA versions the model needs (here), the GPU group (choose_gpus.py),
P2P between its GPUs (judge_p2p.py), the launch's environment and known-good entries (launch.py),
the findings of the audit, the benchmark and the probe (triage.py), the launch's arguments, checked
against SGLang's --help, and the all-reduce SGLang will run with them (launch.py), and the communication
ceiling (ceiling.py).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_proof import read_probe
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import text
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import versions
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.accept_list import read_accept
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.ceiling import ceiling_basis, communication_ceiling
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.choose_gpus import choose_group
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.decision import Decision
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import (
    DeployModel,
    Host,
    as_dict,
    as_text,
    read_deploy_model,
    read_host,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.judge_p2p import judge_p2p
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.known_good import merged_table
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.launch import (
    all_reduce_path,
    checked_args,
    flag_sources,
    known_good_entries,
    known_good_source,
    launch_args,
    launch_env,
    pcie_ipc_plan,
    wants_p2p_check,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.model_shape import apply_collectives, config_counts
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.p2p_cache import p2p_cache
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.triage import triage_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import format_rate


def decide(audit: Any, model: Any, bench: Any = None, probe: Any = None, accept: Any = None,
           sglang_version: Any = None, known_good_overrides: Any = None, sglang_help: Any = None,
           labels: Any = None, model_config: Any = None, model_config_problem: Any = None,
           pcie_ipc_all_reduce: Any = False) -> dict[str, Any]:
    """The gate's verdict and launch settings. Never raises on odd input: it blocks and says why.

    ``labels`` maps an input (``model``, ``accept``, ``known_good_overrides``) to the name its messages give
    it, the variable the user wrote (``deploy_model``); by default the input's own name. ``model_config``
    is the model directory's config.json as read on the host (``model_config_problem``: why it could not be read):
    its collectives per step price the communication ceiling (model_shape.py).
    ``pcie_ipc_all_reduce`` launches with SGLang's PCIe IPC all-reduce where the gate recommends it (launch.py).
    """
    out = Decision()
    names = {key: as_text(value) for key, value in as_dict(labels).items() if as_text(value)}
    names = {key: names.get(key, key) for key in ("model", "accept", "known_good_overrides")}
    written_as = read_accept(accept, names["accept"], out.notes)
    accepted_ids = frozenset(written_as)
    version = as_text(sglang_version) if not isinstance(sglang_version, (int, float)) else str(sglang_version)
    if version is not None and versions.parse(version) is None:
        out.notes.append(f"sglang_version {version!r} is not a version number: the known-good table's version "
                         "ranges cannot be checked, so no entry is applied")

    table, table_problems = merged_table(known_good_overrides, names["known_good_overrides"])
    for problem in table_problems:
        out.block("known_good_override_invalid", problem)
    deploy, model_problems = read_deploy_model(model, names["model"], out.notes)
    for problem in model_problems:
        out.block("model_invalid", problem)
    apply_collectives(deploy, config_counts(model_config, model_config_problem), out.notes)

    if not isinstance(audit, dict) or not audit:
        out.block("audit_missing", "No audit facts were given, so nothing about this host is known.",
                  {"audit": type(audit).__name__})
    host = read_host(audit)
    proof = read_probe(probe)
    bench_data = as_dict(bench)

    if host.gpus:
        _check_versions(out, host, deploy, accepted_ids)
    group, fit = choose_group(out, host, deploy, proof, accepted_ids) if isinstance(audit, dict) and audit \
        else (None, None)
    p2p = judge_p2p(out, host, proof, group, accepted_ids)
    env, custom_allowed = launch_env(out, bench_data, p2p, group)
    entries = known_good_entries(out, table, group, deploy, version)
    for entry in entries:
        for key, value in as_dict(entry.get("env")).items():
            env.setdefault(str(key), str(value))
    triage_findings(out, host, bench_data, probe, group, p2p, env, accepted_ids)

    unmatched = sorted(written_as[i] for i in accepted_ids - {a["id"] for a in out.accepted})
    if unmatched:
        out.notes.append(f"accept lists {', '.join(unmatched)}, which matched no critical finding here (a typo, "
                         "or a finding that is gone): nothing else was accepted")

    args = launch_args(group, entries, custom_allowed, wants_p2p_check(group, p2p, env, host))
    args, flag_check = checked_args(out, args, sglang_help, flag_sources(entries), version)
    pcie_ipc = pcie_ipc_plan(out, host, group, p2p, env, version, pcie_ipc_all_reduce is True)
    all_reduce = all_reduce_path(out, host, group, p2p, args, version, env)
    path = (all_reduce or {}).get("path")
    rate, ceiling = communication_ceiling(out, bench_data, deploy, group, probe)
    verdict = "block" if out.reasons else "pass"
    launch = {
        "tensor_parallel_size": len(group) if group else None,
        "gpus": [g.index for g in group] if group else [],
        "cuda_visible_devices": ",".join(str(g.index) for g in group) if group else None,
        "args": args,
        "env": dict(sorted(env.items())),
        "custom_all_reduce": {"custom": True, "nccl": False, "pcie_ipc": False}.get(path)
        if group and len(group) > 1 else None,
        "all_reduce": all_reduce,
        "p2p": p2p,
        "memory": fit.as_dict() if fit else None,
        "communication_ceiling_tok_s": rate,
        "communication_ceiling": ceiling,
        "communication_ceiling_basis": ceiling_basis(out, rate, all_reduce),
        "known_good_source": [known_good_source(e) for e in entries],
        "flag_check": flag_check,
        "p2p_cache": p2p_cache(host, group, p2p, args, out.notes),
        "pcie_ipc": pcie_ipc,
    }
    return {
        "verdict": verdict,
        "reasons": out.reasons,
        "accepted": out.accepted,
        "resolved": out.resolved,
        "other_findings": out.other_findings,
        "notes": out.notes,
        "launch": launch,
        "model": deploy.label,
        "sglang_version": version,
        "summary": _summary(verdict, out, launch, deploy),
    }


def _check_versions(out: Decision, host: Host, deploy: DeployModel, accepted: frozenset[str]) -> None:
    for key, found, what in (
        ("driver", host.driver, "NVIDIA driver"),
        ("cuda", host.cuda, "CUDA version the driver supports"),
    ):
        minimum = getattr(deploy, f"min_{key}")
        if minimum is None:
            continue
        if found is None:
            out.block(f"{key}_version_unknown",
                      f"The model needs {what} {minimum} or newer, and the audit does not say which this host has.",
                      {"required": minimum, "found": None}, accept=accepted)
        elif versions.at_least(found, minimum) is False:
            out.block(f"{key}_too_old", f"The model needs {what} {minimum} or newer; this host has {found}.",
                      {"required": minimum, "found": found})
        elif versions.at_least(found, minimum) is None:
            out.block(f"{key}_version_unknown", f"The {what} reads {found!r}, which is not a version number, so "
                      f"it cannot be compared with the required {minimum}.", {"required": minimum, "found": found},
                      accept=accepted, remedy=text(f"{key}_version_unknown", "not_a_version"))


def _ceiling_text(launch: dict[str, Any]) -> str:
    """The communication ceiling with the all-reduce time per token and what priced it, so that nobody reads it
    as negligible by mistake."""
    ceiling = launch.get("communication_ceiling") or {}
    per_token = ceiling.get("comm_us_per_token")
    # Priced on NCCL: where SGLang's custom all-reduce takes the small messages the figure is only a lower bound
    # (communication_ceiling_basis says so), and a summary line would overstate it.
    if not isinstance(per_token, (int, float)) or per_token <= 0 or (launch.get("all_reduce") or {}).get("path") \
            in ("custom", "pcie_ipc"):
        return ""
    return (f"; communication ceiling {format_rate(1e6 / per_token)} tok/s single stream, {per_token / 1000:.1f} ms "
            f"of all-reduce per token ({ceiling.get('source') or 'source unknown'})")


def _summary(verdict: str, out: Decision, launch: dict[str, Any], deploy: DeployModel) -> str:
    if verdict == "block":
        ids = ", ".join(dict.fromkeys(r["id"] for r in out.reasons))
        return (f"block: {deploy.label} must not be deployed here ({len(out.reasons)} reason(s): {ids})"
                + _ceiling_text(launch))
    parts = [f"pass: {deploy.label} with --tp {launch['tensor_parallel_size']} on GPUs "
             f"{launch['cuda_visible_devices']}"]
    all_reduce = launch["all_reduce"] or {}
    if all_reduce.get("path") == "custom":
        parts.append(f"custom all-reduce on ({all_reduce['brief']})")
    elif all_reduce.get("path") == "pcie_ipc":
        parts.append(f"custom all-reduce off; {all_reduce['brief']}")
    elif all_reduce.get("off_by") == "sglang":
        parts.append(f"custom all-reduce off (SGLang turns it off: {all_reduce['brief']}); NCCL does every "
                     "all-reduce")
    elif all_reduce.get("path") == "nccl":
        parts.append("custom all-reduce off")
    elif launch["tensor_parallel_size"] and launch["tensor_parallel_size"] > 1:
        parts.append(all_reduce.get("brief") or "all-reduce path unknown")
    if launch["env"].get("NCCL_P2P_DISABLE") == "1":
        parts.append("NCCL_P2P_DISABLE=1")
    if out.accepted:
        parts.append(f"{len(out.accepted)} finding(s) accepted as risk")
    return "; ".join(parts) + _ceiling_text(launch)
