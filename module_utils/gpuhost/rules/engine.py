"""The rules engine: gpu_host facts in, findings out, worst first.

The rules live in host.py (the host itself) and proxmox.py (a Proxmox host's VMs); every
finding they make comes from the catalog (catalog.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.module_utils.gpuhost.rules.catalog import make
from ansible.module_utils.gpuhost.rules.finding import Finding, worst_first
from ansible.module_utils.gpuhost.rules.host import HOST_RULES
from ansible.module_utils.gpuhost.rules.proxmox import PROXMOX_RULES
from ansible.module_utils.gpuhost.rules.views import RuleOptions

Rule = Callable[[dict[str, Any], RuleOptions], list[Finding]]

RULES: tuple[Rule, ...] = (*HOST_RULES, *PROXMOX_RULES)


def evaluate(facts: dict[str, Any], options: RuleOptions | None = None,
             rules: tuple[Rule, ...] = RULES) -> list[dict[str, Any]]:
    """Every rule over the facts, worst first. A rule that trips on odd facts becomes a finding itself."""
    options = options or RuleOptions()
    findings: list[Finding] = []
    for rule in rules:
        try:
            findings.extend(rule(facts, options))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            findings.append(make(
                "rule_error", f"The rule {rule.__name__} could not judge these facts ({type(exc).__name__}: {exc}).",
                {"rule": rule.__name__}))
    return [f.as_dict() for f in worst_first(findings)]
