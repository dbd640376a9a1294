"""SGLang launch flags known to work, per GPU architecture, model family and SGLang version.

The deployment gate (gate.py) adds an entry's flags when the chosen GPUs' architecture, the model
and the SGLang version all match it. The table is a starting point, not a guarantee: backend bugs
on new architectures come and go between SGLang releases, so every entry names the versions it was
seen to work with and where that was seen, and the smoke test after the launch stays the judge.
Inventories add or replace entries with the ``known_good_overrides`` option of ``deploy_gate``
(same shape; an override with the ``id`` of a shipped entry replaces it, ``disabled: true`` drops it).

Entry fields:
  id               unique name, reported back as the source of the flags
  arch             an ``sm_XY`` name or a list of them (``sm_120`` for RTX PRO 6000 / RTX 50xx Blackwell,
                   ``sm_100`` for B200, ``sm_90`` for H100/H200, ``sm_89`` for Ada)
  models           globs matched, case-insensitively, against the model's ``family``, ``name``
                   and the last part of its ``path``
  sglang_versions  the SGLang versions it is known good for: PEP 440 clauses (``">=0.5.6,<0.5.12"``,
                   ``"0.5.*"``), a list of them, or null for "not pinned"
  flags            SGLang command-line arguments, option and value as separate items
  env              environment variables the entry needs (optional)
  purpose          ``correctness`` (without it the output is wrong or the server fails) or ``performance``
  source           where it was seen to work
  note             what it does and what is known about its limits
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import unknown_keys

# The fields an entry may have; any other is a typo that would leave a field unset without a word.
ENTRY_KEYS = frozenset({"id", "arch", "models", "sglang_versions", "flags", "env", "purpose", "source", "note",
                        "disabled"})

KNOWN_GOOD: tuple[dict[str, Any], ...] = (
    {
        "id": "sm120-glm5-nsa-decode-trtllm",
        "arch": ["sm_120"],
        "models": ["glm-5", "glm-5-*", "glm5", "glm5-*"],
        # The incident ran an SGLang source build whose exact version was not recorded. Up to 0.5.9 SGLang
        # defaults a DSA model's KV cache to fp8_e4m3 on SM >= 10 and then its decode backend to flashmla_kv
        # (0.5.9 server_args.py _set_default_nsa_kv_cache_dtype, _set_default_nsa_backends), the backend that
        # hit device-side asserts: the flag changes that. From 0.5.10 the defaults already are trtllm (next
        # entry), and with the v0.5.12 release image sgl-project/sglang#26087 reports every NSA/DSA decode
        # backend (trtllm included) failing at start-up on SM120 for GLM-5.1-NVFP4.
        "sglang_versions": "<0.5.10",
        "flags": ["--nsa-decode-backend", "trtllm"],
        "env": {},
        "purpose": "correctness",
        "source": "GLM-5-NVFP4 on 8x RTX PRO 6000 Blackwell (SM120) with an SGLang source build: decode gave NaN "
                  "until --nsa-decode-backend trtllm was set; flashmla_kv and flashmla_sparse hit device-side "
                  "asserts. SGLang 0.5.9 server_args.py: fp8_e4m3 KV cache and flashmla_kv decode by default on "
                  "SM >= 10.",
        "note": "GLM-5 uses DeepSeek-style sparse attention (NSA/DSA); on SM120 only the trtllm decode kernel gave "
                "finite output in the incident. Later SGLang versions renamed the options (--dsa-decode-backend) "
                "and changed which backends run on SM120: check with the smoke test and add an override for the "
                "version you run.",
    },
    {
        "id": "sm120-glm5-dsa-trtllm-by-default",
        "arch": ["sm_120"],
        "models": ["glm-5", "glm-5-*", "glm5", "glm5-*"],
        # 0.5.10 and 0.5.10.post1 server_args.py: on SM >= 10 the KV cache of a DSA model defaults to fp8_e4m3,
        # and with an fp8_e4m3 KV cache _set_default_nsa_backends sets both NSA backends to trtllm whatever the
        # user set; with --kv-cache-dtype bfloat16 the decode default on SM >= 10 is trtllm too. 0.5.11 keeps
        # those defaults and respects the user's backends again. So a --nsa-decode-backend trtllm flag changes
        # nothing there; another backend takes effect only with --kv-cache-dtype bfloat16 (0.5.10.x).
        "sglang_versions": ">=0.5.10,<0.5.12",
        "flags": [],
        "env": {},
        "purpose": "correctness",
        "source": "SGLang 0.5.10, 0.5.10.post1 and 0.5.11 server_args.py (_set_default_nsa_kv_cache_dtype, "
                  "_set_default_nsa_backends)",
        "note": "Nothing to add: SGLang itself runs GLM-5 on SM120 with an fp8_e4m3 KV cache and trtllm for both "
                "DSA backends (0.5.10.x forces them over a user's --nsa-*-backend unless --kv-cache-dtype "
                "bfloat16). The smoke test still judges the output.",
    },
)


def entry_problems(entry: Any, where: str) -> list[str]:
    """What is wrong with one table entry (shipped or override), each as a sentence."""
    if not isinstance(entry, dict):
        return [f"{where}: expected a mapping with id, arch, models, flags; found {type(entry).__name__}"]
    problems = unknown_keys(entry, ENTRY_KEYS, where)
    if not isinstance(entry.get("id"), str) or not entry["id"].strip():
        problems.append(f"{where}: expected 'id' as a non-empty string; found {entry.get('id')!r}")
    if entry.get("disabled") is True:
        return problems
    arch = entry.get("arch")
    if not (isinstance(arch, str) or (isinstance(arch, list) and arch and all(isinstance(a, str) for a in arch))):
        problems.append(f"{where}: expected 'arch' as an sm_XY name or a list of them; found {arch!r}")
    models = entry.get("models")
    if not (isinstance(models, str) or (isinstance(models, list) and all(isinstance(m, str) for m in models))):
        problems.append(f"{where}: expected 'models' as a glob or a list of globs; found {models!r}")
    flags = entry.get("flags")
    if not (isinstance(flags, list) and all(isinstance(f, str) for f in flags)):
        problems.append(f"{where}: expected 'flags' as a list of strings (option and value as separate items); "
                        f"found {flags!r}")
    elif flags and not flags[0].startswith("--"):
        problems.append(f"{where}: expected 'flags' to start with an option (--name); found {flags[0]!r}")
    env = entry.get("env")
    if env is not None and not (isinstance(env, dict) and all(isinstance(k, str) for k in env)):
        problems.append(f"{where}: expected 'env' as a mapping of variable names to values; found {env!r}")
    versions = entry.get("sglang_versions")
    if versions is not None and not (isinstance(versions, str) or (isinstance(versions, list)
                                                                   and all(isinstance(v, str) for v in versions))):
        problems.append(f"{where}: expected 'sglang_versions' as a specifier string, a list of them or null; "
                        f"found {versions!r}")
    return problems


def merged_table(overrides: Any, label: str = "known_good_overrides") -> tuple[list[dict[str, Any]], list[str]]:
    """The shipped table with the overrides applied, overrides first; and the problems found in them.

    An override whose id is a shipped entry's replaces it; one with ``disabled: true`` removes it.
    Invalid overrides are left out and reported; ``label`` is what the messages call the overrides.
    """
    problems: list[str] = []
    valid: list[dict[str, Any]] = []
    if overrides is None:
        overrides = []
    if not isinstance(overrides, list):
        return [dict(e) for e in KNOWN_GOOD], [f"{label}: expected a list of entries; found "
                                               f"{type(overrides).__name__}"]
    for index, entry in enumerate(overrides):
        found = entry_problems(entry, f"{label}[{index}]")
        if found:
            problems.extend(found)
        else:
            valid.append(dict(entry))
    replaced = {e["id"] for e in valid}
    table = [e for e in valid if e.get("disabled") is not True]
    table.extend(dict(e) for e in KNOWN_GOOD if e["id"] not in replaced)
    return table, problems
