"""The deployment gate: audit, benchmark and probe facts plus a model profile in; pass or block out,
with every reason and the SGLang launch settings the facts call for.

Pure functions over plain data: the ``gpu_host`` facts of gpu_host_facts, the result of nccl_bench,
the result of gpu_p2p_probe and a model profile from the inventory. Only the audit is needed; the
benchmark and the probe make the decision better informed. Whatever shape the inputs have, the gate
answers with a verdict: a missing or unreadable fact becomes a reason or a note, never an exception.

Policy, in one place:

- Every critical finding blocks unless its id is listed in ``accept``; accepted ones are reported
  back under ``accepted`` as an audit trail. The audit's ``p2p_not_supported`` is judged again for
  the GPUs the gate chooses (the audit judged every GPU), under the same id.
- P2P has three levels: *proven* (gpu_p2p_probe copied data between the pair and checked it at the
  destination), *claimed* (NVML / ``nvidia-smi topo -p2p r`` says OK) and *absent* (any other status,
  or a probe that saw the data not arrive). SGLang's custom all-reduce maps peer memory directly and
  checks nothing, so on a GPU whose P2P grant is a private mirror it returns wrong sums without an
  error (NVIDIA/nccl#2335): it stays on only when P2P is proven between every pair of the chosen GPUs;
  otherwise ``--disable-custom-all-reduce``. NCCL is left to its own P2P detection when P2P is
  claimed, and told ``NCCL_P2P_DISABLE=1`` when it is absent (which then needs ``p2p_not_supported``
  accepted to pass).
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
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ansible.module_utils.gpuhost.bench.comm_model import CommModelError, comm_floor, load_profile
from ansible.module_utils.gpuhost.gate import versions
from ansible.module_utils.gpuhost.gate.inputs import (
    Gpu,
    Host,
    Profile,
    as_dict,
    as_int,
    as_list,
    as_number,
    as_text,
    cell,
    probe_host_index,
    read_host,
    read_probe,
    read_profile,
)
from ansible.module_utils.gpuhost.gate.known_good import merged_table
from ansible.module_utils.gpuhost.gate.placement import (
    P2P_STATES,
    Fit,
    candidate_groups,
    group_key,
    memory_fit,
    pair_state,
)

# Findings that measure what missing P2P costs; accepting p2p_not_supported accepts them.
P2P_CONSEQUENCES = frozenset({"nccl_small_message_latency", "p2p_small_copy_latency"})
# Findings about collectives between GPUs, moot when one GPU serves alone.
MULTI_GPU_PREFIXES = ("nccl_", "p2p_")
# Gate reasons a user may accept as a risk: the gate could not check something, or P2P is missing.
ACCEPTABLE_GATE_REASONS = frozenset({
    "p2p_not_supported", "driver_version_unknown", "cuda_version_unknown", "compute_capability_unknown",
})


@dataclass
class Decision:
    reasons: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    resolved: list[dict[str, Any]] = field(default_factory=list)
    other_findings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def block(self, reason_id: str, summary: str, evidence: dict[str, Any] | None = None, remedy: str = "",
              accept: frozenset[str] = frozenset(), source: str = "gate") -> None:
        """A blocking reason, unless it may be accepted and is."""
        reason = {"id": reason_id, "source": source, "severity": "critical", "summary": summary,
                  "evidence": evidence or {}, "remedy": remedy}
        if reason_id in accept and (source != "gate" or reason_id in ACCEPTABLE_GATE_REASONS):
            self.accepted.append({**reason, "accepted_because": "listed in accept"})
        else:
            self.reasons.append(reason)


def decide(audit: Any, model: Any, bench: Any = None, probe: Any = None, accept: Any = None,
           sglang_version: Any = None, known_good_overrides: Any = None) -> dict[str, Any]:
    """The gate's verdict and launch settings. Never raises on odd input: it blocks and says why."""
    out = Decision()
    accepted_ids = frozenset(a.strip() for a in as_list(accept) if isinstance(a, str) and a.strip())
    if accept is not None and not isinstance(accept, list):
        out.notes.append(f"accept: expected a list of finding ids; found {type(accept).__name__}, so nothing "
                         "is accepted")
    version = as_text(sglang_version) if not isinstance(sglang_version, (int, float)) else str(sglang_version)
    if version is not None and versions.parse(version) is None:
        out.notes.append(f"sglang_version {version!r} is not a version number: the known-good table's version "
                         "ranges cannot be checked, so no entry is applied")

    table, table_problems = merged_table(known_good_overrides)
    for problem in table_problems:
        out.block("known_good_override_invalid", problem, remedy="Correct the entry in known_good_overrides "
                  "(fields: id, arch, models, sglang_versions, flags, env, purpose, source, note).")
    profile, profile_problems = read_profile(model)
    for problem in profile_problems:
        out.block("model_profile_invalid", problem, remedy="Correct the model profile in the inventory.")

    if not isinstance(audit, dict) or not audit:
        out.block("audit_missing", "No audit facts were given, so nothing about this host is known.",
                  {"audit": type(audit).__name__}, "Run gpu_host_facts on the host first and pass "
                  "ansible_facts.gpu_host as audit.")
    host = read_host(audit)
    proof = read_probe(probe)
    bench_data = as_dict(bench)

    if host.gpus:
        _check_versions(out, host, profile, accepted_ids)
    group, fit = _choose_group(out, host, profile, proof, accepted_ids) if isinstance(audit, dict) and audit \
        else (None, None)
    p2p = _judge_p2p(out, host, proof, group, accepted_ids)
    env, custom_all_reduce = _environment(out, bench_data, p2p, group)
    entries = _known_good(out, table, group, profile, version)
    for entry in entries:
        for key, value in as_dict(entry.get("env")).items():
            env.setdefault(str(key), str(value))
    _triage_findings(out, host, bench_data, probe, group, p2p, env, accepted_ids)

    unmatched = sorted(accepted_ids - {a["id"] for a in out.accepted})
    if unmatched:
        out.notes.append(f"accept lists {', '.join(unmatched)}, which matched no critical finding here (a typo, "
                         "or a finding that is gone): nothing else was accepted")

    args = _args(group, entries, custom_all_reduce)
    ceiling, floor = _comm_ceiling(out, bench_data, profile, group)
    verdict = "block" if out.reasons else "pass"
    launch = {
        "tensor_parallel_size": len(group) if group else None,
        "gpus": [g.index for g in group] if group else [],
        "cuda_visible_devices": ",".join(str(g.index) for g in group) if group else None,
        "args": args,
        "env": dict(sorted(env.items())),
        "custom_all_reduce": custom_all_reduce,
        "p2p": p2p,
        "memory": fit.as_dict() if fit else None,
        "expected_comm_ceiling_tok_s": ceiling,
        "comm_floor": floor,
        "known_good_source": [_source_of(e) for e in entries],
    }
    return {
        "verdict": verdict,
        "reasons": out.reasons,
        "accepted": out.accepted,
        "resolved": out.resolved,
        "other_findings": out.other_findings,
        "notes": out.notes,
        "launch": launch,
        "model": profile.label,
        "sglang_version": version,
        "summary": _summary(verdict, out, launch, profile),
    }


def _check_versions(out: Decision, host: Host, profile: Profile, accepted: frozenset[str]) -> None:
    for key, found, what, todo in (
        ("driver", host.driver, "NVIDIA driver",
         "Install a newer driver branch (the nvidia_driver role: nvidia_driver_branch) and reboot."),
        ("cuda", host.cuda, "CUDA version the driver supports",
         "The driver decides the highest CUDA version it runs: install a newer driver branch."),
    ):
        minimum = getattr(profile, f"min_{key}")
        if minimum is None:
            continue
        if found is None:
            out.block(f"{key}_version_unknown",
                      f"The model needs {what} {minimum} or newer, and the audit does not say which this host has.",
                      {"required": minimum, "found": None},
                      "Audit with NVML available (nvidia-ml-py in the interpreter that runs gpu_host_facts) or "
                      f"check `nvidia-smi`; accept {key}_version_unknown to deploy anyway.", accepted)
        elif versions.at_least(found, minimum) is False:
            out.block(f"{key}_too_old", f"The model needs {what} {minimum} or newer; this host has {found}.",
                      {"required": minimum, "found": found}, todo)
        elif versions.at_least(found, minimum) is None:
            out.block(f"{key}_version_unknown", f"The {what} reads {found!r}, which is not a version number, so "
                      f"it cannot be compared with the required {minimum}.", {"required": minimum, "found": found},
                      "Check `nvidia-smi`.", accepted)


def _eligible(host: Host, profile: Profile, accepted: frozenset[str]) -> tuple[list[Gpu], dict[str, Any]]:
    """GPUs the model can run on, and the ones left out with why."""
    if profile.min_compute_capability is None:
        return list(host.gpus), {}
    minimum = profile.min_compute_capability
    too_old = [g for g in host.gpus if g.cc is not None and g.cc < minimum]
    unknown = [g for g in host.gpus if g.cc is None]
    eligible = [g for g in host.gpus if g.cc is not None and g.cc >= minimum]
    if unknown and "compute_capability_unknown" in accepted:
        eligible = sorted(eligible + unknown, key=lambda g: g.index)
        unknown = []
    excluded = {"minimum": versions.cc_text(minimum),
                "too_old": {f"GPU{g.index}": versions.cc_text(g.cc) for g in too_old},
                "unknown": [f"GPU{g.index}" for g in unknown]}
    return eligible, excluded if too_old or unknown else {}


def _tp_sizes(profile: Profile, count: int) -> list[int]:
    """Tensor-parallel sizes to try, smallest first."""
    if profile.tensor_parallel_size is not None:
        return [profile.tensor_parallel_size]
    sizes = []
    size = 1
    while size <= count:
        if size >= profile.min_gpus and (profile.attention_heads is None or profile.attention_heads % size == 0):
            sizes.append(size)
        size *= 2
    return sizes


def _choose_group(out: Decision, host: Host, profile: Profile, proof: dict[tuple[int, int], bool],
                  accepted: frozenset[str]) -> tuple[tuple[Gpu, ...] | None, Fit | None]:
    if not host.gpus:
        detail = (f"{host.vfio_bound} NVIDIA GPU(s) are bound to vfio-pci (a hypervisor passing them to VMs)"
                  if host.vfio_bound else
                  f"the PCI bus shows {host.pci_gpu_count} NVIDIA GPU(s) but no driver reports any"
                  if host.pci_gpu_count else "neither the PCI bus nor the driver shows an NVIDIA GPU")
        out.block("no_usable_gpu", f"No GPU this host can use: {detail}.",
                  {"pci_nvidia_gpus": host.pci_gpu_count, "vfio_bound": host.vfio_bound,
                   "virtualization": host.virtualization},
                  "Deploy the model on a host (or VM) whose audit lists its GPUs; the audit's findings say "
                  "what is missing here.")
        return None, None
    eligible, excluded = _eligible(host, profile, accepted)
    wanted = profile.tensor_parallel_size or profile.min_gpus
    if len(eligible) < wanted:
        if excluded.get("too_old"):
            out.block("compute_capability_too_low",
                      f"{profile.label} needs compute capability {excluded['minimum']} or higher on {wanted} GPU(s); "
                      f"{len(eligible)} of this host's {len(host.gpus)} GPUs have it.", excluded,
                      "Serve this model on newer GPUs, or choose a build (quantization) that supports these.")
        if excluded.get("unknown"):
            out.block("compute_capability_unknown",
                      f"The compute capability of {', '.join(excluded['unknown'])} is unknown, so the gate cannot "
                      f"tell whether they meet {excluded['minimum']}.", excluded,
                      "Audit with NVML available; accept compute_capability_unknown to use them anyway.")
        if len(host.gpus) < wanted:
            key = "tensor_parallel_unsatisfiable" if profile.tensor_parallel_size else "not_enough_gpus"
            ask = (f"tensor_parallel_size {profile.tensor_parallel_size}" if profile.tensor_parallel_size
                   else f"min_gpus {profile.min_gpus}")
            out.block(key, f"{profile.label} asks for {ask}; this host has {len(eligible)} usable GPU(s).",
                      {"requested": wanted, "usable_gpus": [g.index for g in eligible]},
                      "Serve it on a host with more GPUs, or lower tensor_parallel_size if the memory allows.")
        return None, None
    if profile.tensor_parallel_size is not None:
        size = profile.tensor_parallel_size
        if size < profile.min_gpus:
            out.block("tensor_parallel_unsatisfiable",
                      f"tensor_parallel_size {size} is below the model's min_gpus {profile.min_gpus}.",
                      {"tensor_parallel_size": size, "min_gpus": profile.min_gpus},
                      "Raise tensor_parallel_size or correct min_gpus in the model profile.")
            return None, None
        if profile.attention_heads is not None and profile.attention_heads % size:
            out.block("tensor_parallel_unsatisfiable",
                      f"tensor_parallel_size {size} does not divide the model's {profile.attention_heads} attention "
                      "heads; SGLang refuses to start.",
                      {"tensor_parallel_size": size, "attention_heads": profile.attention_heads},
                      "Choose a size that divides the attention heads, or 'auto'.")
            return None, None
    sizes = _tp_sizes(profile, len(eligible))
    if not sizes:
        out.block("tensor_parallel_unsatisfiable",
                  f"No power-of-two tensor-parallel size between min_gpus {profile.min_gpus} and the "
                  f"{len(eligible)} usable GPUs" + (f" divides the {profile.attention_heads} attention heads"
                                                    if profile.attention_heads else "") + ".",
                  {"min_gpus": profile.min_gpus, "usable_gpus": len(eligible),
                   "attention_heads": profile.attention_heads},
                  "Set tensor_parallel_size explicitly in the model profile.")
        return None, None
    if profile.weights_gib is None:
        sizes = sizes[-1:]
        out.notes.append(f"{profile.label} gives neither weights_gib nor params_b, so memory could not be checked: "
                         f"tensor-parallel size {sizes[0]}, the largest that suits the host, leaves the most room.")
    elif profile.weights_estimated:
        out.notes.append(f"weights estimated from params_b at {profile.bytes_per_param:g} bytes per parameter "
                         f"(bytes_per_param): {profile.weights_gib:.1f} GiB; give weights_gib (the size of the "
                         "checkpoint) for a measured figure.")
    tried: tuple[tuple[Gpu, ...], Fit] | None = None
    for size in sizes:
        groups = candidate_groups(eligible, size, host, proof)
        fitting = [(g, memory_fit(profile, g)) for g in groups]
        fitting = [(g, f) for g, f in fitting if f.fits]
        if fitting:
            group, fit = min(fitting, key=lambda gf: group_key(host, proof, gf[0]))
            if excluded:
                out.notes.append(f"GPUs left out for their compute capability: {excluded}")
            return group, fit
        best = min(groups, key=lambda g: group_key(host, proof, g)) if groups else None
        if best is not None:
            tried = (best, memory_fit(profile, best))
    evidence: dict[str, Any] = {"weights_gib": round(profile.weights_gib or 0, 2), "sizes_tried": sizes,
                                "weights_estimated": profile.weights_estimated}
    if tried:
        evidence.update({"largest_group": [g.index for g in tried[0]], **tried[1].as_dict()})
    need = evidence.get("need_gib_per_gpu")
    have = evidence.get("have_gib_per_gpu")
    out.block("not_enough_gpu_memory",
              f"{profile.label} does not fit: at tensor-parallel size {sizes[-1]} each GPU would need "
              f"{need if need is not None else 'an unknown amount of'} GiB (weights, KV cache, headroom) and has "
              f"{have if have is not None else 'an unknown amount of'} GiB.",
              evidence,
              "Serve it on more or larger GPUs, use a smaller quantization, or lower kv_cache_gib_per_gpu / "
              "kv_cache_fraction if the context you need allows.")
    return None, None


def _judge_p2p(out: Decision, host: Host, proof: dict[tuple[int, int], bool], group: tuple[Gpu, ...] | None,
               accepted: frozenset[str]) -> dict[str, Any]:
    if not group:
        return {"state": "n/a", "pairs": {}}
    if len(group) == 1:
        return {"state": "n/a (one GPU)", "pairs": {}}
    by_state: dict[str, list[str]] = {state: [] for state in P2P_STATES}
    for a, b in combinations(group, 2):
        by_state[pair_state(host, proof, a.index, b.index)].append(f"GPU{a.index}-GPU{b.index}")
    counts = {state: len(pairs) for state, pairs in by_state.items()}
    total = sum(counts.values())
    if counts["proven"] == total:
        state = "proven"
    elif counts["absent"] or counts["failed"]:
        state = "absent" if counts["absent"] + counts["failed"] == total else "partial"
    elif counts["unknown"]:
        state = "unknown"
    else:
        state = "claimed"
    result = {"state": state, "pairs": counts}
    if counts["absent"] or counts["failed"]:
        audit_finding = next((f for f in host.findings if f.get("id") == "p2p_not_supported"), {})
        labels = sorted({cell(host.p2p_read, a.index, b.index) or "?" for a, b in combinations(group, 2)
                         if pair_state(host, proof, a.index, b.index) in ("absent", "failed")})
        out.block("p2p_not_supported",
                  f"No working GPU peer-to-peer between {counts['absent'] + counts['failed']} of the {total} pairs of "
                  f"the chosen GPUs {[g.index for g in group]}: every all-reduce goes through host memory."
                  + (" The P2P probe found no peer access, or saw data not arrive, between "
                     f"{', '.join(by_state['failed'])}."
                     if by_state["failed"] else ""),
                  {"gpus": [g.index for g in group], "statuses": labels,
                   "pairs_absent": by_state["absent"][:16], "pairs_failed_probe": by_state["failed"][:16],
                   "virtualization": host.virtualization},
                  (audit_finding.get("remedy") or "Choose GPUs that show OK in `nvidia-smi topo -p2p r`.")
                  + "\nTo deploy without P2P anyway, add p2p_not_supported to the accepted findings: the gate then "
                  "launches with NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce.",
                  accepted)
    if (counts["absent"] or counts["failed"]) and any(a["id"] == "p2p_not_supported" for a in out.accepted):
        out.notes.append("Missing P2P is accepted as a risk: NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce make "
                         "the lack explicit, and every all-reduce pays the host-memory latency (see "
                         "expected_comm_ceiling_tok_s). Fewer GPUs per group, or P2P fixed at the hypervisor, "
                         "lift that floor.")
    elif state == "claimed":
        out.notes.append("P2P is claimed by the driver between every pair of the chosen GPUs but not proven: custom "
                         "all-reduce stays off. Run gpu_p2p_probe and pass its result as probe to turn it on.")
    elif state == "unknown":
        out.notes.append(f"The P2P status of {counts['unknown']} pair(s) of the chosen GPUs is unknown (no P2P matrix "
                         "in the audit, no probe): custom all-reduce stays off and NCCL decides for itself.")
    return result


def _environment(out: Decision, bench: dict[str, Any], p2p: dict[str, Any],
                 group: tuple[Gpu, ...] | None) -> tuple[dict[str, str], bool | None]:
    """The serving processes' environment, and whether SGLang's custom all-reduce stays on."""
    if not group or len(group) == 1:
        if group and bench:
            out.notes.append("Tensor-parallel size 1: nothing is all-reduced, so no NCCL settings are needed.")
        return {}, None
    env: dict[str, str] = {}
    recommended = bench.get("recommended_env")
    tuning = as_dict(bench.get("tuning"))
    if not isinstance(recommended, dict):
        recommended = tuning.get("recommended_env")
    if not isinstance(recommended, dict):
        recommended = as_dict(tuning.get("recommended")).get("env")
    if isinstance(recommended, dict):
        env.update({str(k): str(v) for k, v in recommended.items() if isinstance(k, str) and v is not None})
        name = as_text(as_dict(tuning.get("recommended")).get("name"))
        out.notes.append("NCCL environment from the benchmark" + (f"'s tuning (candidate {name})" if name else "")
                         + (": " + " ".join(f"{k}={v}" for k, v in sorted(env.items())) if env else
                            ": nothing to add"))
        nranks = as_int(bench.get("nranks"))
        if nranks is not None and nranks != len(group):
            out.notes.append(f"The benchmark ran on {nranks} GPUs and the deployment uses {len(group)}: its "
                             f"environment is taken as is; benchmark with nranks {len(group)} to confirm it.")
    elif bench:
        out.notes.append("The benchmark recommends no environment (it did not finish healthy): NCCL runs with its "
                         "defaults.")
    if p2p.get("state") in ("absent", "partial"):
        if env.get("NCCL_P2P_DISABLE") not in (None, "1"):
            out.notes.append(f"NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']} from the benchmark is replaced by 1: "
                             "P2P is missing between the chosen GPUs.")
        env["NCCL_P2P_DISABLE"] = "1"
    custom = p2p.get("state") == "proven" and env.get("NCCL_P2P_DISABLE") != "1"
    if p2p.get("state") == "proven" and not custom:
        out.notes.append("P2P is proven, but the benchmark's environment disables it for NCCL: custom all-reduce "
                         "stays off to match.")
    return env, custom


def _model_keys(profile: Profile) -> list[str]:
    keys = [profile.family, profile.name]
    if profile.path:
        keys.append(profile.path.rstrip("/").rsplit("/", 1)[-1])
    return [k.lower() for k in keys if k]


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in as_list(value) if isinstance(v, str)]


def _known_good(out: Decision, table: list[dict[str, Any]], group: tuple[Gpu, ...] | None, profile: Profile,
                version: str | None) -> list[dict[str, Any]]:
    """Table entries that apply to this architecture, model and SGLang version."""
    if not group:
        return []
    archs = {g.arch for g in group}
    if None in archs:
        out.notes.append("The architecture of the chosen GPUs is unknown: no known-good backend flags added.")
        return []
    keys = _model_keys(profile)
    arch_text = "/".join(sorted(a for a in archs if a))
    applied = []
    matched_other_versions = []
    for entry in table:
        if not archs <= {versions.sm_name(a) for a in _as_list(entry.get("arch"))}:
            continue
        globs = [g.lower() for g in _as_list(entry.get("models"))]
        if not any(fnmatch.fnmatchcase(key, glob) for key in keys for glob in globs):
            continue
        spec = entry.get("sglang_versions")
        if version is None:
            applied.append(entry)
            if spec is not None:
                out.notes.append(f"SGLang version not given: known-good entry {entry['id']} applied; it is known good "
                                 f"for SGLang {spec}. Pass sglang_version to check.")
        elif versions.matches(version, spec) is True:
            applied.append(entry)
        else:
            matched_other_versions.append(entry)
    for entry in matched_other_versions:
        out.notes.append(f"Known-good entry {entry['id']} ({' '.join(_as_list(entry.get('flags')))}) is known good "
                         f"for SGLang {entry.get('sglang_versions')}, not {version}: not applied. Check the output "
                         "with the smoke test and record what works in known_good_overrides.")
    if not applied and not matched_other_versions:
        family = profile.family or profile.name or "this model"
        out.notes.append(f"No known-good entry for {family} on {arch_text}: no backend flags added; SGLang picks its "
                         "defaults and the smoke test judges them.")
    return applied


def _source_of(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: entry.get(key) for key in ("id", "arch", "models", "sglang_versions", "flags", "purpose", "source",
                                            "note")}


def _options(args: list[str]) -> list[tuple[str, list[str]]]:
    """Command-line arguments grouped as (option, values)."""
    grouped: list[tuple[str, list[str]]] = []
    for item in args:
        if item.startswith("--") or not grouped:
            grouped.append((item, []))
        else:
            grouped[-1][1].append(item)
    return grouped


def _args(group: tuple[Gpu, ...] | None, entries: list[dict[str, Any]], custom_all_reduce: bool | None) -> list[str]:
    if not group:
        return []
    chosen: list[tuple[str, list[str]]] = [("--tp", [str(len(group))])]
    for entry in entries:
        chosen.extend(_options(_as_list(entry.get("flags"))))
    if custom_all_reduce is False:
        chosen.append(("--disable-custom-all-reduce", []))
    args: list[str] = []
    seen: set[str] = {"--tp-size"}
    for option, values in chosen:
        if option in seen:
            continue  # the gate's own settings first, then overrides before shipped entries
        seen.add(option)
        args.extend([option, *values])
    return args


def _curve(bench: dict[str, Any]) -> list[tuple[int, float]]:
    """(size_bytes, best time_us) of the environment the deployment uses."""
    tuning = as_dict(bench.get("tuning"))
    name = as_dict(tuning.get("recommended")).get("name")
    rows = as_list(bench.get("results"))
    for candidate in as_list(tuning.get("candidates")):
        if isinstance(candidate, dict) and name is not None and candidate.get("name") == name \
                and as_list(candidate.get("results")):
            rows = as_list(candidate.get("results"))
    curve = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        size = as_int(row.get("size_bytes"))
        times = [as_number(as_dict(row.get(p)).get("time_us")) for p in ("out_of_place", "in_place")]
        times = [t for t in times if t is not None and t > 0]
        if size and size > 0 and times:
            curve.append((size, min(times)))
    return curve


def _comm_ceiling(out: Decision, bench: dict[str, Any], profile: Profile,
                  group: tuple[Gpu, ...] | None) -> tuple[float | None, dict[str, Any] | None]:
    if not group or len(group) == 1 or not bench:
        return None, None
    given = bench.get("comm_floor")
    for floor in (given if isinstance(given, list) else [given]):
        floor = as_dict(floor)
        rate = as_number(floor.get("max_tokens_per_s_single_stream"))
        if rate and as_int(floor.get("tensor_parallel_size")) == len(group):
            return round(rate, 1), floor
    if not profile.comm:
        out.notes.append("No communication ceiling: the model profile has no layers/hidden_size (or a family with "
                         "a shipped comm profile) to turn the benchmark's latency into tokens per second.")
        return None, None
    curve = _curve(bench)
    if not curve:
        out.notes.append("No communication ceiling: the benchmark has no measured all-reduce times.")
        return None, None
    try:
        floor = comm_floor(load_profile({**profile.comm, "tensor_parallel_size": len(group)}), curve, 1,
                           measured_ranks=as_int(bench.get("nranks")))
    except CommModelError as exc:
        out.notes.append(f"No communication ceiling: {exc}")
        return None, None
    out.notes.extend(floor.get("notes") or [])
    rate = floor.get("max_tokens_per_s_single_stream")
    return (round(rate, 1) if isinstance(rate, float) else None), floor


def _triage_findings(out: Decision, host: Host, bench: dict[str, Any], probe: Any, group: tuple[Gpu, ...] | None,
                     p2p: dict[str, Any], env: dict[str, str], accepted: frozenset[str]) -> None:
    one_gpu = bool(group) and len(group) == 1
    no_p2p_accepted = any(a["id"] == "p2p_not_supported" for a in out.accepted)
    recommended = as_dict(as_dict(bench.get("tuning")).get("recommended")).get("env")
    sources = (("audit", host.findings), ("bench", as_list(bench.get("findings"))),
               ("probe", as_list(as_dict(probe).get("findings"))))
    for source, findings in sources:
        for finding in findings:
            if not isinstance(finding, dict) or not isinstance(finding.get("id"), str):
                continue
            fid = finding["id"]
            brief = {"id": fid, "source": source, "severity": finding.get("severity"),
                     "summary": as_text(finding.get("summary")) or f"{source} finding {fid} (it gives no summary)",
                     "evidence": finding.get("evidence"), "remedy": as_text(finding.get("remedy")) or ""}
            if one_gpu and fid.startswith(MULTI_GPU_PREFIXES):
                out.resolved.append({**brief, "resolved_by": "tensor-parallel size 1: no collectives between GPUs"})
                continue
            if source == "audit" and fid == "p2p_not_supported" and group:
                continue  # judged again for the chosen GPUs (_judge_p2p)
            if source == "probe" and group and _avoids_named_pairs(finding, group, probe_host_index(probe)):
                out.resolved.append({**brief, "resolved_by": "the chosen GPUs include none of the pairs it names"})
                continue
            if finding.get("severity") != "critical":
                out.other_findings.append({k: brief[k] for k in ("id", "source", "severity", "summary")})
                continue
            if fid == "nccl_tuning_recommendation" and isinstance(recommended, dict) and \
                    all(env.get(str(k)) == str(v) for k, v in recommended.items()):
                out.resolved.append({**brief, "resolved_by": "the launch uses the environment the tuning recommends"})
            elif fid in accepted:
                out.accepted.append({**brief, "accepted_because": "listed in accept"})
            elif fid in P2P_CONSEQUENCES and no_p2p_accepted and p2p.get("state") in ("absent", "partial"):
                out.accepted.append({**brief, "accepted_because": "consequence of the accepted p2p_not_supported"})
            else:
                out.reasons.append({**brief, "severity": "critical",
                                    "remedy": (brief["remedy"] + "\n" if brief["remedy"] else "")
                                    + f"To deploy anyway, accept {fid}."})


def _avoids_named_pairs(finding: dict[str, Any], group: tuple[Gpu, ...], host_index: Any) -> bool:
    """Whether a probe finding lists its GPU pairs and none of them lies within the group."""
    pairs = as_list(as_dict(finding.get("evidence")).get("pairs"))
    if not pairs:
        return False
    chosen = {g.index for g in group}
    for pair in pairs:
        src, dst = as_int(as_dict(pair).get("src")), as_int(as_dict(pair).get("dst"))
        if src is None or dst is None:
            return False
        if host_index(src) in chosen and host_index(dst) in chosen:
            return False
    return True


def _summary(verdict: str, out: Decision, launch: dict[str, Any], profile: Profile) -> str:
    if verdict == "block":
        ids = ", ".join(dict.fromkeys(r["id"] for r in out.reasons))
        return f"block: {profile.label} must not be deployed here ({len(out.reasons)} reason(s): {ids})"
    parts = [f"pass: {profile.label} with --tp {launch['tensor_parallel_size']} on GPUs "
             f"{launch['cuda_visible_devices']}"]
    if launch["custom_all_reduce"] is True:
        parts.append("custom all-reduce on (P2P proven)")
    elif launch["custom_all_reduce"] is False:
        parts.append("custom all-reduce off")
    if launch["env"].get("NCCL_P2P_DISABLE") == "1":
        parts.append("NCCL_P2P_DISABLE=1")
    if out.accepted:
        parts.append(f"{len(out.accepted)} finding(s) accepted as risk")
    return "; ".join(parts)
