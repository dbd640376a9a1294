"""NVSwitch SXid events of this boot (health.kernel_log.sxid_events, parsers/nvswitch_sxid.py).

The driver says on the line whether an SXid is Fatal or Non-fatal, and that word decides: a fatal SXid leaves
the fabric unusable until the GPUs and NVSwitches are reset (NVIDIA's Fabric Manager User Guide, "NVSwitch
SXid errors"), so the host is unfit; non-fatal ones are a warning. Where no line said (a paste of the
``Data`` lines only), the code's documented severity in KNOWN decides, and an unknown code is a warning:
a code seen is never passed over, nor made fatal by guess.

KNOWN holds only codes whose meaning a public source states, with that source; it names them in findings.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

# code -> (name, documented fatal?)
KNOWN: dict[int, tuple[str, bool]] = {
    # Fabric Manager User Guide DU-09883-001 v1.3 (October 2023), as catalogued in leptonai/gpud (PR #338):
    # fatal, NVLink traffic through the switch stalls and guests abort CUDA jobs with Xid 45.
    12028: ("egress non-posted PRIV error", True),
    # Printed "Non-fatal, Link N Minion Link DLREQ interrupt" by driver 570.195.03 (NVIDIA/nvtrust#124).
    22013: ("Minion Link DLREQ interrupt", False),
}


def sxid_events(facts: dict[str, Any]) -> list[dict[str, Any]]:
    kernel_log = (facts.get("health") or {}).get("kernel_log") or {}
    return [e for e in kernel_log.get("sxid_events") or [] if isinstance(e, dict) and isinstance(e.get("sxid"), int)]


def is_fatal(event: dict[str, Any]) -> bool:
    if isinstance(event.get("fatal"), bool):
        return event["fatal"]
    return KNOWN.get(event["sxid"], ("", False))[1]


def _said(event: dict[str, Any]) -> str:
    name = KNOWN.get(event["sxid"], (None,))[0]
    word = {True: "fatal", False: "non-fatal", None: "severity not printed"}[event.get("fatal")]
    where = f"nvidia-nvswitch{event.get('switch')} ({event.get('pci_bus_id')})"
    return (f"SXid {event['sxid']}{f' ({name})' if name else ''} on {where}, {event.get('count')} time(s), {word}"
            + (f": {event['message']}" if event.get("message") else ""))


def _known(events: list[dict[str, Any]]) -> str:
    named = sorted({e["sxid"] for e in events if e["sxid"] in KNOWN})
    unknown = sorted({e["sxid"] for e in events if e["sxid"] not in KNOWN})
    parts = [f"{code} is {KNOWN[code][0]}" for code in named]
    if unknown:
        parts.append(f"{', '.join(map(str, unknown))} not in this project's table")
    return "; ".join(parts) + "."


def rule_sxid(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    events = sxid_events(facts)
    fatal = [e for e in events if is_fatal(e)]
    other = [e for e in events if not is_fatal(e)]
    found = []
    if fatal:
        found.append(make("nvswitch_sxid_fatal",
                          f"{len(fatal)} fatal NVSwitch SXid(s) this boot: " + "; ".join(map(_said, fatal)) + ".",
                          {"sxid_events": fatal}, known=_known(fatal)))
    if other:
        found.append(make("nvswitch_sxid_errors",
                          f"{len(other)} non-fatal or unstated NVSwitch SXid(s) this boot: "
                          + "; ".join(map(_said, other)) + ".",
                          {"sxid_events": other}, known=_known(other)))
    return found


SXID_RULES = (rule_sxid,)
