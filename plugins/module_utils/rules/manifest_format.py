"""An expected-host manifest: what every host of one class must have, checked when it is loaded.

The format (docs/host_manifest.schema.json publishes it; a test keeps the two in step):

    format: gpuhost-manifest/1
    class: hgx-h100-8gpu                   # the host class, named in every finding
    description: free text                 # optional
    gpus:
      count: 8                             # GPUs the host must show (fewer: manifest_gpu_count)
      model: NVIDIA H100 80GB HBM3         # the name NVML / nvidia-smi gives, optional
      driver_version: 550.127.05           # optional, exact
      vbios_versions:                      # optional: per model, the VBIOS versions allowed
        NVIDIA H100 80GB HBM3: [96.00.99.00.01]
    slots:                                 # optional: one entry per GPU slot
      - pci_bus_id: 0000:18:00.0           # the slot by PCI address, or
        # gpu: 0                           # by NVML index (a guest whose addresses the hypervisor picks)
        pcie_gen: 5                        # the generation the link must reach (its maximum, not idle speed)
        pcie_width: 16                     # the width it must train at
        numa_node: 0                       # the NUMA node the GPU must sit on
    p2p:                                   # optional: per capability, what every pair must show
      read: OK
      write: OK
      nvlink: OK
      atomics: OK
    bandwidth:                             # optional: judged by the benchmark phase, which measures it
      peer_min_gbps: 40                    # GB/s (1e9 B/s) every GPU pair's one-way peer copy must reach

It is the shape of the per-SKU expected values of Azure's node health checks and of the per-slot link
manifest of Meta's GCM, for our facts. The manifest arrives as the data Ansible read from a YAML or JSON
file (the gpu_audit role's gpu_audit_manifest); nothing here reads files.
"""

from __future__ import annotations

import re
from typing import Any

FORMAT = "gpuhost-manifest/1"
P2P_CAPABILITIES = ("read", "write", "nvlink", "atomics", "pci")
# Labels a P2P matrix cell can hold: nvidia-smi topo -p2p's codes, which audit/nvml.py gives NVML's statuses
# too (P2P_STATUS_LABELS); a manifest expects one of them per capability.
P2P_LABELS = ("OK", "CNS", "GNS", "TNS", "NS", "DR", "U")
PCIE_GENS = (1, 2, 3, 4, 5, 6)
PCIE_WIDTHS = (1, 2, 4, 8, 16, 32)
_BUS_ID = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_TOP_KEYS = {"format", "class", "description", "gpus", "slots", "p2p", "bandwidth"}
_BANDWIDTH_KEYS = {"peer_min_gbps"}
_GPU_KEYS = {"count", "model", "driver_version", "vbios_versions"}
_SLOT_KEYS = {"pci_bus_id", "gpu", "pcie_gen", "pcie_width", "numa_node"}


class ManifestError(ValueError):
    """A manifest that does not follow the format: the message names the key and what was expected."""


def load(data: Any, origin: str = "the manifest") -> dict[str, Any]:
    """The manifest, checked, with PCI addresses in lower case; ManifestError names what is wrong."""
    top = _mapping(data, origin, _TOP_KEYS)
    if top.get("format") != FORMAT:
        raise ManifestError(f"{origin}: key format must be {FORMAT!r}, found {top.get('format')!r}")
    name = top.get("class")
    if not isinstance(name, str) or not name.strip():
        raise ManifestError(f"{origin}: key class must name the host class (a non-empty string), "
                            f"found {name!r}")
    if "description" in top and not isinstance(top["description"], str):
        raise ManifestError(f"{origin}: key description must be a string")
    return {"class": name.strip(), "description": top.get("description", ""),
            "gpus": _gpus(top.get("gpus"), origin),
            "slots": _slots(top.get("slots", []), origin),
            "p2p": _p2p(top.get("p2p", {}), origin),
            "bandwidth": _bandwidth(top.get("bandwidth", {}), origin)}


def _mapping(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where} must be a mapping, found {type(value).__name__}")
    unknown = sorted(str(key) for key in value if key not in allowed)
    if unknown:
        raise ManifestError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are "
                            f"{', '.join(sorted(allowed))}")
    return value


def _int(value: Any, where: str, allowed: tuple[int, ...] | None = None, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ManifestError(f"{where} must be a whole number of at least {minimum}, found {value!r}")
    if allowed is not None and value not in allowed:
        raise ManifestError(f"{where} must be one of {', '.join(map(str, allowed))}, found {value}")
    return value


def _text(value: Any, where: str) -> str:
    # YAML reads 550.127 as a number; a version must be quoted to keep its digits.
    if not isinstance(value, str) or not value.strip():
        raise ManifestError(f"{where} must be a non-empty string (quote versions in YAML), found {value!r}")
    return value.strip()


def _gpus(value: Any, origin: str) -> dict[str, Any]:
    where = f"{origin}: key gpus"
    gpus = _mapping(value, where, _GPU_KEYS)
    if "count" not in gpus:
        raise ManifestError(f"{where} must hold 'count', the number of GPUs every host of the class has")
    found: dict[str, Any] = {"count": _int(gpus["count"], f"{where}.count", minimum=1),
                             "model": None, "driver_version": None, "vbios_versions": {}}
    if "model" in gpus:
        found["model"] = _text(gpus["model"], f"{where}.model")
    if "driver_version" in gpus:
        found["driver_version"] = _text(gpus["driver_version"], f"{where}.driver_version")
    vbios = gpus.get("vbios_versions", {})
    if not isinstance(vbios, dict):
        raise ManifestError(f"{where}.vbios_versions must map a GPU model to the list of VBIOS versions allowed")
    for model, versions in vbios.items():
        entry = f"{where}.vbios_versions[{model!r}]"
        if not isinstance(versions, list) or not versions:
            raise ManifestError(f"{entry} must be a non-empty list of VBIOS versions")
        found["vbios_versions"][_text(model, f"{where}.vbios_versions key")] = [
            _text(v, entry).lower() for v in versions]
    return found


def _slots(value: Any, origin: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ManifestError(f"{origin}: key slots must be a list of slots, found {type(value).__name__}")
    slots, seen = [], set()
    for number, item in enumerate(value):
        where = f"{origin}: slots[{number}]"
        slot = _mapping(item, where, _SLOT_KEYS)
        if ("pci_bus_id" in slot) == ("gpu" in slot):
            raise ManifestError(f"{where} must name its GPU by exactly one of 'pci_bus_id' (0000:18:00.0) "
                                "or 'gpu' (the NVML index)")
        if "pci_bus_id" in slot:
            bus = slot["pci_bus_id"]
            if not isinstance(bus, str) or not _BUS_ID.match(bus):
                raise ManifestError(f"{where}.pci_bus_id must be a PCI address like 0000:18:00.0, found {bus!r}")
            key: tuple[str, Any] = ("pci_bus_id", bus.lower())
        else:
            key = ("gpu", _int(slot["gpu"], f"{where}.gpu"))
        if key in seen:
            raise ManifestError(f"{where} names {key[0]} {key[1]} a second time")
        seen.add(key)
        checked = {key[0]: key[1]}
        if "pcie_gen" in slot:
            checked["pcie_gen"] = _int(slot["pcie_gen"], f"{where}.pcie_gen", PCIE_GENS)
        if "pcie_width" in slot:
            checked["pcie_width"] = _int(slot["pcie_width"], f"{where}.pcie_width", PCIE_WIDTHS)
        if "numa_node" in slot:
            checked["numa_node"] = _int(slot["numa_node"], f"{where}.numa_node")
        slots.append(checked)
    return slots


def _p2p(value: Any, origin: str) -> dict[str, str]:
    where = f"{origin}: key p2p"
    p2p = _mapping(value, where, set(P2P_CAPABILITIES))
    for capability, label in p2p.items():
        if label not in P2P_LABELS:
            raise ManifestError(f"{where}.{capability} must be one of {', '.join(P2P_LABELS)} (the labels of "
                                f"nvidia-smi topo -p2p), found {label!r}")
    return dict(p2p)


def _bandwidth(value: Any, origin: str) -> dict[str, float]:
    where = f"{origin}: key bandwidth"
    bandwidth = _mapping(value, where, _BANDWIDTH_KEYS)
    floor = bandwidth.get("peer_min_gbps")
    if floor is None:
        return {}
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 < floor < 10000:
        raise ManifestError(f"{where}.peer_min_gbps must be a number of GB/s above 0 (the one-way peer copy "
                            f"bandwidth every GPU pair must reach), found {floor!r}")
    return {"peer_min_gbps": float(floor)}
