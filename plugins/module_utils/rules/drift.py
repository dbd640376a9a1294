"""What changed between two audits of a host that matters, and the findings it makes.

``compare`` takes two bases (rules/drift_basis.py) and lists each change: an item whose value is known in
both and differs. A value unknown on either side is no change: a report older than a field, or a subset
not gathered this time, says nothing moved. The findings: a GPU gone or added, a link that trained lower,
and a P2P proof measured on facts that have changed since (``stale_proof``).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift_basis import ITEMS

SCALARS = ("driver", "cuda_driver", "kernel", "kernel_cmdline", "bios", "iommu")
BY_SUBJECT = ("vbios", "link", "proxmox_vm_config")
LINK_FIELDS = ("width", "width_max", "gen_max")


def _change(item: str, subject: str | None, before: Any, after: Any, invalidates: bool) -> dict[str, Any]:
    return {"item": item, "subject": subject, "before": before, "after": after, "invalidates_proof": invalidates}


def compare(before: dict[str, Any], after: dict[str, Any], proxmox_host: bool = False) -> list[dict[str, Any]]:
    """The changes from ``before`` to ``after``, in ITEMS order then by subject.

    Every change can invalidate a proof measured before it, except a VM config on the Proxmox host itself:
    its guests' proofs depend on it (each guest's own basis holds its VM), the host's own measurements do not.
    """
    changes: list[dict[str, Any]] = []
    for item in ITEMS:
        old, new = before.get(item), after.get(item)
        if old is None or new is None:
            continue
        invalidates = not (item == "proxmox_vm_config" and proxmox_host)
        if item in SCALARS:
            if old != new:
                changes.append(_change(item, None, old, new, invalidates))
        elif item in BY_SUBJECT:
            changes += [_change(item, subject, old[subject], new[subject], invalidates)
                        for subject in sorted(set(old) & set(new)) if old[subject] != new[subject]]
        elif item == "gpu_set":
            changes += [_change(item, bus, old.get(bus), new.get(bus), invalidates)
                        for bus in sorted(set(old) ^ set(new))]
        elif item == "p2p":
            changes += _p2p_changes(before, after)
    return changes


def _p2p_changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Per capability, the pairs whose status changed. The matrices are by GPU index: when the GPUs are not
    the same ones, an index names another GPU, so only the gpu_set change is said."""
    old_set, new_set = before.get("gpu_set"), after.get("gpu_set")
    if old_set is not None and new_set is not None and set(old_set) != set(new_set):
        return []
    changes = []
    for capability in sorted(set(before["p2p"]) & set(after["p2p"])):
        old, new = before["p2p"][capability], after["p2p"][capability]
        pairs = sorted((pair for pair in set(old) & set(new)
                        if old[pair] is not None and new[pair] is not None and old[pair] != new[pair]),
                       key=lambda pair: tuple(int(i) for i in pair.split("-")))
        if pairs:
            changes.append(_change("p2p", capability, {p: old[p] for p in pairs}, {p: new[p] for p in pairs}, True))
    return changes


def lowered(change: dict[str, Any]) -> bool:
    """A link change where some known number went down: narrower, or a lower top generation or width."""
    if change.get("item") != "link":
        return False
    old, new = change.get("before"), change.get("after")
    if not isinstance(old, dict) or not isinstance(new, dict):
        return False
    return any(isinstance(old.get(k), int) and isinstance(new.get(k), int) and new[k] < old[k] for k in LINK_FIELDS)


def gone(change: dict[str, Any]) -> bool:
    return change.get("item") == "gpu_set" and change.get("before") is not None and change.get("after") is None


def added(change: dict[str, Any]) -> bool:
    return change.get("item") == "gpu_set" and change.get("before") is None and change.get("after") is not None


def still_holds(change: dict[str, Any], basis: dict[str, Any]) -> bool:
    """Whether a GPU recorded gone is still absent, or a link recorded lower still trains as low. A GPU set
    or link not known now cannot say it came back, so the record stays."""
    now = basis.get(change.get("item"))
    if now is None:
        return True
    if gone(change):
        return change.get("subject") not in now
    if lowered(change):
        return now.get(change.get("subject")) == change.get("after")
    return False


def describe(change: dict[str, Any]) -> str:
    """One change in words: "driver 580.95.05 -> 590.44.01", "GPU 0000:41:00.0 gone"."""
    item, subject, old, new = change.get("item"), change.get("subject"), change.get("before"), change.get("after")
    if gone(change):
        return f"GPU {subject} ({old}) gone"
    if added(change):
        return f"GPU {subject} ({new}) added"
    if item == "link" and isinstance(old, dict) and isinstance(new, dict):
        return f"link of {subject} {_link(old)} -> {_link(new)}"
    if item == "p2p" and isinstance(old, dict) and isinstance(new, dict):
        pairs = [f"{pair} {old[pair]} -> {new.get(pair)}" for pair in list(old)[:6]]
        more = f" and {len(old) - 6} more" if len(old) > 6 else ""
        return f"P2P {subject}: {', '.join(pairs)}{more}"
    if item == "proxmox_vm_config" and isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return f"VM {subject} config ({', '.join(keys)})"
    where = f" of {subject}" if subject else ""
    return f"{str(item).replace('_', ' ')}{where} {old} -> {new}"


def _link(link: dict[str, Any]) -> str:
    def show(value: Any) -> str:
        return "?" if value is None else str(value)

    return f"x{show(link.get('width'))}/x{show(link.get('width_max'))} gen{show(link.get('gen_max'))}"


def drift_findings(changes: list[dict[str, Any]], since: str | None) -> list[Finding]:
    """gpu_gone, gpu_added and link_trained_lower from the recorded changes."""
    found = []
    when = f"since the report of {since}" if since else "since the previous report"
    for finding_id, pick, what, severity in (
            ("gpu_gone", gone, "GPU(s) the previous report listed are gone", None),
            ("gpu_added", added, "GPU(s) appeared that the previous report did not list", None),
            ("link_trained_lower", lowered, "GPU link(s) trained lower than in the previous report", None)):
        picked = [c for c in changes if pick(c)]
        if picked:
            found.append(make(finding_id, f"{what} ({when}): {'; '.join(describe(c) for c in picked)}.",
                              {"since": since, "changes": [{k: c.get(k) for k in ("subject", "before", "after")}
                                                           for c in picked]}, severity=severity))
    return found


def stale_proof(proof_basis: dict[str, Any], basis: dict[str, Any], measured: str,
                proxmox_host: bool = False) -> Finding | None:
    """p2p_proof_stale when something that can invalidate the proof changed since it was measured."""
    changes = [c for c in compare(proof_basis, basis, proxmox_host) if c["invalidates_proof"]]
    if not changes:
        return None
    return make("p2p_proof_stale",
                f"The P2P proof and benchmark in this report ({measured}) were measured before: "
                f"{'; '.join(describe(c) for c in changes)}.",
                {"items": sorted({c["item"] for c in changes}, key=ITEMS.index),
                 "changes": [{k: c[k] for k in ("item", "subject", "before", "after")} for c in changes]})
