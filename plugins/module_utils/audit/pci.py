"""The PCI bus as sysfs shows it: every device's ids, and for NVIDIA devices
everything that decides P2P: driver, IOMMU group, link, NUMA node, BARs and
the bridges up to the root port with their ACS settings.

ACS lives in PCI extended config space, which only root can read from sysfs;
without it the gatherer asks ``lspci -vvv`` once, and failing that says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import LSPCI
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import (
    PciParseError,
    describe_pci_id,
    device_kind,
    is_nvidia,
    parse_bdf,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_config_space import parse_config_space
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sysfs_pci import (
    link_gen,
    parse_link_speed,
    parse_link_width,
    parse_resource,
)

PCI_DIR = "/sys/bus/pci/devices"
HOST_BRIDGE_CLASS = "0x0600"
BRIDGE_CLASS_PREFIX = "0x06"


def read_ids(source: Source, bdf: str) -> dict[str, str | None]:
    base = f"{PCI_DIR}/{bdf}"
    return {
        "vendor": _lower(source.read_value(f"{base}/vendor")),
        "device": _lower(source.read_value(f"{base}/device")),
        "class": _lower(source.read_value(f"{base}/class")),
    }


def _lower(value: str | None) -> str | None:
    return value.lower() if value else None


def parse_numa_node(text: str) -> int | None:
    try:
        node = int(text)
    except ValueError:
        raise PciParseError(f"expected a NUMA node number such as 0 or -1, found {text[:40]!r}") from None
    # sysfs says -1 when the platform did not tell the kernel (typical in VMs).
    return node if node >= 0 else None


def _basename_of_link(source: Source, path: str) -> str | None:
    target = source.readlink(path)
    return os.path.basename(target) if target else None


def upstream_chain(source: Source, bdf: str) -> list[str]:
    """The bridges above a device, root port first, from the device's sysfs path.

    /sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:08.0/0000:41:00.0
    -> ["0000:00:01.1", "0000:01:00.0", "0000:02:08.0"]
    """
    real = source.realpath(f"{PCI_DIR}/{bdf}")
    if not real:
        return []
    parts = [p for p in real.split("/") if p]
    chain = []
    for part in parts:
        try:
            normalized = parse_bdf(part)
        except PciParseError:
            continue
        if normalized != bdf:
            chain.append(normalized)
    return chain


class PciReader:
    """Reads one host's PCI facts; remembers config space and lspci between devices."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._lspci: dict[str, Any] | None = None
        self._lspci_tried = False

    def attribute(self, bdf: str, name: str, parse: Callable[[str], Any]) -> Any:
        """One parsed sysfs attribute; absent or garbled gives None, and garbled is noted."""
        path = f"{PCI_DIR}/{bdf}/{name}"
        text = self.source.read_value(path)
        if text is None:
            return None
        try:
            return parse(text)
        except PciParseError as exc:
            self.source.note_problem(path, str(exc))
            return None

    def config_space(self, bdf: str) -> Any:
        data = self.source.read_bytes(f"{PCI_DIR}/{bdf}/config")
        if data is None:
            return None
        try:
            return parse_config_space(data)
        except PciParseError as exc:
            self.source.note_problem(f"{PCI_DIR}/{bdf}/config", str(exc))
            return None

    def lspci(self) -> dict[str, Any]:
        # Imported here, not above: only a host whose sysfs cannot tell (or material) reads lspci, and the module
        # every audited host runs compiles only what it runs (docs/development.md).
        from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.lspci import parse_lspci_vvv

        if not self._lspci_tried:
            self._lspci_tried = True
            result = self.source.run(LSPCI.argv)
            self._lspci = {}
            if result.ok:
                try:
                    self._lspci = parse_lspci_vvv(result.stdout)
                except PciParseError as exc:
                    self.source.note_problem(LSPCI.key, str(exc))
        return self._lspci or {}

    def acs(self, bdf: str, config: Any) -> tuple[dict[str, bool] | None, str]:
        """ACS control bits of a bridge and where they came from."""
        if config is not None and config.extended_readable:
            return (acs_bits(config.acs.control), "config") if config.acs is not None else (None, "absent")
        listed = self.lspci().get(bdf)
        if listed is not None and listed.acs is not None:
            return acs_bits(listed.acs.control), "lspci"
        if listed is not None and listed.pcie is not None and not listed.capabilities_access_denied:
            return None, "absent"
        return None, "unreadable"

    def port_type(self, bdf: str, config: Any) -> str | None:
        if config is not None and config.pcie is not None:
            return config.pcie.port_type
        # Unprivileged reads stop at 64 bytes, before the capability list.
        listed = self.lspci().get(bdf)
        return listed.pcie.port_type if listed is not None and listed.pcie is not None else None

    def bridge(self, bdf: str) -> dict[str, Any]:
        ids = read_ids(self.source, bdf)
        config = self.config_space(bdf)
        acs_ctrl, acs_source = self.acs(bdf, config)
        return {
            "bdf": bdf,
            "vendor_id": (ids["vendor"] or "")[2:] or None,
            "device_id": (ids["device"] or "")[2:] or None,
            "description": describe(ids),
            "port_type": self.port_type(bdf, config),
            "acs_ctrl": acs_ctrl,
            "acs_source": acs_source,
        }

    def nvidia_device(self, bdf: str, ids: dict[str, str | None], groups: dict[str, list[str]],
                      bridges: dict[str, dict[str, Any]]) -> dict[str, Any]:
        base = f"{PCI_DIR}/{bdf}"
        source = self.source
        group = _basename_of_link(source, f"{base}/iommu_group")
        config = self.config_space(bdf)
        resource = source.read_text(f"{base}/resource")
        bars: list[dict[str, Any]] = []
        if resource is not None:
            try:
                bars = [bar_dict(region) for region in parse_resource(resource)
                        if region.index <= 5 and region.size]
            except PciParseError as exc:
                source.note_problem(f"{base}/resource", str(exc))
        speed_current = self.attribute(bdf, "current_link_speed", parse_link_speed)
        speed_max = self.attribute(bdf, "max_link_speed", parse_link_speed)
        chain = upstream_chain(source, bdf)
        for bridge_bdf in chain:
            if bridge_bdf not in bridges:
                bridges[bridge_bdf] = self.bridge(bridge_bdf)
        class_code = ids["class"] or ""
        return {
            "bdf": bdf,
            "vendor_id": (ids["vendor"] or "")[2:] or None,
            "device_id": (ids["device"] or "")[2:] or None,
            "class": class_code or None,
            "kind": kind_of(ids),
            "driver": _basename_of_link(source, f"{base}/driver"),
            "iommu_group": group,
            "iommu_group_peers": [m for m in groups.get(group or "", []) if m != bdf],
            "link": {
                "speed_current_gts": speed_current,
                "speed_max_gts": speed_max,
                "gen_current": link_gen(speed_current),
                "gen_max": link_gen(speed_max),
                "width_current": self.attribute(bdf, "current_link_width", parse_link_width),
                "width_max": self.attribute(bdf, "max_link_width", parse_link_width),
            },
            "numa_node": self.attribute(bdf, "numa_node", parse_numa_node),
            "local_cpulist": source.read_value(f"{base}/local_cpulist"),
            "bars": bars,
            "resizable_bar": [rebar_dict(r) for r in config.resizable_bars] if config is not None
            and config.extended_readable else None,
            "upstream": [bridges[b] for b in chain],
        }


def acs_bits(flags: Any) -> dict[str, bool]:
    """ACS flags under the short names the PCIe spec and lspci use."""
    return {"SV": flags.src_valid, "TB": flags.trans_blk, "RR": flags.req_redir, "CR": flags.cmplt_redir,
            "UF": flags.upstream_fwd, "EC": flags.egress_ctrl, "DT": flags.direct_trans}


def describe(ids: dict[str, str | None]) -> str | None:
    """What a hypervisor-emulated device is; None for real hardware or garbled ids."""
    try:
        return describe_pci_id(ids["vendor"] or "", ids["device"] or "")
    except PciParseError:
        return None


def kind_of(ids: dict[str, str | None]) -> str:
    try:
        return device_kind(ids["vendor"] or "", ids["class"] or "")
    except PciParseError:
        return "unknown"


def bar_dict(region: Any) -> dict[str, Any]:
    return {"index": region.index, "size_bytes": region.size, "prefetchable": region.prefetchable,
            "is_64bit": region.mem64}


def rebar_dict(rebar: Any) -> dict[str, Any]:
    return {"bar": rebar.index, "current_size_bytes": rebar.current_size, "max_supported_bytes": rebar.max_size}


def gather_pci(source: Source, groups: dict[str, list[str]]) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """PCI facts, plus (bdf, vendor, device) of every device for the virtualization vote."""
    reader = PciReader(source)
    ids_by_bdf = {bdf: read_ids(source, bdf) for bdf in source.listdir(PCI_DIR) or []}
    all_ids = [(bdf, ids["vendor"] or "", ids["device"] or "") for bdf, ids in ids_by_bdf.items()]
    host_bridges = [
        {"bdf": bdf, "vendor_id": (ids["vendor"] or "")[2:], "device_id": (ids["device"] or "")[2:],
         "description": describe(ids)}
        for bdf, ids in ids_by_bdf.items() if (ids["class"] or "").startswith(HOST_BRIDGE_CLASS)
    ]
    bridges: dict[str, dict[str, Any]] = {}
    nvidia = [reader.nvidia_device(bdf, ids, groups, bridges)
              for bdf, ids in ids_by_bdf.items() if is_nvidia(ids["vendor"])]
    facts = {
        "device_count": len(ids_by_bdf),
        "host_bridges": host_bridges,
        "nvidia_devices": nvidia,
    }
    return facts, all_ids
