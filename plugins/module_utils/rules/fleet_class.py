"""VBIOS and driver consistency across the hosts of one class, judged where the fleet's facts meet (the report
phase: plugins/modules/gpu_audit_report.py, for the hosts audited in one run).

A class is the manifest's (``manifest_class``, set when a host was judged against a manifest); hosts without a
manifest are compared with nobody: the defaults stay quiet on a fleet that declared no classes (a GPU model
alone would put a bare-metal host and a VM guest of one model, rightly on different drivers, in one class).
Within a class, the hosts' VBIOS
versions of one GPU model, and their driver versions, should be one: fleet tools check both (Meta's GCM, the
golden-config diffs of Google's cluster health scanner) because the odd host's failures are otherwise read as
its hardware's. A host's own GPUs that differ among themselves are rules/vbios.py's; a manifest's allowed
versions are rules/manifest.py's. Here only hosts that differ from each other count.

The finding goes to the hosts off the class's most common version (to every host of the class when no version
is the most common), naming every host and version, so that each host's one record (report, fleet row, metrics)
carries it. A version not read is left out, never counted as different.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import gpu_devices

_MAX_NAMED = 12


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _models(facts: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """GPU model -> the VBIOS versions its GPUs run on this host (read ones only, sorted)."""
    found: dict[str, set[str]] = {}
    for device in gpu_devices(facts):
        name, version = _text(device.get("name")), _text(device.get("vbios_version"))
        if name:
            found.setdefault(name, set())
            if version:
                found[name].add(version)
    return {name: tuple(sorted(versions)) for name, versions in found.items()}


def _groups(hosts: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Class name (a manifest's) -> its hosts; hosts without a manifest class belong to none."""
    groups: dict[str, list[str]] = {}
    for host, facts in sorted(hosts.items()):
        name = _text(facts.get("manifest_class"))
        if name:
            groups.setdefault(f"class {name}", []).append(host)
    return groups


def _odd(values: dict[str, str]) -> list[str]:
    """The hosts off the most common value; every host when no value is the most common."""
    counts = Counter(values.values()).most_common()
    if len(counts) > 1 and counts[0][1] > counts[1][1]:
        return sorted(h for h, v in values.items() if v != counts[0][0])
    return sorted(values)


def _said(values: dict[str, str]) -> str:
    by_value: dict[str, list[str]] = {}
    for host, value in sorted(values.items()):
        by_value.setdefault(value, []).append(host)
    parts = []
    for value, named in sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0])):
        more = f" and {len(named) - _MAX_NAMED} more" if len(named) > _MAX_NAMED else ""
        parts.append(f"{value} on {', '.join(named[:_MAX_NAMED])}{more}")
    return "; ".join(parts)


def class_findings(hosts: dict[str, dict[str, Any]]) -> dict[str, list[Finding]]:
    """Per host, the class-consistency findings it gets (hosts with none are left out)."""
    found: dict[str, list[Finding]] = {}
    for group, members in _groups(hosts).items():
        if len(members) < 2:
            continue
        models = sorted({model for host in members for model in _models(hosts[host])})
        for model in models:
            vbios = {host: ", ".join(versions) for host in members
                     for versions in [_models(hosts[host]).get(model)] if versions}
            if len(set(vbios.values())) > 1:
                evidence = {"class": group, "model": model, "vbios_by_host": dict(sorted(vbios.items()))}
                for host in _odd(vbios):
                    found.setdefault(host, []).append(make(
                        "fleet_vbios_mismatch", f"Hosts of {group} run different VBIOS versions of the {model}: "
                        f"{_said(vbios)} (this host: {vbios[host]}).", evidence, model=model))
        drivers = {host: driver for host in members
                   for driver in [_text((hosts[host].get("gpus") or {}).get("driver_version"))] if driver}
        if len(set(drivers.values())) > 1:
            evidence = {"class": group, "driver_by_host": dict(sorted(drivers.items()))}
            for host in _odd(drivers):
                if any(f.id == "fleet_driver_mismatch" for f in found.get(host, [])):
                    continue  # a host of two model groups is told once
                found.setdefault(host, []).append(make(
                    "fleet_driver_mismatch", f"Hosts of {group} run different NVIDIA drivers: {_said(drivers)} "
                    f"(this host: {drivers[host]}).", evidence))
    return found
