"""NCCL's topology dump (``NCCL_TOPO_DUMP_FILE=system.xml``): where each GPU sits on the PCI tree, the link it
trained, the NUMA node NCCL put it on, and the signs of a topology a hypervisor emulated.

Pure: text in, plain data out; the only exception is ``NcclTopoParseError`` (a ``ParseError``), saying what was
expected. Read with parsers/safe_xml.py (no entities, no internal DTD; a dump cut short gives what it holds,
with ``complete`` False). The shape is NCCL's writer (``src/graph/xml.cc``, ``ncclTopoDumpXmlRec`` and
``ncclTopoGetXmlFromSys``), as real dumps show it (tests/fixtures/nccl/SOURCES.md)::

    <system version="1">
      <cpu host_hash="0x..." numaid="0" affinity="..." arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="207">
        <pci busid="0000:16:00.0" class="0x060400" ... link_speed="32.0 GT/s PCIe" link_width="16">   (a switch)
          <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" ... link_speed="..." link_width="16">
            <gpu dev="0" sm="90" rank="0" gdr="1"><nvlink target="0000:07:00.0" count="5" tclass="0x068000"/></gpu>
          </pci>
          <pci busid="0000:19:00.0" ...><nic><net name="mlx5_0" dev="0" speed="400000" gdr="1" .../></nic></pci>

What xml.cc writes when it cannot tell, and what it means here:

* ``numaid``: the GPU's ``numa_node`` from sysfs, ``-1`` when the platform gives none (a guest without a
  virtual NUMA layout, some single-socket hosts), and ``-1`` too when the device has no sysfs path at all.
  Read as None ("not known"), with ``numa_unknown`` set.
* ``link_speed``: the lower of the device's and its port's ``max_link_speed``; ``""`` when neither file
  exists (a conventional PCI device, as on the flat bus a hypervisor emulates) or the device has no sysfs
  path; ``link_width`` then ``0`` or ``""``. Both read as None.
* ``busid`` ``0000:BB:DD.F``; an NVLink ``target`` of ``fffffff:ff:ff.0`` is an NVSwitch NVML names no bus id
  for (bare-metal HGX dumps show it too: no sign of anything).

A paste that starts mid-tree (no ``<system>``, closing tags first) gives its GPUs from their ``<pci>`` and
``<gpu>`` tags alone, with ``complete`` False and what hangs above them unknown.

Output of ``parse_nccl_topo_xml``: ``{"version": int | None, "complete": bool, "cpus": [{numaid, arch, vendor,
familyid, modelid, numa_unknown}], "gpus": [{dev, rank, sm, gdr, pci_bus_id, numaid, link_speed, link_speed_gts,
link_width, switches, nvlinks: [{target, count}]}], "nics": [{name, dev, pci_bus_id, speed_mbps, gdr}], "pci_ids":
[{pci_bus_id, vendor, device}]}`` (``pci_ids``: every ``<pci>`` of the tree with its ``0x1b36``-style ids, switches
and bridges included: QEMU's own and virtio devices show there).
``emulated_signs`` says which signs of an emulated topology the dump shows.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    ParseError,
    excerpt,
    expected_found,
    normalize_paste,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.safe_xml import pull_parse, refused_declaration

_WHAT = "NCCL topology dump"
_START_RE = re.compile(r"<\?xml|<system\b")
_END_TAG = "</system>"
_BUS_ID_RE = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_PCI_ID_RE = re.compile(r"^0x([0-9a-fA-F]{4})$")
_SPEED_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")
MARK_RE = re.compile(r"<system\s+version=\"\d+\"\s*>[\s\S]{0,400}?<(?:cpu|pci)\b|"
                     r"<pci\s+busid=\"[^\"]{1,16}\"[^>]{0,400}>\s*<gpu\s+dev=\"\d+\"")
"""What only NCCL's (and RCCL's) topology XML holds: material/kinds.py tells the kind by it. The second form is a
GPU's ``<pci>`` with its ``<gpu dev=...>`` inside, which a paste that starts mid-tree still shows."""
# A GPU's <pci> element and the <gpu> that opens inside it: in a paste that starts mid-tree (no <system>, closing
# tags before any opening one) the only thing that can be read without guessing where the rest hangs.
_FRAGMENT_GPU_RE = re.compile(r"<pci\s+(?P<pci>[^<>]{0,800})>\s*<gpu\s+(?P<gpu>[^<>]{0,400}?)/?>")
_ATTRIBUTE_RE = re.compile(r"([A-Za-z_]{1,32})=\"([^\"]{0,200})\"")


class NcclTopoParseError(ParseError):
    """A topology dump that cannot be read at all, with what was expected."""


def parse_nccl_topo_xml(text: Any) -> dict[str, Any]:
    """The GPUs, NICs and CPUs (NUMA nodes) of an NCCL topology dump; see the module docstring."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise NcclTopoParseError(f"{_WHAT}: expected the XML text NCCL wrote; found {type(text).__name__}")
    text = normalize_paste(text)
    start = _START_RE.search(text)
    if start is None and _FRAGMENT_GPU_RE.search(text):
        return _fragment(text)
    if start is None:
        raise NcclTopoParseError(expected_found(_WHAT, '<system version="1">', excerpt(text, 80),
                                                "Pass the file NCCL_TOPO_DUMP_FILE names, as NCCL wrote it"))
    document = text[start.start():]
    end = document.rfind(_END_TAG)
    if end >= 0:
        document = document[:end + len(_END_TAG)]
    unsafe = refused_declaration(text)  # the whole paste: a declaration before <system> is refused too
    if unsafe is not None:
        raise NcclTopoParseError(expected_found(_WHAT, "NCCL's XML, which declares no entities and no DTD",
                                                excerpt(unsafe, 80), "Refusing it; pass the dump as NCCL wrote it"))
    root, error = pull_parse(document)
    if root is None or root.tag != "system":
        raise NcclTopoParseError(expected_found(_WHAT, "a <system> document", excerpt(document, 80),
                                                f"The XML could not be read ({error or 'another root'}); pass "
                                                "the dump unchanged"))
    out: dict[str, Any] = {"version": _int(root.get("version")), "complete": error is None,
                           "cpus": [], "gpus": [], "nics": [], "pci_ids": []}
    for cpu in root.findall("cpu"):
        numaid = _int(cpu.get("numaid"))
        out["cpus"].append({"numaid": numaid if numaid is not None and numaid >= 0 else None,
                            "numa_unknown": numaid is not None and numaid < 0,
                            "arch": cpu.get("arch"), "vendor": cpu.get("vendor"),
                            "familyid": _int(cpu.get("familyid")), "modelid": _int(cpu.get("modelid"))})
        _walk(cpu, out["cpus"][-1]["numaid"], [], out)
    return out


def _fragment(text: str) -> dict[str, Any]:
    """A dump pasted from the middle of its tree: each GPU's bus id, ``sm``, dev, rank, gdr and link, read from its
    ``<pci>`` and ``<gpu>`` tags alone. What hangs above them (NUMA node, switches) is not in the paste: None and
    [], and ``complete`` False. NVLinks are not read: a cut can fall among them, and a partial count would read as
    a fact."""
    out: dict[str, Any] = {"version": None, "complete": False, "cpus": [], "gpus": [], "nics": [], "pci_ids": []}
    for match in _FRAGMENT_GPU_RE.finditer(text):
        pci = dict(_ATTRIBUTE_RE.findall(match.group("pci")))
        gpu = dict(_ATTRIBUTE_RE.findall(match.group("gpu")))
        out["gpus"].append({
            "dev": _int(gpu.get("dev")), "rank": _int(gpu.get("rank")), "sm": _int(gpu.get("sm")),
            "gdr": _flag(gpu.get("gdr")), "pci_bus_id": _bus_id(pci.get("busid")), "numaid": None,
            **_link(ET.Element("pci", pci)), "switches": [], "nvlinks": []})
    return out


def _walk(node: ET.Element, numaid: int | None, switches: list[str], out: dict[str, Any]) -> None:
    """The <pci> nodes under ``node``; a <pci> holding <pci> is a switch (or bridge) on the way down. A <nic> right
    under the <cpu> is one NCCL found no PCI path for (a virtio NIC in a guest: "is not a PCI device", NCCL attaches
    it to a CPU): no bus id."""
    if node.tag == "cpu":
        _nics(node, None, out)
    for pci in node.findall("pci"):
        bus_id = _bus_id(pci.get("busid"))
        vendor, device = _pci_id(pci.get("vendor")), _pci_id(pci.get("device"))
        if vendor and device:
            out["pci_ids"].append({"pci_bus_id": bus_id, "vendor": vendor, "device": device})
        gpu = pci.find("gpu")
        if gpu is not None:
            out["gpus"].append({
                "dev": _int(gpu.get("dev")), "rank": _int(gpu.get("rank")), "sm": _int(gpu.get("sm")),
                "gdr": _flag(gpu.get("gdr")), "pci_bus_id": bus_id, "numaid": numaid,
                **_link(pci), "switches": list(switches),
                "nvlinks": [{"target": link.get("target"), "count": _int(link.get("count"))}
                            for link in gpu.findall("nvlink")],
            })
        _nics(pci, bus_id, out)
        if pci.find("pci") is not None:
            _walk(pci, numaid, [*switches, bus_id or "?"], out)


def _nics(node: ET.Element, bus_id: str | None, out: dict[str, Any]) -> None:
    for net in node.findall("nic/net"):
        out["nics"].append({"name": net.get("name"), "dev": _int(net.get("dev")), "pci_bus_id": bus_id,
                            "speed_mbps": _int(net.get("speed")), "gdr": _flag(net.get("gdr"))})


def _link(pci: ET.Element) -> dict[str, Any]:
    speed = (pci.get("link_speed") or "").strip() or None
    match = _SPEED_RE.match(speed or "")
    width = _int(pci.get("link_width"))
    return {"link_speed": speed, "link_speed_gts": float(match.group(1)) if match else None,
            "link_width": width if width else None}


def _pci_id(value: str | None) -> str | None:
    """``0x1b36`` as NCCL writes a vendor or device id; None for anything else."""
    match = _PCI_ID_RE.match((value or "").strip())
    return f"0x{match.group(1).lower()}" if match else None


def _bus_id(value: str | None) -> str | None:
    match = _BUS_ID_RE.match((value or "").strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def _int(value: str | None) -> int | None:
    try:
        return int(str(value).strip(), 0)
    except (TypeError, ValueError):
        return None


def _flag(value: str | None) -> bool | None:
    number = _int(value)
    return None if number is None else bool(number)


def emulated_signs(topology: dict[str, Any]) -> dict[str, Any]:
    """What in the dump points at a topology a hypervisor emulated, each None when the dump cannot tell:

    * ``gpus_on_root_bus``: every GPU on bus 00 of its domain. A discrete GPU is a PCIe endpoint behind a root
      port, so on real hardware its bus is never 00; a flat emulated bus (QEMU's i440fx, q35 without a root
      port per device) puts it there. The strong sign.
    * ``no_link_speed``: no GPU has a PCIe link speed: NCCL found no ``max_link_speed`` (conventional PCI, as
      emulated) or no sysfs path at all. Weak alone: a container without /sys shows the same.
    * ``numa_unknown``: every CPU node is ``numaid="-1"``: no NUMA layout given (a guest without one, or a
      single-socket host). Weak alone.

    ``gpus``: where each GPU sits (bus id, NUMA node, link), for the evidence text."""
    gpus = topology.get("gpus") or []
    cpus = topology.get("cpus") or []
    placed = [gpu for gpu in gpus if gpu.get("pci_bus_id")]
    return {
        "gpus_on_root_bus": all(gpu["pci_bus_id"].split(":")[1] == "00" for gpu in placed) if placed else None,
        "no_link_speed": all(gpu.get("link_speed") is None for gpu in gpus) if gpus else None,
        "numa_unknown": all(cpu.get("numa_unknown") for cpu in cpus) if cpus else None,
        "gpus": [f"GPU {gpu.get('dev')} at {gpu.get('pci_bus_id') or 'an unknown bus id'}" for gpu in gpus],
    }
