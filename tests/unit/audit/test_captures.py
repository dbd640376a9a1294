"""Captures of real host profiles, replayed through the whole audit.

Each capture in tests/captures/ stands for a kind of host this project meets
(tests/captures/SOURCES.md says which public reports each one follows). The
tests assert the facts and findings that host really gives, then change
captures in memory to reach every remaining rule and every way a capture can
be damaged: the audit must still answer, or refuse the capture cleanly.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import (
    DPKG_GPU_PACKAGES,
    FABRIC_MANAGER_PACKAGE,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.packages import APT_CONF_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import (
    CaptureError,
    CommandResult,
    LiveSource,
    ReplaySource,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import lspci, pci_common, pci_config_space
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.captures import (
    ALL,
    CAPTURES,
    H100,
    HYPERVISOR,
    I440FX,
    INCIDENT,
    MICROVM,
    PRO6000,
    RTX4090,
    audit,
    audited,
    capture,
)
from tests.unit.captures import read as _read

pytestmark = pytest.mark.capture

PCI = "/sys/bus/pci/devices"
GROUPS = "/sys/kernel/iommu_groups"


def _load_builder() -> Any:
    spec = importlib.util.spec_from_file_location("capture_build", CAPTURES / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


BUILD = _load_builder()


def ids(result: dict[str, Any], severity: str) -> set[str]:
    return {f["id"] for f in result["findings"] if f["severity"] == severity}


def finding(result: dict[str, Any], finding_id: str) -> dict[str, Any]:
    matches = [f for f in result["findings"] if f["id"] == finding_id]
    assert len(matches) == 1, [f["id"] for f in result["findings"]]
    return matches[0]


def off_diagonal(matrix: list[list[str]]) -> set[str]:
    return {cell for i, row in enumerate(matrix) for j, cell in enumerate(row) if i != j}


def gpus_on_pci(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in result["pci"]["nvidia_devices"] if d["kind"] == "gpu"]


# ---------------------------------------------------------------------------
# The captures themselves


@pytest.mark.parametrize("name", sorted(BUILD.HOSTS))
def test_committed_capture_is_what_build_py_writes(name: str) -> None:
    assert _read(name) == BUILD.build(name), f"run: python tests/captures/build.py {name}"


@pytest.mark.parametrize("name", ALL)
def test_capture_has_format_note_and_every_section(name: str) -> None:
    data = capture(name)
    assert data["format"] == "gpuhost-capture/1"
    assert len(data["note"]) > 100
    assert {"files", "dirs", "links", "realpaths", "commands", "nvml"} <= set(data)


class StrictReplay(ReplaySource):
    """Replays a capture and records every read the capture has no entry for.

    A live capture records absent paths as null, so a complete capture answers
    every question the audit asks, even if the answer is "not there".
    """

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.unanswered: list[str] = []

    def _check(self, section: str, key: str) -> None:
        if key not in self._section(section):
            self.unanswered.append(f"{section}: {key}")

    def read_bytes(self, path: str) -> bytes | None:
        self._check("files", path)
        return super().read_bytes(path)

    def listdir(self, path: str) -> list[str] | None:
        self._check("dirs", path)
        return super().listdir(path)

    def readlink(self, path: str) -> str | None:
        self._check("links", path)
        return super().readlink(path)

    def realpath(self, path: str) -> str | None:
        self._check("realpaths", path)
        return super().realpath(path)

    def run(self, argv: list[str]) -> CommandResult:
        self._check("commands", " ".join(argv))
        return super().run(argv)

    def nvml(self) -> dict[str, Any]:
        if "nvml" not in self.capture:
            self.unanswered.append("nvml")
        return super().nvml()


# The proxmox subset's one probe came after these captures: unanswered, it reads as absent, "not a
# Proxmox VE node". The Proxmox host captures that hold VM configs are checked in test_proxmox.py.
# nvidia-smi -q -x, read without NVML, came after them too: unanswered, the audit reads --query-gpu
# alone, as these captures were made with (the no-NVML guest holds it; test_no_nvml.py). The kernel's release,
# read for the drift between audits, came after them too: unanswered, it is null. So did the fabric manager's
# package version, read while the service runs (HGX H100): unanswered, it is null (not read). So did nvidia_uvm's
# uvm_disable_hmm (audit/host_settings.py), and the package reads (audit/packages.py): unanswered, they are
# null and the HMM and package findings stay silent.
READS_ADDED_AFTER_THESE_CAPTURES = {"dirs: /etc/pve/qemu-server", "commands: nvidia-smi -q -x",
                                    "files: /proc/sys/kernel/osrelease",
                                    "commands: " + " ".join(FABRIC_MANAGER_PACKAGE.argv),
                                    "files: /sys/module/nvidia_uvm/parameters/uvm_disable_hmm",
                                    f"commands: {DPKG_GPU_PACKAGES.key}", f"dirs: {APT_CONF_DIR}"}


@pytest.mark.parametrize("name", ALL)
def test_capture_answers_every_read_of_the_audit(name: str) -> None:
    source = StrictReplay(capture(name))
    facts.audit(source, facts.resolve_subsets(["all"]), RuleOptions())
    assert [read for read in source.unanswered if read not in READS_ADDED_AFTER_THESE_CAPTURES] == []


# The generator's bytes, read back by the project's own parsers: what was described is what decodes.


def _described(name: str) -> tuple[Any, dict[str, Any]]:
    host = BUILD.HOSTS[name]()
    return host, BUILD.capture(host)


@pytest.mark.parametrize("name", sorted(BUILD.HOSTS))
def test_config_space_decodes_to_the_described_device(name: str) -> None:
    host, data = _described(name)
    by_bdf = {dev.bdf: dev for dev in host.devices}
    configs = {path.split("/")[-2]: ReplaySource(data).read_bytes(path) for path in data["files"]
               if path.endswith("/config")}
    assert configs
    for bdf, raw in configs.items():
        dev = by_bdf[bdf]
        config = pci_config_space.parse_config_space(raw)
        assert (config.vendor_id, config.device_id) == (f"{dev.vendor:04x}", f"{dev.device:04x}"), bdf
        assert config.class_code == f"{dev.cls:06x}", bdf
        if not host.as_root:
            assert len(raw) == 64 and not config.capabilities_readable, bdf
            continue
        assert config.warnings == [], (bdf, config.warnings)
        assert len(raw) == (4096 if dev.port else 256), bdf
        if dev.port is None:
            assert config.pcie is None and not config.extended_readable, bdf
            continue
        assert config.pcie is not None and config.pcie.port_type == dev.port, bdf
        assert (config.pcie.link_speed_gts, config.pcie.link_width) == (dev.link.speed, dev.link.width), bdf
        assert (config.pcie.max_link_speed_gts, config.pcie.max_link_width) == (dev.link.max_speed,
                                                                                dev.link.max_width), bdf
        if dev.acs is None:
            assert config.acs is None, bdf
        else:
            control = pci_common.AcsFlags.from_register(BUILD._acs_bits(dev.acs.ctrl))
            assert config.acs is not None and config.acs.control == control, bdf
        assert [(r.index, r.current_size, r.max_size) for r in config.resizable_bars] == \
            [(r.bar, r.size, r.max_size) for r in dev.rebar], bdf


def test_unprivileged_lspci_output_reads_as_access_denied() -> None:
    data = capture(RTX4090)
    listed = lspci.parse_lspci_vvv(data["commands"]["lspci -vvv -D"]["stdout"])
    assert sorted(listed) == data["dirs"][PCI]
    assert all(device.capabilities_access_denied and device.acs is None for device in listed.values())
    assert listed["0000:16:00.0"].driver == "nvidia"


# ---------------------------------------------------------------------------
# 1. DGX/HGX H100: the healthy reference


def test_h100_is_fit_with_nvlink_everywhere() -> None:
    result = audited(H100)
    virt = result["virtualization"]
    assert (virt["type"], virt["hypervisor"], virt["machine_type"], virt["container"]) == \
        ("bare_metal", None, None, None)
    assert virt["numa_nodes"] == [0, 1]
    gpus = result["gpus"]
    assert (gpus["source"], gpus["count"], gpus["nvidia_smi_count"]) == ("nvml", 8, 8)
    assert gpus["driver_version"] == "550.127.05" and gpus["cuda_driver_version"] == "12.4"
    for device in gpus["devices"]:
        assert device["name"] == "NVIDIA H100 80GB HBM3"
        assert (device["compute_capability"], device["sm"]) == ("9.0", "sm_90")
        assert (device["memory_total_mib"], device["bar1_total_mib"]) == (81559, 131072)
        assert device["nvlink"] == {"links": 18, "active": 18}
        assert device["persistence_mode"] is True and device["ecc"] is True and device["brand"] == "nvidia"
    assert [d["pci_bus_id"][5:7] for d in gpus["devices"]] == ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
    for matrix in ("read", "write", "nvlink", "atomics"):
        assert off_diagonal(result["p2p"][matrix]) == {"OK"}, matrix
    topology = result["topology"]
    assert off_diagonal(topology["matrix"]) == {"NV18"}
    assert topology["numa_affinity"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert topology["cpu_affinity"][0] == "0-55,112-167"
    assert result["iommu"]["enabled"] is False and result["iommu"]["mode"] is None
    kinds = [d["kind"] for d in result["pci"]["nvidia_devices"]]
    assert kinds.count("gpu") == 8 and kinds.count("nvswitch") == 4

    gpu0 = gpus_on_pci(result)[0]
    assert gpu0["link"] == {"speed_current_gts": 32.0, "speed_max_gts": 32.0, "gen_current": 5, "gen_max": 5,
                            "width_current": 16, "width_max": 16}
    assert [u["port_type"] for u in gpu0["upstream"]] == ["root_port", "upstream_port", "downstream_port"]
    switch_port = gpu0["upstream"][2]
    assert (switch_port["vendor_id"], switch_port["device_id"], switch_port["acs_source"]) == ("1000", "c030",
                                                                                              "config")
    assert not any(switch_port["acs_ctrl"].values())
    assert gpu0["resizable_bar"] == [{"bar": 1, "current_size_bytes": 128 << 30, "max_supported_bytes": 128 << 30}]

    assert ids(result, "critical") == set() and ids(result, "warning") == set()
    assert result["summary"]["verdict"] == "fit" and result["summary"]["p2p"] == "ok"
    assert result["problems"] == []


# ---------------------------------------------------------------------------
# 2. 8x RTX PRO 6000 on one EPYC, bare metal: P2P granted


def test_rtx_pro_6000_bare_metal_has_p2p_and_passthrough_iommu() -> None:
    result = audited(PRO6000)
    assert result["virtualization"]["type"] == "bare_metal"
    gpus = result["gpus"]
    assert gpus["count"] == 8
    assert {d["name"] for d in gpus["devices"]} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {(d["compute_capability"], d["memory_total_mib"], d["bar1_total_mib"]) for d in gpus["devices"]} == \
        {("12.0", 97887, 131072)}
    assert gpus["driver_version"] == "580.95.05" and gpus["cuda_driver_version"] == "13.0"
    assert off_diagonal(result["p2p"]["read"]) == off_diagonal(result["p2p"]["write"]) == {"OK"}
    assert off_diagonal(result["p2p"]["atomics"]) == off_diagonal(result["p2p"]["nvlink"]) == {"NS"}
    matrix = result["topology"]["matrix"]
    assert (matrix[0][1], matrix[2][3], matrix[0][2], matrix[1][7]) == ("PHB", "PHB", "NODE", "NODE")

    iommu = result["iommu"]
    assert (iommu["enabled"], iommu["mode"], iommu["mode_source"], iommu["vendor"]) == \
        (True, "passthrough", "iommu group types", "amd")
    assert iommu["cmdline"] == {"iommu": "pt"}
    for gpu in gpus_on_pci(result):
        assert gpu["device_id"] == "2bb5" and gpu["driver"] == "nvidia"
        assert gpu["iommu_group"] is not None and gpu["iommu_group_peers"] == []
        (root_port,) = gpu["upstream"]
        assert (root_port["device_id"], root_port["port_type"]) == ("14ab", "root_port")
        assert {bit for bit, on in root_port["acs_ctrl"].items() if on} == {"SV", "RR", "CR", "UF"}

    # The kernel's ACS bits on root ports are not a P2P problem: traffic between root ports crosses the
    # root complex anyway, and NVML grants P2P here.
    assert ids(result, "critical") == set() and ids(result, "warning") == set()
    assert result["summary"]["p2p"] == "ok"


# ---------------------------------------------------------------------------
# 3. The incident: Proxmox q35 guest, no P2P


def test_incident_guest_is_a_q35_vm_without_p2p() -> None:
    result = audited(INCIDENT)
    virt = result["virtualization"]
    assert (virt["type"], virt["hypervisor"], virt["machine_type"], virt["container"]) == \
        ("vm", "kvm", "q35", None)
    assert virt["virtual_iommu"] is False and virt["product_uuid"]
    assert virt["dmi"]["product_name"] == "Standard PC (Q35 + ICH9, 2009)"
    signals = {e["signal"] for e in virt["evidence"]}
    assert {"/proc/cpuinfo", "dmesg", "DMI", "PCI 0000:00:00.0", "systemd-detect-virt --vm"} <= signals

    gpus = result["gpus"]
    assert gpus["count"] == 8 and gpus["cuda_driver_version"] == "13.1"
    assert {d["virtualization_mode"] for d in gpus["devices"]} == {"passthrough"}
    for matrix in ("read", "write", "atomics", "nvlink"):
        assert off_diagonal(result["p2p"][matrix]) == {"NS"}, matrix
    assert off_diagonal(result["topology"]["matrix"]) == {"PHB"}
    assert result["topology"]["numa_affinity"] == [None] * 8
    assert result["iommu"]["enabled"] is False
    for gpu in gpus_on_pci(result):
        assert gpu["numa_node"] is None
        (port,) = gpu["upstream"]
        assert (port["vendor_id"], port["device_id"]) == ("1b36", "000c")
        assert port["description"] == "QEMU PCIe root port (pcie-root-port)"

    assert ids(result, "critical") == {"p2p_not_supported"} and ids(result, "warning") == set()
    p2p = finding(result, "p2p_not_supported")
    assert p2p["evidence"]["statuses"] == ["NS"] and p2p["evidence"]["pairs_without_p2p"] == 56
    assert "machine q35" in p2p["summary"]
    for n in range(8):
        assert f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" in p2p["remedy"]
    assert "hidden=1" in p2p["remedy"] and "NCCL_P2P_DISABLE=1" in p2p["remedy"]
    assert result["summary"]["verdict"] == "unfit" and result["summary"]["p2p"] == "none"


def test_incident_remedy_follows_the_tensor_parallel_group() -> None:
    result = audit(capture(INCIDENT), tensor_parallel_gpus=[0, 1, 2, 3])
    p2p = finding(result, "p2p_not_supported")
    assert p2p["evidence"]["pairs_without_p2p"] == 12
    assert "-set device.hostpci3.x-nv-gpudirect-clique=0" in p2p["remedy"]
    assert "hostpci4." not in p2p["remedy"]


# ---------------------------------------------------------------------------
# 4. i440fx guest: no PCIe at all, GPU facts from nvidia-smi


def test_i440fx_guest_is_read_through_nvidia_smi() -> None:
    result = audited(I440FX)
    virt = result["virtualization"]
    assert (virt["type"], virt["hypervisor"], virt["machine_type"]) == ("vm", "kvm", "i440fx")
    gpus = result["gpus"]
    assert gpus["source"] == "nvidia-smi" and gpus["count"] == 2
    assert gpus["nvml_error"] == "NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    assert [d["name"] for d in gpus["devices"]] == ["NVIDIA RTX A6000"] * 2
    assert [d["pci_bus_id"] for d in gpus["devices"]] == ["0000:00:10.0", "0000:00:11.0"]
    assert {(d["compute_capability"], d["memory_total_mib"], d["persistence_mode"]) for d in gpus["devices"]} == \
        {("8.6", 49140, False)}
    assert set(result["p2p"]) == {"read", "write", "nvlink", "atomics"}
    assert off_diagonal(result["p2p"]["read"]) == {"NS"}
    assert result["topology"]["source"] == "nvidia-smi"
    assert result["topology"]["matrix"] == [["X", "PHB"], ["PHB", "X"]]
    assert result["topology"]["cpu_affinity"] == [None, None]

    nvidia = result["pci"]["nvidia_devices"]
    assert sorted(d["kind"] for d in nvidia) == ["audio", "audio", "gpu", "gpu"]
    for gpu in gpus_on_pci(result):
        assert gpu["upstream"] == [] and gpu["resizable_bar"] is None
        assert set(gpu["link"].values()) == {None}

    assert ids(result, "critical") == {"p2p_not_supported", "qemu_machine_i440fx"}
    assert ids(result, "warning") == set()
    assert {"nvml_unavailable", "persistence_mode_off"} <= ids(result, "info")
    assert "switch it to q35 first" in finding(result, "p2p_not_supported")["remedy"]
    assert result["problems"] == []


# ---------------------------------------------------------------------------
# 5. 4x GeForce RTX 4090 workstation, audited without root


def test_rtx4090_workstation_without_root() -> None:
    result = audited(RTX4090)
    assert result["virtualization"]["type"] == "bare_metal"
    gpus = result["gpus"]
    assert gpus["count"] == 4
    assert {(d["name"], d["brand"], d["bar1_total_mib"], d["compute_capability"]) for d in gpus["devices"]} == \
        {("NVIDIA GeForce RTX 4090", "geforce", 256, "8.9")}
    read = result["p2p"]["read"]
    assert (read[0][1], read[1][2], read[0][3], read[3][2]) == ("GNS", "GNS", "CNS", "CNS")

    pci = gpus_on_pci(result)
    assert [g["link"]["width_current"] for g in pci] == [16, 16, 16, 8]
    for gpu in pci:
        assert gpu["resizable_bar"] is None  # 64 bytes of config space: no capability list without root
        (root_port,) = gpu["upstream"]
        assert (root_port["acs_ctrl"], root_port["acs_source"]) == (None, "unreadable")
    assert {p["what"] for p in result["problems"]} == {"dmesg", "/sys/class/dmi/id/product_uuid"}

    assert ids(result, "critical") == {"p2p_not_supported"}
    assert ids(result, "warning") == {"small_bar1", "pcie_link_narrow"}
    assert {"acs_unreadable", "audit_incomplete"} <= ids(result, "info")
    p2p = finding(result, "p2p_not_supported")
    assert p2p["evidence"]["statuses"] == ["CNS", "GNS"]
    assert "CNS:" in p2p["remedy"] and "GNS:" in p2p["remedy"]
    assert finding(result, "pcie_link_narrow")["evidence"]["links"] == ["0000:7c:00.0: x8 of x16"]


# ---------------------------------------------------------------------------
# 6. The Proxmox hypervisor: GPUs on vfio-pci


def test_proxmox_host_passes_its_gpus_through() -> None:
    result = audited(HYPERVISOR)
    assert result["virtualization"]["type"] == "bare_metal"
    iommu = result["iommu"]
    assert (iommu["enabled"], iommu["mode"], iommu["vendor"]) == (True, "passthrough", "amd")
    loaded = {name for name, on in iommu["modules"].items() if on}
    assert {"vfio", "vfio_iommu_type1", "vfio_pci", "kvm", "kvm_amd"} <= loaded
    assert not loaded & {"nvidia", "nouveau"}
    for gpu in gpus_on_pci(result):
        assert gpu["driver"] == "vfio-pci"
        assert gpu["iommu_group_peers"] == [gpu["bdf"][:-1] + "1"]  # its audio function, nothing else
    audio = [d for d in result["pci"]["nvidia_devices"] if d["kind"] == "audio"]
    assert len(audio) == 4 and {d["driver"] for d in audio} == {"vfio-pci"}
    gpus = result["gpus"]
    assert gpus["source"] is None and gpus["count"] == 0
    assert gpus["nvidia_smi_error"] == "nvidia-smi is not installed"

    assert ids(result, "critical") == set() and ids(result, "warning") == set()
    vfio = finding(result, "gpus_bound_to_vfio")
    assert vfio["severity"] == "info"
    assert vfio["evidence"]["bdfs"] == ["0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"]


# ---------------------------------------------------------------------------
# 7. A real capture: a Firecracker microVM without a GPU


def test_firecracker_microvm_is_a_kvm_guest_with_no_gpu() -> None:
    result = audited(MICROVM)
    virt = result["virtualization"]
    assert (virt["type"], virt["hypervisor"], virt["container"]) == ("vm", "kvm", None)
    assert virt["platform"] == "firecracker" and virt["machine_type"] is None
    assert set(virt["dmi"].values()) == {None}
    weak = {e["signal"] for e in virt["evidence"] if e["weight"] == "weak"}
    assert {"/.dockerenv", "systemd-detect-virt --container"} <= weak
    assert result["iommu"]["enabled"] is False
    assert result["pci"]["nvidia_devices"] == []
    assert result["gpus"]["nvml_error"].startswith("NVMLError_LibraryNotFound")
    assert ids(result, "critical") == {"no_nvidia_gpu"}
    assert result["summary"]["verdict"] == "unfit"


# ---------------------------------------------------------------------------
# Variants: one change to a capture reaches each remaining rule


def _drop_gpu(data: dict[str, Any], index: int) -> None:
    """The GPU disappears from NVML and nvidia-smi -L, as when another driver holds it."""
    nvml = data["nvml"]
    del nvml["devices"][index]
    for device in nvml["devices"]:
        device["index"] = nvml["devices"].index(device)
    for name, rows in [*nvml["p2p"].items(), ("topology", nvml["topology"])]:
        kept = [[cell for j, cell in enumerate(row) if j != index] for i, row in enumerate(rows) if i != index]
        if name == "topology":
            nvml["topology"] = kept
        else:
            nvml["p2p"][name] = kept
    listing = data["commands"]["nvidia-smi -L"]
    lines = listing["stdout"].splitlines(keepends=True)
    del lines[index]
    listing["stdout"] = "".join(f"GPU {n}:{line.split(':', 1)[1]}" for n, line in enumerate(lines))


def test_nouveau_holding_a_gpu_is_critical() -> None:
    data = capture(PRO6000)
    data["dirs"]["/sys/module"] = sorted([*data["dirs"]["/sys/module"], "nouveau"])
    gpu0 = "0000:01:00.0"
    data["links"][f"{PCI}/{gpu0}/driver"] = data["links"][f"{PCI}/{gpu0}/driver"].replace("/nvidia", "/nouveau")
    _drop_gpu(data, 0)
    result = audit(data)
    nouveau = finding(result, "nouveau_loaded")
    assert nouveau["severity"] == "critical"
    assert nouveau["evidence"] == {"module_loaded": True, "devices_bound_to_nouveau": [gpu0]}
    assert "gpu_count_mismatch" not in ids(result, "critical")  # 7 GPUs on nvidia, 7 in NVML, 7 listed


def test_nvidia_smi_listing_one_gpu_fewer_is_a_count_mismatch() -> None:
    data = capture(H100)
    listing = data["commands"]["nvidia-smi -L"]
    listing["stdout"] = "".join(listing["stdout"].splitlines(keepends=True)[:-1])
    mismatch = finding(audit(data), "gpu_count_mismatch")
    assert mismatch["severity"] == "critical"
    assert mismatch["evidence"] == {"pci_with_nvidia_driver": 8, "nvml": 8, "nvidia_smi": 7}


def _with_acs(name: str, bdfs: set[str], ctrl: frozenset[str]) -> dict[str, Any]:
    host = BUILD.HOSTS[name]()
    host.devices = [replace(d, acs=replace(d.acs, ctrl=ctrl)) if d.bdf in bdfs else d for d in host.devices]
    return BUILD.capture(host)


def test_acs_redirect_on_a_switch_port_between_gpus_is_a_warning() -> None:
    result = audit(_with_acs(H100, {"0000:17:00.0"}, frozenset({"RR", "CR"})))
    acs = finding(result, "acs_redirect_between_gpus")
    assert acs["severity"] == "warning"
    assert acs["evidence"]["bridges"] == {"0000:17:00.0": {"acs_ctrl_enabled": ["RR", "CR"],
                                                           "port_type": "downstream_port"}}
    assert "setpci" in acs["remedy"]


def test_acs_redirect_on_root_ports_only_is_not_reported() -> None:
    root_ports = {"0000:15:01.0", "0000:27:01.0"}
    result = audit(_with_acs(H100, root_ports, frozenset({"SV", "RR", "CR", "UF"})))
    assert "acs_redirect_between_gpus" not in ids(result, "warning")


def test_gpu_sharing_its_iommu_group_with_a_nic_is_a_warning() -> None:
    data = capture(HYPERVISOR)
    gpu0, nic = "0000:01:00.0", "0000:c2:00.0"
    gpu_group = data["links"][f"{PCI}/{gpu0}/iommu_group"].rsplit("/", 1)[1]
    nic_group = next(g for g in data["dirs"][GROUPS] if nic in (data["dirs"].get(f"{GROUPS}/{g}/devices") or []))
    data["dirs"][f"{GROUPS}/{gpu_group}/devices"] = sorted([*data["dirs"][f"{GROUPS}/{gpu_group}/devices"], nic])
    data["dirs"][GROUPS].remove(nic_group)
    del data["dirs"][f"{GROUPS}/{nic_group}/devices"]
    shared = finding(audit(data), "iommu_group_shared")
    assert shared["severity"] == "warning"
    assert shared["evidence"]["groups"] == {gpu0: {"group": gpu_group, "also_in_group": [nic]}}


def test_consumer_gpus_granted_p2p_must_prove_it() -> None:
    data = capture(RTX4090)
    count = len(data["nvml"]["devices"])
    data["nvml"]["p2p"]["read"] = [[None if i == j else 0 for j in range(count)] for i in range(count)]
    result = audit(data)
    unproven = finding(result, "consumer_p2p_unproven")
    assert unproven["severity"] == "warning" and unproven["evidence"]["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert "p2p_not_supported" not in ids(result, "critical")
    assert result["summary"]["p2p"] == "ok"


def test_persistence_mode_off_is_reported() -> None:
    data = capture(H100)
    for device in data["nvml"]["devices"]:
        device["persistence_mode"] = 0
    off = finding(audit(data), "persistence_mode_off")
    assert off["severity"] == "info" and off["evidence"]["gpus"] == [f"GPU{n}" for n in range(8)]


# ---------------------------------------------------------------------------
# Damaged captures: facts with the damage noted, or a clean CaptureError; nothing else


def _set(section: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data[section][key] = value
    return change


def _set_nvml(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target = data["nvml"]
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
    return change


def _b64(raw: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(raw).decode()}


GPU = f"{PCI}/0000:18:00.0"  # GPU0 of the H100 capture
NOTED = {"noted"}  # facts come back and the damage is listed under problems / audit_incomplete
CLEAN = {"clean"}  # facts come back; the damaged value is simply not used
REFUSED = {"refused"}  # the capture is refused with CaptureError
EITHER = NOTED | REFUSED
ANY = NOTED | CLEAN | REFUSED  # anything but a crash

DAMAGE = [
    ("resource-garbled", _set("files", f"{GPU}/resource", "not a resource file\n"), NOTED),
    ("config-all-ones", _set("files", f"{GPU}/config", _b64(b"\xff" * 4096)), NOTED),
    ("config-truncated", _set("files", f"{GPU}/config", _b64(b"\xde\x10\x30\x23")), NOTED),
    ("config-bad-base64", _set("files", f"{GPU}/config", {"base64": "%%%"}), REFUSED),
    ("config-a-number", _set("files", f"{GPU}/config", 42), REFUSED),
    ("link-speed-garbled", _set("files", f"{GPU}/current_link_speed", "fast\n"), NOTED),
    ("link-width-garbled", _set("files", f"{GPU}/max_link_width", "sixteen\n"), NOTED),
    ("file-unreadable", _set("files", f"{GPU}/resource", {"error": "PermissionError: Permission denied"}), NOTED),
    ("vendor-garbled", _set("files", f"{PCI}/0000:15:00.0/vendor", "0xZZZZ\n"), CLEAN),
    ("cmdline-binary", _set("files", "/proc/cmdline", _b64(b"\x00\xff\xfe")), CLEAN),
    ("devices-not-a-list", _set("dirs", PCI, "0000:18:00.0"), REFUSED),
    ("dmesg-not-a-mapping", _set("commands", "dmesg", "oops"), REFUSED),
    ("smi-list-garbled", _set("commands", "nvidia-smi -L", {"rc": 0, "stdout": "garbage\n"}), NOTED),
    ("nvml-name-a-number", _set_nvml(("devices", 0, "name"), 12), ANY),
    ("nvml-nvlinks-garbled", _set_nvml(("devices", 0, "nvlinks"), "18"), ANY),
    ("nvml-errors-garbled", _set_nvml(("devices", 0, "errors"), ["NotSupported"]), ANY),
    ("nvml-not-a-mapping", lambda data: data.__setitem__("nvml", ["not", "a", "snapshot"]), REFUSED),
    ("nvml-device-not-a-mapping", _set_nvml(("devices", 0), "GPU0"), ANY),
    ("nvml-devices-not-a-list", _set_nvml(("devices",), "eight"), ANY),
    ("nvml-p2p-not-a-mapping", _set_nvml(("p2p",), "OK"), ANY),
    ("nvml-topology-garbled", _set_nvml(("topology",), [["x"], None, 7]), ANY),
    ("nvml-bus-id-a-number", _set_nvml(("devices", 0, "pci_bus_id"), 24), ANY),
    ("link-target-a-number", _set("links", f"{GPU}/iommu_group", 12), EITHER),
    ("realpath-a-number", _set("realpaths", GPU, 12), EITHER),
]


@pytest.mark.parametrize(("change", "allowed"), [pytest.param(c, o, id=i) for i, c, o in DAMAGE])
def test_damaged_capture(change: Callable[[dict[str, Any]], None], allowed: set[str]) -> None:
    data = capture(H100)
    change(data)
    try:
        result = audit(data)
    except CaptureError:
        assert "refused" in allowed, "the audit refused a capture it should have read"
        return
    assert allowed != REFUSED, "the capture should have been refused with CaptureError"
    assert result["summary"]["verdict"] in ("fit", "fit, with warnings", "unfit")
    if allowed == NOTED:
        assert result["problems"], "the damage should be listed under problems"
        assert "audit_incomplete" in ids(result, "info")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=40)
    | st.builds(lambda raw: {"base64": base64.b64encode(raw).decode()}, st.binary(max_size=300)),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from([INCIDENT, RTX4090, I440FX, HYPERVISOR]), data=st.data())
def test_any_damaged_entry_gives_facts_or_a_clean_capture_error(name: str, data: st.DataObject) -> None:
    damaged = copy.deepcopy(capture(name))
    section = data.draw(st.sampled_from(["files", "dirs", "links", "realpaths", "commands", "nvml"]))
    if section == "nvml":
        keys = sorted(damaged["nvml"]) or ["error"]
        target = damaged["nvml"]
    else:
        keys = sorted(damaged[section])
        target = damaged[section]
    key = data.draw(st.sampled_from(keys))
    target[key] = data.draw(JSON_VALUES)
    try:
        result = audit(damaged)
    except CaptureError:
        return
    assert {"findings", "summary", "problems"} <= set(result)


# ---------------------------------------------------------------------------
# A live capture of this machine replays to the same facts


def test_live_capture_of_this_machine_replays_to_the_same_facts() -> None:
    subsets, options = facts.resolve_subsets(["all"]), RuleOptions()
    live = LiveSource(record=True)
    first = json.loads(json.dumps(facts.audit(live, subsets, options)))
    saved = json.loads(json.dumps(live.capture))
    replayed = json.loads(json.dumps(facts.audit(ReplaySource(saved), subsets, options)))
    assert replayed == first
