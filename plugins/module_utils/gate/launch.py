"""The SGLang launch the facts call for: its environment, the known-good entries that apply, its arguments,
those arguments checked against the installed SGLang, and the all-reduce SGLang will run with them.

The environment is the benchmark's recommended one, with ``NCCL_P2P_DISABLE=1`` where P2P is missing.
The gate allows SGLang's custom all-reduce only where P2P is proven, and says ``--disable-custom-all-reduce``
elsewhere; except where the driver claims P2P but nobody proved it and custom all-reduce can run at all (two
GPUs, or an NVLink mesh of any size): there ``--enable-p2p-check`` makes SGLang test CUDA IPC itself.
Whether custom all-reduce then really runs is SGLang's decision (all_reduce.py), reported as it will
fall. Backend flags come from the known-good table (known_good.py) for the chosen GPUs' architecture,
the model and the SGLang version, and are checked against SGLang's ``--help`` (flag_check.py).
"""

from __future__ import annotations

import fnmatch
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import text
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import versions
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.all_reduce import (
    DISABLE,
    P2P_CHECK,
    PCIE_IPC_ENV,
    nvlink_mesh,
    rule_for,
    sglang_all_reduce,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.decision import Decision
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.flag_check import (
    GATE_SETTINGS,
    check_flags,
    group_options,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import (
    DeployModel,
    Gpu,
    Host,
    as_dict,
    as_int,
    as_list,
    as_text,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_help import (
    ArgparseHelp,
    ArgparseHelpError,
    parse_help,
)


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
    if as_dict(bench.get("serving_env")).get("mode") == "nccl-defaults":
        out.notes.append("The benchmark measured NCCL with its defaults, not with the environment SGLang sets when it "
                         "serves (NCCL_CUMEM_ENABLE=0, NCCL_NVLS_ENABLE=0, CUDA_DEVICE_MAX_CONNECTIONS=8): its figures "
                         "may differ from what serves.")
    if not isinstance(recommended, dict) and bench:
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


def _model_keys(deploy: DeployModel) -> list[str]:
    keys = [deploy.family, deploy.name]
    if deploy.path:
        keys.append(deploy.path.rstrip("/").rsplit("/", 1)[-1])
    return [k.lower() for k in keys if k]


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in as_list(value) if isinstance(v, str)]


def known_good_entries(out: Decision, table: list[dict[str, Any]], group: tuple[Gpu, ...] | None, deploy: DeployModel,
                       version: str | None) -> list[dict[str, Any]]:
    """Table entries that apply to this architecture, model and SGLang version."""
    if not group:
        return []
    archs = {g.arch for g in group}
    if None in archs:
        out.notes.append("The architecture of the chosen GPUs is unknown: no known-good backend flags added.")
        return []
    keys = _model_keys(deploy)
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
        family = deploy.family or deploy.name or "this model"
        out.notes.append(f"No known-good entry for {family} on {arch_text}: no backend flags added; SGLang picks its "
                         "defaults and the smoke test judges them.")
    return applied


def known_good_source(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: entry.get(key) for key in ("id", "arch", "models", "sglang_versions", "flags", "purpose", "source",
                                            "note")}


def wants_p2p_check(group: tuple[Gpu, ...] | None, p2p: dict[str, Any], env: dict[str, str],
                    host: Host | None = None) -> bool:
    """GPUs whose P2P the driver claims and nobody proved, where SGLang's custom all-reduce can run at all (two
    GPUs, or an NVLink mesh of any size): let SGLang test CUDA IPC itself rather than assume it."""
    if not group or len(group) < 2 or p2p.get("state") != "claimed" or env.get("NCCL_P2P_DISABLE") == "1":
        return False
    return len(group) == 2 or (host is not None and nvlink_mesh(host, [g.index for g in group])[0] is True)


def launch_args(group: tuple[Gpu, ...] | None, entries: list[dict[str, Any]],
                custom_allowed: bool | None, p2p_check: bool) -> list[str]:
    if not group:
        return []
    chosen: list[tuple[str, list[str]]] = [("--tp", [str(len(group))])]
    for entry in entries:
        chosen.extend(group_options(_as_list(entry.get("flags"))))
    if p2p_check:
        chosen.append((P2P_CHECK, []))
    elif custom_allowed is False:
        chosen.append((DISABLE, []))
    args: list[str] = []
    seen: set[str] = {"--tp-size"}
    for option, values in chosen:
        if option in seen:
            continue  # the gate's own settings first, then overrides before shipped entries
        seen.add(option)
        args.extend([option, *values])
    return args


def flag_sources(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Option -> the id of the known-good entry it came from (the first, as launch_args keeps the first)."""
    sources: dict[str, str] = {}
    for entry in entries:
        for option, _values in group_options(_as_list(entry.get("flags"))):
            sources.setdefault(option, str(entry.get("id")))
    return sources


def _read_help(out: Decision, sglang_help: Any) -> ArgparseHelp | None:
    if not isinstance(sglang_help, (str, bytes)) or not sglang_help.strip():
        out.notes.append("SGLang's --help was not given: the launch flags were not checked against the installed "
                         "SGLang (the sglang role's verify step keeps it; a replay can give "
                         "deployment_gate_sglang_help_file).")
        return None
    try:
        return parse_help(sglang_help)
    except ArgparseHelpError as exc:
        out.notes.append(f"SGLang's --help could not be read ({exc}): the launch flags were not checked.")
        return None


def checked_args(out: Decision, args: list[str], sglang_help: Any, sources: dict[str, str],
                 version: str | None) -> tuple[list[str], dict[str, Any]]:
    """The arguments as the installed SGLang takes them, and what the check did (launch.flag_check)."""
    if not args:
        return args, {"checked": False, "translated": [], "refused": []}
    help_ = _read_help(out, sglang_help)
    if help_ is not None and P2P_CHECK in args and help_.resolve(P2P_CHECK)[0] is None:
        args = [DISABLE if a == P2P_CHECK else a for a in args]
        out.notes.append(f"The installed SGLang has no {P2P_CHECK}: {DISABLE} instead, since the P2P the driver "
                         "claims is proven by nobody. Run gpu_p2p_probe to prove it.")
    checked = check_flags(args, help_, sources, version)
    out.notes.extend(checked.notes)
    for refused in checked.refused:
        option, entry = refused["option"], refused["entry"]
        where = f"known-good entry {entry}" if entry else GATE_SETTINGS
        sglang = f"SGLang {version}" if version else "The installed SGLang (version not given)"
        out.block("sglang_flag_unsupported",
                  f"{sglang} (its --help) {refused['reason']} (from {where}): the server would refuse to start "
                  "with it, so it is left out of the arguments.",
                  {"option": option, "values": refused["values"], "entry": entry, "choices": refused["choices"],
                   "sglang_version": version},
                  remedy=None if entry else text("sglang_flag_unsupported", "gate", option=option), entry=entry)
    report = {"checked": help_ is not None,
              "translated": checked.translated,
              "refused": [{k: r[k] for k in ("option", "values", "reason", "entry")} for r in checked.refused]}
    return checked.args, report


def all_reduce_path(out: Decision, host: Host, group: tuple[Gpu, ...] | None, p2p: dict[str, Any],
                    args: list[str], version: str | None, env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The all-reduce SGLang will run with these arguments (launch.all_reduce); None without a group."""
    if not group:
        return None
    mesh, pairs = nvlink_mesh(host, [g.index for g in group]) if len(group) > 1 else (None, {})
    level = {"proven": "proven", "claimed": "claimed", "absent": "none", "partial": "none"}.get(
        str(p2p.get("state")), "unknown")
    found = sglang_all_reduce(len(group), mesh, level, args, version, env)
    if len(group) > 1:
        note = rule_for(version)[1]
        if note:
            out.notes.append(note)
        if P2P_CHECK in args:
            out.notes.append(f"P2P between the {len(group)} chosen GPUs is claimed by the driver but not proven: "
                             f"{P2P_CHECK} added, so SGLang tests CUDA IPC between them at start-up and keeps its "
                             "custom all-reduce only if that works (NCCL otherwise). Run gpu_p2p_probe and pass its "
                             "result as probe to know beforehand.")
        out.notes.append(f"All-reduce: {found['reason']}")
    return {**found, "nvlink_mesh": mesh, "nvlink_pairs": pairs}


def pcie_ipc_plan(out: Decision, host: Host, group: tuple[Gpu, ...] | None, p2p: dict[str, Any], env: dict[str, str],
                  version: str | None, wanted: bool) -> dict[str, Any] | None:
    """SGLang's opt-in FlashInfer PCIe IPC all-reduce (launch.pcie_ipc): recommended only where the probe proved P2P
    between every pair of a PCIe group of 2, 4 or 8 GPUs on an SGLang that has it; set in ``env`` only when
    ``wanted`` too. It checks no P2P itself, so a variable that sets it anywhere else is taken out of ``env``."""
    if not group or len(group) < 2:
        return None
    ipc = rule_for(version)[0].get("pcie_ipc") if version else None
    mesh = nvlink_mesh(host, [g.index for g in group])[0]
    proven = p2p.get("state") == "proven" and env.get("NCCL_P2P_DISABLE") != "1"
    if ipc is None:
        why = (f"SGLang {version} has no PCIe IPC all-reduce (from 0.5.21)" if version else
               "the SGLang version is not given, and the PCIe IPC all-reduce exists from 0.5.21 only")
    elif len(group) not in ipc["world_sizes"]:
        why = f"it runs at 2, 4 or 8 GPUs, not {len(group)}"
    elif mesh is not False:
        why = ("NVLink connects these GPUs: SGLang's custom all-reduce serves them" if mesh else
               "whether NVLink connects these GPUs is unknown")
    elif not proven:
        why = ("P2P between these GPUs is not proven by the probe, and this all-reduce maps peer memory with no "
               "check of its own: never recommended without that proof")
    else:
        why = ("PCIe GPUs whose P2P the probe proved: SGLang's FlashInfer PCIe IPC all-reduce takes the decode-sized "
               "messages NCCL otherwise carries through the root complex")
    recommended = ipc is not None and why.startswith("PCIe GPUs whose P2P the probe proved")
    if env.get(PCIE_IPC_ENV) not in (None, "0") and not recommended:
        del env[PCIE_IPC_ENV]
        out.notes.append(f"{PCIE_IPC_ENV} from the benchmark's environment is left out: {why}.")
    applied = recommended and wanted
    if applied:
        env[PCIE_IPC_ENV] = "1"
        out.notes.append(f"{PCIE_IPC_ENV}=1 (pcie_ipc_all_reduce): {why}.")
    elif recommended:
        out.notes.append(f"Recommended: SGLang's opt-in PCIe IPC all-reduce ({PCIE_IPC_ENV}=1): {why}. Set "
                         "pcie_ipc_all_reduce: true to launch with it, and compare the throughput.")
    elif wanted:
        out.notes.append(f"pcie_ipc_all_reduce asked for, not applied: {why}.")
    return {"available": ipc is not None, "recommended": recommended, "applied": applied, "why": why,
            "env": {PCIE_IPC_ENV: "1"}}
