"""The SGLang launch the facts call for: its environment, the known-good entries that apply, its arguments.

The environment is the benchmark's recommended one, with ``NCCL_P2P_DISABLE=1`` where P2P is missing;
custom all-reduce stays on only where P2P is proven. Backend flags come from the known-good table
(known_good.py) for the chosen GPUs' architecture, the model and the SGLang version.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from ansible.module_utils.gpuhost.gate import versions
from ansible.module_utils.gpuhost.gate.decision import Decision
from ansible.module_utils.gpuhost.gate.inputs import Gpu, Profile, as_dict, as_int, as_list, as_text


def launch_env(out: Decision, bench: dict[str, Any], p2p: dict[str, Any],
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


def known_good_entries(out: Decision, table: list[dict[str, Any]], group: tuple[Gpu, ...] | None, profile: Profile,
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


def known_good_source(entry: dict[str, Any]) -> dict[str, Any]:
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


def launch_args(group: tuple[Gpu, ...] | None, entries: list[dict[str, Any]],
                custom_all_reduce: bool | None) -> list[str]:
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
