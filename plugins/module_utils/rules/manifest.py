"""Findings where a host deviates from the manifest of its class (rules/manifest_format.py).

Without a manifest (RuleOptions.manifest None) these rules find nothing: a host is judged against its class
only when the inventory names one. A value the facts do not hold (a VBIOS nvidia-smi did not print, a NUMA
node a guest does not know) is never taken as a match or a deviation: manifest_not_checked lists it.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import (
    RuleOptions,
    gpu_devices,
    pairs_text,
    pci_gpus,
)


def _bus(value: Any) -> str | None:
    """A PCI address with its domain as four hex digits: NVML prints eight (00000000:18:00.0), sysfs four."""
    if not isinstance(value, str) or value.count(":") != 2:
        return None
    domain, rest = value.split(":", 1)
    try:
        return f"{int(domain, 16):04x}:{rest.lower()}"
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _gpu_of_slot(facts: dict[str, Any], slot: dict[str, Any]) -> dict[str, Any] | None:
    for device in gpu_devices(facts):
        if "gpu" in slot and device.get("index") == slot["gpu"]:
            return device
        if "pci_bus_id" in slot and _bus(device.get("pci_bus_id")) == _bus(slot["pci_bus_id"]):
            return device
    return None


def _slot_name(slot: dict[str, Any]) -> str:
    return f"GPU{slot['gpu']}" if "gpu" in slot else slot["pci_bus_id"]


def _link(facts: dict[str, Any], device: dict[str, Any]) -> tuple[int | None, int | None]:
    """The link's top generation and its trained width. NVML's gen_max is what this GPU in this slot can reach
    (a Gen5 GPU in a Gen4 slot says 4), where sysfs max_link_speed is the GPU's alone; the speed it runs at
    now is left out, as an idle GPU downshifts it. sysfs is read only where NVML did not say."""
    pcie = device.get("pcie") or {}
    gen, width = _int(pcie.get("gen_max")), _int(pcie.get("width_current"))
    bus = _bus(device.get("pci_bus_id"))
    for pci in pci_gpus(facts):
        if _bus(pci.get("bdf")) == bus:
            link = pci.get("link") or {}
            gen = gen if gen is not None else _int(link.get("gen_max"))
            width = width if width is not None else _int(link.get("width_current"))
    return gen, width


def _numa(facts: dict[str, Any], device: dict[str, Any]) -> int | None:
    bus = _bus(device.get("pci_bus_id"))
    for pci in pci_gpus(facts):
        if _bus(pci.get("bdf")) == bus:
            node = _int(pci.get("numa_node"))
            return node if node is not None and node >= 0 else None  # sysfs says -1 when it has no node
    return None


def rule_manifest(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    manifest = options.manifest
    if not manifest:
        return []
    name, unchecked = manifest["class"], []
    findings = [*_count(facts, manifest, unchecked), *_models(facts, manifest, unchecked),
                *_slots(facts, manifest, unchecked), *_p2p(facts, manifest, unchecked)]
    if unchecked:
        findings.append(make(
            "manifest_not_checked",
            f"{len(unchecked)} value(s) the manifest of class {name} expects could not be read on this host: "
            "they are neither a match nor a deviation.",
            {"manifest_class": name, "not_read": unchecked[:20]}))
    return findings


def _count(facts: dict[str, Any], manifest: dict[str, Any], unchecked: list[str]) -> list[Finding]:
    name, expected = manifest["class"], manifest["gpus"]["count"]
    gpus = facts.get("gpus")
    seen = _int((gpus or {}).get("count")) if gpus is not None else None
    if seen is None:
        unchecked.append("gpus.count: the audit read no GPU list")
        return []
    empty = [_slot_name(slot) for slot in manifest["slots"] if _gpu_of_slot(facts, slot) is None]
    if seen == expected and not empty:
        return []
    missing = seen < expected or bool(empty)
    summary = (f"The host shows {seen} GPU(s) where its class {name} has {expected}"
               + (f"; no GPU in slot(s) {', '.join(empty)}" if empty else "") + ".")
    return [make("manifest_gpu_count", summary,
                 {"manifest_class": name, "expected": expected, "found": seen, "empty_slots": empty},
                 severity="critical" if missing else "warning", manifest_class=name)]


def _models(facts: dict[str, Any], manifest: dict[str, Any], unchecked: list[str]) -> list[Finding]:
    name, gpus, findings = manifest["class"], manifest["gpus"], []
    devices = gpu_devices(facts)
    if gpus["model"]:
        other = [f"GPU{d.get('index')}: {d.get('name')}" for d in devices
                 if isinstance(d.get("name"), str) and d["name"] != gpus["model"]]
        if other:
            findings.append(make(
                "manifest_gpu_model", f"{len(other)} GPU(s) are not the {gpus['model']} of class {name}.",
                {"manifest_class": name, "expected": gpus["model"], "found": other[:16]}))
    if gpus["driver_version"]:
        driver = (facts.get("gpus") or {}).get("driver_version")
        if not isinstance(driver, str):
            unchecked.append("gpus.driver_version: the audit read no driver version")
        elif driver != gpus["driver_version"]:
            findings.append(make(
                "manifest_driver_version",
                f"Driver {driver} runs where class {name} expects {gpus['driver_version']}.",
                {"manifest_class": name, "expected": gpus["driver_version"], "found": driver},
                manifest_class=name, expected=gpus["driver_version"]))
    allowed = gpus["vbios_versions"]
    if allowed:
        other, unread = [], []
        for device in devices:
            if device.get("name") not in allowed:
                continue
            vbios = device.get("vbios_version")
            if not isinstance(vbios, str):
                unread.append(f"GPU{device.get('index')}")
            elif vbios.lower() not in allowed[device["name"]]:
                other.append(f"GPU{device.get('index')}: {vbios}")
        if unread:
            unchecked.append(f"vbios_version of {', '.join(unread)}: not in what the audit read")
        if other:
            findings.append(make(
                "manifest_vbios_mismatch",
                f"{len(other)} GPU(s) run a VBIOS that class {name} does not list.",
                {"manifest_class": name, "expected": allowed, "found": other[:16]}, manifest_class=name))
    return findings


def _slots(facts: dict[str, Any], manifest: dict[str, Any], unchecked: list[str]) -> list[Finding]:
    name, below, numa = manifest["class"], [], []
    for slot in manifest["slots"]:
        device = _gpu_of_slot(facts, slot)
        if device is None:
            continue  # manifest_gpu_count names the empty slot
        where = _slot_name(slot)
        gen, width = _link(facts, device)
        for key, value, label in (("pcie_gen", gen, "Gen"), ("pcie_width", width, "x")):
            if key not in slot:
                continue
            if value is None:
                unchecked.append(f"{key} of {where}: not in what the audit read")
            elif value < slot[key]:
                below.append(f"{where}: {label}{value} where the class has {label}{slot[key]}")
        if "numa_node" in slot:
            node = _numa(facts, device)
            if node is None:
                unchecked.append(f"numa_node of {where}: sysfs gave none (a guest often has no NUMA information)")
            elif node != slot["numa_node"]:
                numa.append(f"{where}: node {node} where the class has node {slot['numa_node']}")
    findings = []
    if below:
        findings.append(make("manifest_link_below",
                             f"{len(below)} GPU link(s) below what class {name} has in that slot.",
                             {"manifest_class": name, "links": below[:16]}))
    if numa:
        findings.append(make("manifest_numa", f"{len(numa)} GPU(s) on another NUMA node than class {name} has.",
                             {"manifest_class": name, "gpus": numa[:16]}))
    return findings


def _p2p(facts: dict[str, Any], manifest: dict[str, Any], unchecked: list[str]) -> list[Finding]:
    name, expected = manifest["class"], manifest["p2p"]
    if not expected:
        return []
    p2p = facts.get("p2p") or {}
    indices = sorted(d["index"] for d in gpu_devices(facts) if isinstance(d.get("index"), int))
    differ: list[tuple[int, int, str]] = []
    worse = False
    for capability, label in sorted(expected.items()):
        matrix = p2p.get(capability)
        if not isinstance(matrix, list) or not matrix:
            unchecked.append(f"p2p.{capability}: the audit read no {capability} matrix")
            continue
        for i in indices:
            for j in indices:
                if i >= j:
                    continue
                cells = [matrix[a][b] for a, b in ((i, j), (j, i))
                         if a < len(matrix) and isinstance(matrix[a], list) and b < len(matrix[a])]
                found = [c for c in cells if isinstance(c, str)]
                if not found:
                    unchecked.append(f"p2p.{capability} GPU{i}-GPU{j}: not read")
                    continue
                wrong = next((c for c in found if c != label), None)
                if wrong is not None:
                    differ.append((i, j, f"{capability} {wrong}, class {label}"))
                    worse = worse or label == "OK"
    if not differ:
        return []
    return [make(
        "manifest_p2p",
        f"{len(differ)} GPU pair(s) show other P2P than class {name}"
        + (": peers the class reaches directly go through host memory here." if worse else "."),
        {"manifest_class": name, "expected": expected, "pairs": pairs_text(differ, limit=12)},
        severity="critical" if worse else "warning", manifest_class=name)]


MANIFEST_RULES = (rule_manifest,)
