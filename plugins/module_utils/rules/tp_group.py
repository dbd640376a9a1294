"""The tensor-parallel group the audit was asked to judge, checked against the GPUs the host has.

The P2P and NUMA rules judge the pairs of ``tensor_parallel_gpus`` that the host has (views.tp_group);
an index the host does not have used to drop out of the group without a word, so a typo (``[0, 1, 2, 9]``
on an 8-GPU host) judged three GPUs and passed. This rule says so instead.

A finding rather than a module failure: the audit is a read-only inspection whose report a fleet relies on,
and a host that lost a GPU since the inventory was written is the host whose report matters most. Failing
its audit over the option would hide the very findings that explain the missing GPU. As a critical finding
the report still holds everything else, gpu_audit_fail_on fails the host, and the deployment gate blocks on
it until the option is corrected (or the finding accepted).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions, gpu_devices, tp_group


def index_ranges(indexes: list[int]) -> str:
    """``0-3, 5, 7`` for [0, 1, 2, 3, 5, 7]: the host's GPUs as a person writes them."""
    runs: list[list[int]] = []
    for index in sorted(set(indexes)):
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs)


def rule_tensor_parallel_gpus(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    asked = options.tensor_parallel_gpus
    host = sorted({d["index"] for d in gpu_devices(facts) if isinstance(d.get("index"), int)})
    # With no GPU list there is nothing to compare with: the findings about the missing GPUs speak instead.
    if asked is None or not host:
        return []
    missing = sorted({i for i in asked if i not in host})
    if not missing:
        return []
    judged = tp_group(facts, options)
    names = ", ".join(f"GPU {i}" for i in missing)
    return [make(
        "tensor_parallel_gpus_not_on_host",
        f"tensor_parallel_gpus names {names}, which this host does not have (it has GPUs {index_ranges(host)}): "
        f"P2P and NUMA were judged on {', '.join(map(str, judged)) or 'no GPU'} only, not on the group asked for.",
        {"tensor_parallel_gpus": list(asked), "not_on_host": missing, "host_gpus": host, "judged": judged},
        host_gpus=index_ranges(host), missing=", ".join(map(str, missing)))]


TP_GROUP_RULES = (rule_tensor_parallel_gpus,)
