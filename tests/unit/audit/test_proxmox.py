"""The Proxmox VE host audit: the qemu-server config parser, the VM facts, the host-side rules,
and the link from a guest's audit to the VM that runs it.

Configs are real-format fixtures (tests/fixtures/proxmox/, sources in its SOURCES.md) and the two
captures of the incident's hypervisor (tests/captures/proxmox-host-8xRTXPRO6000-*.json). Every rule
is reached by one change to a capture: a VM config added to, or edited in, a host capture.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import gpu_audit_report
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import DPKG_GPU_PACKAGES
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.packages import APT_CONF_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.proxmox_vm import HostView, vm_facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CommandResult, ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    parse_pci_mapping,
    parse_vm_config,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render as report
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import (
    enrich_guest_findings,
    link_guest_to_host,
    plan_vm,
    uuid_variants,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths
from tests.unit.captures import audit, audited, capture
from tests.unit.modules import run_module

FIXTURES = paths.FIXTURES / "proxmox"
NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
CLIQUE_OK = "proxmox-host-8xRTXPRO6000-vm-clique-ok"
INCIDENT_GUEST = "proxmox-q35-guest-8xRTXPRO6000-p2p-NS"
I440FX_GUEST = "proxmox-i440fx-guest-2xA6000"
FOUR_GPU_HOST = "proxmox-host-4xRTXPRO6000-vfio"  # Max-Q GPUs with an audio function each
QEMU_SERVER = "/etc/pve/qemu-server"
GROUPS = "/sys/kernel/iommu_groups"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_bytes().decode("utf-8")


def found(result: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["id"], f["severity"]) for f in result["findings"]}


def finding(result: dict[str, Any], finding_id: str) -> dict[str, Any]:
    matches = [f for f in result["findings"] if f["id"] == finding_id]
    assert len(matches) == 1, [f["id"] for f in result["findings"]]
    return matches[0]


def with_vms(name: str, configs: dict[int, str], **files: str | None) -> dict[str, Any]:
    """A host capture that is now a Proxmox VE node with these VM configs."""
    data = capture(name)
    data["dirs"][QEMU_SERVER] = [f"{vmid}.conf" for vmid in configs]
    for vmid, text in configs.items():
        data["files"][f"{QEMU_SERVER}/{vmid}.conf"] = text
    data["files"]["/proc/sys/kernel/hostname"] = "pve-lab\n"
    data["files"].update(files)
    data["commands"]["pveversion"] = {"rc": 0, "stdout": "pve-manager/8.2.7/3e0176e6bb2ade3b (running kernel: "
                                                        "6.8.12-4-pve)\n", "stderr": ""}
    return data


def four_gpu_vm(*lines: str, hostpci: tuple[str, ...] = ("0000:01:00.0,pcie=1", "0000:41:00.0,pcie=1")) -> str:
    """A VM on the 4-GPU hypervisor; `lines` are added to (or replace) the defaults."""
    config = {"bios": "ovmf", "cores": "16", "cpu": "host", "machine": "q35", "memory": "131072",
              "name": "lab", "balloon": "0", "smbios1": "uuid=6f1e2d3c-4b5a-4978-8e1f-0a2b3c4d5e6f", "sockets": "1"}
    config.update({f"hostpci{n}": value for n, value in enumerate(hostpci)})
    for line in lines:
        key, _sep, value = line.partition(": ")
        if value:
            config[key] = value
        else:
            config.pop(key.rstrip(":"), None)
    return "".join(f"{k}: {v}\n" for k, v in sorted(config.items()))


# ---------------------------------------------------------------------------
# The parser, on real-format configs


def test_clique_ok_config_parses_with_snapshot_and_description() -> None:
    config = parse_vm_config(fixture("q35-8gpu-clique-ok_pve8.3.conf"))
    assert config.warnings == []
    assert config.description == ("Llama-3-70B on SGLang, TP4 x2 (two cliques would split it; one clique here)\n"
                                  "Contact: ml-platform")
    assert list(config.snapshots) == ["before-driver-580"]
    snapshot = config.snapshots["before-driver-580"]
    assert snapshot.description == "state before the 580 driver upgrade"
    assert snapshot.options["runningmachine"] == "pc-q35-9.0+pve0" and "hostpci7" not in snapshot.options
    assert config.current.options["parent"] == "before-driver-580"
    vm = vm_facts(130, config, HostView(phys_bits=52))
    assert (vm["machine_type"], vm["bios"], vm["cpu_type"], vm["cpu_hidden"]) == ("q35", "ovmf", "host", False)
    assert vm["clique"] == {f"hostpci{n}": 0 for n in range(8)}
    assert [e["bdfs"] for e in vm["hostpci"]][:2] == [["0000:18:00.0"], ["0000:2a:00.0"]]
    assert all(e["pcie"] and e["functions_named"] and e["qemu_ids"] == [e["id"]] for e in vm["hostpci"])
    assert (vm["numa"], vm["sockets"], vm["cores"], vm["vcpus"], vm["hugepages"], vm["balloon"]) == \
        (True, 2, 32, 64, "1024", 0)
    assert vm["numa_nodes"]["numa1"] == {"cpus": "32-63", "hostnodes": "1", "memory_mib": 393216, "policy": "bind",
                                         "warnings": []}
    assert (vm["memory_mib"], vm["mmio64_mb"], vm["smbios_uuid"]) == \
        (786432, 2097152, "7c0d9f4e-2b1a-4f6e-9d3c-5a8b7e6f1c20")
    assert vm["snapshots"] == ["before-driver-580"] and vm["pending"] == {}


def test_hidden_short_form_config_hides_kvm_and_splits_functions() -> None:
    config = parse_vm_config(fixture("q35-4gpu-hidden-short-form_pve7.4.conf"))
    host = HostView(bdfs=["0000:01:00.0", "0000:01:00.1", "0000:41:00.0", "0000:41:00.1", "0000:81:00.0",
                          "0000:c1:00.0"])
    vm = vm_facts(210, config, host)
    entries = {e["id"]: e for e in vm["hostpci"]}
    assert entries["hostpci0"]["qemu_ids"] == ["hostpci0.0", "hostpci0.1"] and entries["hostpci0"]["x_vga"]
    assert entries["hostpci1"]["multifunction"] is True and entries["hostpci1"]["functions_named"] is False
    # args names hostpci0, but QEMU calls that device hostpci0.0: no clique reaches it.
    assert vm["clique"] == {"hostpci0": None, "hostpci1": None, "hostpci2": None, "hostpci3": None}
    assert entries["hostpci2"]["bdfs"] == ["0000:81:00.0"] and entries["hostpci2"]["rombar"] is False
    assert entries["hostpci3"]["romfile"] == "rtx-a6000.rom"
    # cpu hidden=1 is set, so qemu-server's own kvm=off for x-vga is not a second source.
    assert vm["cpu_hidden_sources"] == [{"source": "cpu", "line": "cpu: host,hidden=1,flags=+pdpe1gb",
                                         "pending_only": False}]
    assert (vm["machine"], vm["machine_type"], vm["balloon"], vm["memory_mib"]) == \
        ("pc-q35-7.2", "q35", 16384, 131072)


def test_i440fx_by_default_and_multi_device_host_list() -> None:
    vm = vm_facts(105, parse_vm_config(fixture("i440fx-default-machine_2gpu_pve6.conf")), HostView())
    assert (vm["machine"], vm["machine_type"], vm["bios"], vm["cpu_type"], vm["cpu"]) == \
        (None, "i440fx", "seabios", "kvm64", None)
    first, second = vm["hostpci"]
    assert first["bdfs"] == ["0000:0f:00.0", "0000:0f:00.1"] and first["multifunction"] is True
    assert second["bdfs"] == ["0000:10:00.0"] and second["rombar"] is False and not second["pcie"]
    assert vm["mmio64_estimated_mb"] is None and vm["mmio64_basis"].startswith("SeaBIOS")


def test_odd_spacing_crlf_pending_and_special_sections() -> None:
    config = parse_vm_config(fixture("odd-spacing-crlf-pending-cloudinit.conf"))
    assert config.warnings == ["line 7: unable to parse 'Hostpci2: 0000:43:00.0,pcie=1'",
                               "line 8: unable to parse 'this line is not a setting'",
                               "line 23: skipping unknown section [bad section!]"]
    assert config.current.options["cores"] == "32" and config.current.options["bios"] == "ovmf"
    assert config.pending.options == {"balloon": "8192"} and config.pending_delete == ["numa", "hugepages"]
    assert config.special["cloudinit"].options == {"ciuser": "ubuntu", "ipconfig0": "ip=dhcp"}
    assert "hostpci9" not in config.effective()  # it sits in the skipped unknown section
    vm = vm_facts(7, config, HostView(phys_bits=46))
    assert [e["bdfs"] for e in vm["hostpci"]] == [["0000:41:00.0"], ["0000:42:00.0"]]
    assert vm["clique"] == {"hostpci0": 2, "hostpci1": 2}  # a quoted -set is one shell word
    assert (vm["machine_type"], vm["phys_bits"], vm["memory_mib"], vm["balloon"]) == ("q35", "host", 65536, 8192)
    assert vm["smbios_uuid"] == "2e4b6d8f-0a1c-4e3f-9b5d-7c9e1a3b5d7f"
    assert vm["config_lines"]["balloon"] == "[PENDING] balloon: 8192"
    assert vm["config_lines"]["numa"] == "[PENDING] delete: numa"
    assert len(vm["warnings"]) == 3


def test_mappings_global_clique_and_args_cpu() -> None:
    config = parse_vm_config(fixture("q35-mapping-global-clique_pve8.2.conf"))
    host = HostView(bdfs=["0000:01:00.0", "0000:02:00.0"],
                    mappings=parse_pci_mapping(fixture("mapping-pci.cfg"), "pve-gpu-01"))
    assert host.mappings["pro6000-a"] == [{"id": "10de:2bb5", "iommugroup": "15", "node": "pve-gpu-01",
                                           "path": "0000:01:00.0", "subsystem-id": "10de:204e"}]
    vm = vm_facts(300, config, host)
    assert [(e["mapping"], e["bdfs"]) for e in vm["hostpci"]] == [("pro6000-a", ["0000:01:00.0"]),
                                                                   ("pro6000-b", ["0000:02:00.0"])]
    assert vm["clique"] == {"hostpci0": 1, "hostpci1": 1}
    assert vm["hostpci"][0]["clique_origin"] == "-global vfio-pci.x-nv-gpudirect-clique"
    assert [s["source"] for s in vm["cpu_hidden_sources"]] == ["args -cpu kvm=off"]
    assert vm["cpu_type"] == "x86-64-v2-AES"
    unmapped = vm_facts(300, config, HostView(mappings={}))
    assert unmapped["hostpci"][0]["bdfs"] == [] and "has no entry for this node" in unmapped["warnings"][0]


# ---------------------------------------------------------------------------
# Property tests: nothing but ProxmoxParseError, garbled lines become warnings

CONFIG_LINES = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["[PENDING]", "[special:cloudinit]", "[snap-1]", "[!]", "delete: numa", "#note%3A x",
                     "args: -set device.hostpci0.x-nv-gpudirect-clique=0", "cpu: host,hidden=1", "machine: q35",
                     "args: -set 'unbalanced", "balloon: abc", "memory: current=x", "numa0: cpus=0-3,memory=zz"]),
    st.builds(lambda n, v: f"hostpci{n}: {v}", st.integers(0, 17), st.text(max_size=40)),
    st.builds(lambda k, v: f"{k}: {v}", st.from_regex(r"[a-z][a-z_\-]{0,8}\d?", fullmatch=True),
              st.text(max_size=30)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(CONFIG_LINES, max_size=25), newline=st.sampled_from(["\n", "\r\n"]))
def test_any_config_parses_to_facts_or_warnings(lines: list[str], newline: str) -> None:
    config = parse_vm_config(newline.join(lines))
    vm = vm_facts(100, config, HostView(bdfs=["0000:41:00.0", "0000:41:00.1"], phys_bits=48))
    plan_vm(vm, {"host": {"numa_nodes": [0, 1]}})
    json.dumps(vm)
    # Until a section header can skip lines, every line with no `key:` is named in a warning.
    for number, line in enumerate(newline.join(lines).split("\n"), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            break
        if stripped and not stripped.startswith("#") and ":" not in stripped:
            assert any(w.startswith(f"line {number}: ") for w in config.warnings), (number, line)


# ---------------------------------------------------------------------------
# The incident's hypervisor, before and after the fix


class StrictReplay(ReplaySource):
    """Records every read the capture has no entry for (a live capture records absent paths too)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.unanswered: list[str] = []

    def read_bytes(self, path: str) -> bytes | None:
        if path not in self._section("files"):
            self.unanswered.append(path)
        return super().read_bytes(path)

    def listdir(self, path: str) -> list[str] | None:
        if path not in self._section("dirs"):
            self.unanswered.append(path)
        return super().listdir(path)

    def run(self, argv: list[str]) -> CommandResult:
        if " ".join(argv) not in self._section("commands"):
            self.unanswered.append(" ".join(argv))
        return super().run(argv)


@pytest.mark.parametrize("name", [NO_CLIQUE, CLIQUE_OK])
def test_proxmox_host_capture_answers_every_read(name: str) -> None:
    source = StrictReplay(capture(name))
    facts.audit(source, facts.resolve_subsets(["all"]), RuleOptions())
    # The kernel's release, read for the drift between audits, nvidia_uvm's uvm_disable_hmm
    # (audit/host_settings.py) and the package reads (audit/packages.py) came after these captures: all null.
    later = {"/proc/sys/kernel/osrelease", "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm",
             DPKG_GPU_PACKAGES.key, APT_CONF_DIR}
    assert [read for read in source.unanswered if read not in later] == []


def test_incident_host_yields_exactly_its_findings() -> None:
    result = audited(NO_CLIQUE)
    assert found(result) == {("proxmox_vm_no_clique", "critical"), ("proxmox_vm_hidden", "critical"),
                             ("proxmox_vm_balloon", "info"), ("gpus_bound_to_vfio", "info")}
    assert result["summary"]["verdict"] == "unfit" and result["problems"] == []
    pve = result["proxmox"]
    assert (pve["node"], pve["version"], pve["kernel"], pve["vm_count"], pve["vms_without_hostpci"]) == \
        ("pve-gpu-01", "8.3.2", "6.8.12-5-pve", 2, [101])
    assert pve["host"]["iommu_enabled"] is True and pve["host"]["phys_bits"] == 52
    (vm,) = pve["vms"]
    assert (vm["vmid"], vm["name"], vm["machine_type"], vm["bios"]) == (120, "glm5-tp8", "q35", "ovmf")
    assert vm["pending"] == {"cpu": "host,hidden=1"} and vm["snapshots"] == ["pre-driver-590"]
    for entry in vm["hostpci"]:
        device = entry["host_device"]
        assert entry["pcie"] and entry["clique"] is None
        assert (device["kind"], device["driver"], device["alone_in_group"]) == ("gpu", "vfio-pci", True)
    assert (vm["mmio64_needed_mb"], vm["mmio64_estimated_mb"]) == (2 << 20, 8 << 20)  # 8 x 256 GiB; 2^46 / 8

    clique = finding(result, "proxmox_vm_no_clique")
    assert clique["evidence"]["vmid"] == 120 and len(clique["evidence"]["without_clique"]) == 8
    assert "hostpci0: 0000:01:00.0,pcie=1" in clique["evidence"]["config"]
    sets = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(8))
    assert f"qm set 120 --args '{sets}'" in clique["remedy"]
    # The VM's three findings share one restart, given once with its whole fix (report/proxmox_fix_md.py).
    assert "qm shutdown 120 && qm start 120" not in clique["remedy"]
    assert 'Then stop and start VM 120 once, after the commands of all its findings' in clique["remedy"]
    hidden = finding(result, "proxmox_vm_hidden")
    assert hidden["evidence"]["config"] == ["[PENDING] cpu: host,hidden=1"]
    assert "qm set 120 --cpu host" in hidden["remedy"] and "--args" not in hidden["remedy"]


def test_fixed_host_yields_exactly_its_findings() -> None:
    result = audited(CLIQUE_OK)
    assert found(result) == {("gpus_bound_to_vfio", "info")}
    (vm,) = result["proxmox"]["vms"]
    assert vm["clique"] == {f"hostpci{n}": 0 for n in range(8)}
    assert (vm["mmio64_mb"], vm["balloon"], vm["hugepages"], vm["cpu_hidden"]) == (2097152, 0, "1024", False)
    assert plan_vm(vm, result["proxmox"]).commands == {}


def test_the_host_report_has_a_proxmox_vms_section() -> None:
    text = report.host_markdown("pve-gpu-01", audited(NO_CLIQUE))
    assert "## Proxmox VMs" in text
    assert "Proxmox VE 8.3.2 (kernel 6.8.12-5-pve) on node pve-gpu-01: 2 VM(s), 1 passing PCI devices through." \
        in text
    assert "| 120 | glm5-tp8 | q35 | ovmf | host | 8 of 8 hostpci | 8/8 | none | yes (cpu pending) | device |" in text
    assert "| 120 | hostpci7 | 0000:c2:00.0 | vfio-pci |" in text and "- [PENDING] cpu: host,hidden=1" in text
    assert "## Proxmox VMs" not in report.host_markdown("g", audited(INCIDENT_GUEST))


def test_a_host_that_is_not_a_proxmox_node_has_no_proxmox_facts() -> None:
    result = audit(capture(FOUR_GPU_HOST))
    assert "proxmox" not in result and "proxmox" in result["gather_subset"]
    skipped = facts.audit(ReplaySource(capture(NO_CLIQUE)), facts.resolve_subsets(["!proxmox"]),
                          RuleOptions())
    assert "proxmox" not in skipped and not any(f["id"].startswith("proxmox_") for f in skipped["findings"])


def test_only_the_proxmox_subset_still_reads_the_host_devices() -> None:
    result = facts.audit(ReplaySource(capture(NO_CLIQUE)), ["proxmox"], RuleOptions())
    assert "pci" not in result and "iommu" not in result
    assert result["proxmox"]["vms"][0]["hostpci"][0]["host_device"]["driver"] == "vfio-pci"
    assert {f["id"] for f in result["findings"]} >= {"proxmox_vm_no_clique", "proxmox_vm_hidden"}


# ---------------------------------------------------------------------------
# One change to a host reaches each remaining rule


def test_i440fx_vm_with_pcie_cannot_start() -> None:
    result = audit(with_vms(FOUR_GPU_HOST, {200: four_gpu_vm("machine:")}))
    not_q35 = finding(result, "proxmox_vm_not_q35")
    assert not_q35["severity"] == "critical" and "no machine line" in not_q35["summary"]
    assert "qemu-server refuses to start the VM" in not_q35["summary"]
    assert "qm set 200 --machine q35" in not_q35["remedy"]


def test_q35_without_pcie_is_critical_for_several_gpus() -> None:
    result = audit(with_vms(FOUR_GPU_HOST, {200: four_gpu_vm(hostpci=("0000:01:00.0", "0000:41:00.0"))}))
    no_pcie = finding(result, "proxmox_vm_no_pcie")
    assert no_pcie["severity"] == "critical" and no_pcie["evidence"]["without_pcie"] == ["hostpci0", "hostpci1"]
    assert "qm set 200 --hostpci0 0000:01:00.0,pcie=1 --hostpci1 0000:41:00.0,pcie=1" in no_pcie["remedy"]


def test_whole_device_passthrough_hides_the_gpu_from_the_clique() -> None:
    config = four_gpu_vm("args: -set device.hostpci0.x-nv-gpudirect-clique=0 "
                         "-set device.hostpci1.x-nv-gpudirect-clique=0", hostpci=("01:00,pcie=1", "41:00,pcie=1"))
    result = audit(with_vms(FOUR_GPU_HOST, {200: config}))
    named = finding(result, "proxmox_vm_function_not_explicit")
    assert named["evidence"]["devices"]["hostpci0"] == {"passes": ["0000:01:00.0", "0000:01:00.1"],
                                                        "qemu_ids": ["hostpci0.0", "hostpci0.1"]}
    assert "refuses to start" in named["summary"]
    assert "qm set 200 --hostpci0 0000:01:00.0,pcie=1 --hostpci1 0000:41:00.0,pcie=1" in named["remedy"]
    clique = finding(result, "proxmox_vm_no_clique")
    assert "First name the GPU function" in clique["remedy"]


def test_a_single_function_gpu_in_short_form_is_fine() -> None:
    data = capture(NO_CLIQUE)
    path = f"{QEMU_SERVER}/120.conf"
    data["files"][path] = data["files"][path].replace("hostpci0: 0000:01:00.0,", "hostpci0: 01:00,")
    result = audit(data)
    assert result["proxmox"]["vms"][0]["hostpci"][0]["qemu_ids"] == ["hostpci0"]
    assert "proxmox_vm_function_not_explicit" not in {f["id"] for f in result["findings"]}


@pytest.mark.parametrize(("line", "source", "command"), [
    ("cpu: host,hidden=1", "cpu", "qm set 200 --cpu host"),
    ("args: -cpu host,kvm=off", "args -cpu kvm=off", "--args '-cpu host -set device.hostpci0"),
])
def test_kvm_hidden_defeats_the_clique(line: str, source: str, command: str) -> None:
    result = audit(with_vms(FOUR_GPU_HOST, {200: four_gpu_vm(line)}))
    hidden = finding(result, "proxmox_vm_hidden")
    assert hidden["severity"] == "critical" and hidden["evidence"]["hidden_by"] == [source]
    assert command in hidden["remedy"]


def test_x_vga_hides_kvm_unless_the_cpu_line_says_otherwise() -> None:
    x_vga = ("0000:01:00.0,pcie=1,x-vga=1", "0000:41:00.0,pcie=1")
    hidden = finding(audit(with_vms(FOUR_GPU_HOST, {200: four_gpu_vm(hostpci=x_vga)})), "proxmox_vm_hidden")
    assert hidden["evidence"]["hidden_by"] == ["hostpci0 x-vga=1"]
    assert "--hostpci0 0000:01:00.0,pcie=1" in hidden["remedy"]
    visible = audit(with_vms(FOUR_GPU_HOST, {200: four_gpu_vm("cpu: host,hidden=0", hostpci=x_vga)}))
    assert "proxmox_vm_hidden" not in {f["id"] for f in visible["findings"]}


def test_hidden_on_a_hostpci_line_is_not_an_option() -> None:
    config = four_gpu_vm(hostpci=("0000:01:00.0,pcie=1,hidden=1",))
    hidden = finding(audit(with_vms(FOUR_GPU_HOST, {200: config})), "proxmox_vm_hidden")
    assert hidden["severity"] == "critical" and "not a hostpci option" in hidden["summary"]
    assert "qm set 200 --hostpci0 0000:01:00.0,pcie=1\n" in hidden["remedy"]


def test_gpus_split_across_cliques_is_a_warning() -> None:
    config = four_gpu_vm("args: -set device.hostpci0.x-nv-gpudirect-clique=0 "
                         "-set device.hostpci1.x-nv-gpudirect-clique=1")
    split = finding(audit(with_vms(FOUR_GPU_HOST, {200: config})), "proxmox_vm_no_clique")
    assert split["severity"] == "warning" and split["evidence"]["cliques"] == {"0": ["hostpci0"], "1": ["hostpci1"]}


def test_args_keep_what_they_had_and_gain_the_missing_clique() -> None:
    config = four_gpu_vm("args: -device 'virtio-rng-pci,max-bytes=1024' -set device.hostpci0.x-nv-gpudirect-clique=3")
    clique = finding(audit(with_vms(FOUR_GPU_HOST, {200: config})), "proxmox_vm_no_clique")
    assert clique["evidence"]["without_clique"] == ["hostpci1"]
    assert ("qm set 200 --args '-device virtio-rng-pci,max-bytes=1024 -set device.hostpci0.x-nv-gpudirect-clique=3 "
            "-set device.hostpci1.x-nv-gpudirect-clique=3'") in clique["remedy"]


def test_ballooning_below_memory_is_a_warning() -> None:
    balloon = finding(audit(with_vms(FOUR_GPU_HOST, {200: four_gpu_vm("balloon: 65536")})), "proxmox_vm_balloon")
    assert balloon["severity"] == "warning" and balloon["evidence"]["balloon"] == 65536
    assert "qm set 200 --balloon 0" in balloon["remedy"]


def test_small_explicit_mmio_window() -> None:
    config = four_gpu_vm("args: -set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-"
                         "clique=0 -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=65536")
    mmio = finding(audit(with_vms(FOUR_GPU_HOST, {200: config})), "proxmox_vm_mmio_window_small")
    assert (mmio["evidence"]["window_mb"], mmio["evidence"]["needed_mb"]) == (65536, 512 * 1024)
    assert "-fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=524288'" in mmio["remedy"]
    assert "string=65536" not in mmio["remedy"]


def test_cpu_model_not_host_shrinks_the_window_too() -> None:
    result = audit(with_vms(FOUR_GPU_HOST, {200: four_gpu_vm("cpu: x86-64-v2-AES")}))
    assert finding(result, "proxmox_cpu_not_host")["severity"] == "warning"
    assert "qm set 200 --cpu host" in finding(result, "proxmox_cpu_not_host")["remedy"]
    mmio = finding(result, "proxmox_vm_mmio_window_small")  # 2^40 / 8 = 128 GiB < 512 GiB
    assert mmio["evidence"]["window_mb"] == 131072 and "QEMU's default of 40 bits" in mmio["evidence"]["window_basis"]


def test_gpu_left_on_the_host_driver() -> None:
    data = with_vms(FOUR_GPU_HOST, {200: four_gpu_vm()})
    link = "/sys/bus/pci/devices/0000:41:00.0/driver"
    data["links"][link] = data["links"][link].replace("/vfio-pci", "/nvidia")
    not_vfio = finding(audit(data), "proxmox_gpu_not_vfio")
    assert not_vfio["evidence"]["drivers"] == {"0000:41:00.0": "nvidia"}
    assert "options vfio-pci ids=10de:2bb4" in not_vfio["remedy"]
    assert "softdep nvidia pre: vfio-pci" in not_vfio["remedy"]


def test_gpu_sharing_its_group_with_the_nic() -> None:
    data = with_vms(FOUR_GPU_HOST, {200: four_gpu_vm()})
    gpu_group = data["links"]["/sys/bus/pci/devices/0000:01:00.0/iommu_group"].rsplit("/", 1)[1]
    members = f"{GROUPS}/{gpu_group}/devices"
    data["dirs"][members] = sorted([*data["dirs"][members], "0000:c2:00.0"])
    shared = finding(audit(data), "proxmox_gpu_group_shared")
    assert shared["evidence"]["groups"] == {"0000:01:00.0": {"hostpci": "hostpci0", "group": gpu_group,
                                                             "also_in_group": ["0000:c2:00.0"]}}


def test_iommu_off_with_passthrough_vms() -> None:
    data = with_vms(FOUR_GPU_HOST, {200: four_gpu_vm()})
    for group in data["dirs"][GROUPS]:
        data["dirs"].pop(f"{GROUPS}/{group}/devices", None)
    data["dirs"][GROUPS] = []
    data["dirs"]["/sys/class/iommu"] = []
    off = finding(audit(data), "proxmox_iommu_off")
    assert off["severity"] == "critical" and off["evidence"]["vmids"] == [200]
    assert off["evidence"]["cpu_vendor"] == "amd" and off["evidence"]["bootloader"] == "grub"
    assert "GRUB_CMDLINE_LINUX_DEFAULT" in off["remedy"] and "proxmox-boot-tool" not in off["remedy"]
    data["files"]["/proc/cmdline"] = "initrd=\\EFI\\proxmox\\6.8.12-4-pve\\initrd.img-6.8.12-4-pve root=ZFS=rpool\n"
    data["files"]["/proc/cpuinfo"] = data["files"]["/proc/cpuinfo"].replace("AuthenticAMD", "GenuineIntel")
    intel = finding(audit(data), "proxmox_iommu_off")
    assert "`intel_iommu=on iommu=pt` to /etc/kernel/cmdline, then `proxmox-boot-tool refresh`" in intel["remedy"]


def test_no_vnuma_on_a_two_node_host() -> None:
    data = with_vms(FOUR_GPU_HOST, {200: four_gpu_vm()})
    data["dirs"]["/sys/devices/system/node"] = sorted([*data["dirs"]["/sys/devices/system/node"], "node1"])
    numa = finding(audit(data), "proxmox_no_numa")
    assert numa["severity"] == "info" and numa["evidence"]["host_numa_nodes"] == [0, 1]
    assert ("qm set 200 --numa 1 --sockets 2 --cores 8 --numa0 cpus=0-7,hostnodes=0,memory=65536,policy=bind "
            "--numa1 cpus=8-15,hostnodes=1,memory=65536,policy=bind") in numa["remedy"]


def test_an_unreadable_config_is_a_problem_not_a_crash() -> None:
    data = with_vms(FOUR_GPU_HOST, {200: four_gpu_vm()})
    data["files"][f"{QEMU_SERVER}/200.conf"] = {"error": "PermissionError: Permission denied"}
    result = audit(data)
    assert result["proxmox"]["vm_count"] == 0
    assert {"what": f"{QEMU_SERVER}/200.conf", "error": "PermissionError: Permission denied"} in result["problems"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(CONFIG_LINES, max_size=15))
def test_any_vm_config_on_a_host_gives_findings(lines: list[str]) -> None:
    result = audit(with_vms(FOUR_GPU_HOST, {200: "\n".join(lines)}))
    assert "rule_error" not in {f["id"] for f in result["findings"]}


# ---------------------------------------------------------------------------
# Guest to host


def test_incident_guest_links_to_its_vm() -> None:
    link = link_guest_to_host(audited(INCIDENT_GUEST), audited(NO_CLIQUE), "pve-gpu-01")
    assert link is not None
    assert (link["host"], link["vmid"], link["name"], link["matched_by"]) == \
        ("pve-gpu-01", 120, "glm5-tp8", "smbios1 uuid")
    assert {f["id"] for f in link["findings"]} == {"proxmox_vm_no_clique", "proxmox_vm_hidden", "proxmox_vm_balloon"}
    assert link["commands"][0] == "qm set 120 --cpu host"
    assert link["commands"][-1] == "qm shutdown 120 && qm start 120"
    assert link_guest_to_host(audited(INCIDENT_GUEST), audited(FOUR_GPU_HOST)) is None
    assert link_guest_to_host(audited(I440FX_GUEST), audited(NO_CLIQUE)) is None


def test_incident_guest_p2p_finding_names_the_vm_and_the_commands() -> None:
    guest = audited(INCIDENT_GUEST)
    before = copy.deepcopy(guest)
    enriched = enrich_guest_findings(guest, {"pve-gpu-01": audited(NO_CLIQUE), "pve-gpu-02": audited(CLIQUE_OK)})
    assert guest == before  # a new dictionary; the input is left alone
    p2p = finding(enriched, "p2p_not_supported")
    evidence = p2p["evidence"]
    assert (evidence["proxmox_host"], evidence["vmid"], evidence["proxmox_vm"]) == ("pve-gpu-01", 120, "glm5-tp8")
    assert evidence["also_matched"] == ["pve-gpu-02 VM 120"]  # the same VM, cloned: said, not guessed away
    assert evidence["host_findings"] == ["critical: proxmox_vm_hidden", "critical: proxmox_vm_no_clique",
                                         "info: proxmox_vm_balloon"]
    remedy = p2p["remedy"]
    assert remedy.startswith("This guest is VM 120 (glm5-tp8) on the Proxmox host pve-gpu-01")
    sets = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(8))
    assert f"  qm set 120 --args '{sets}'\n" in remedy and "  qm set 120 --cpu host\n" in remedy
    assert "<vmid>" not in remedy and "NCCL_P2P_DISABLE=1" in remedy


def test_a_fixed_vm_tells_the_guest_to_restart_it() -> None:
    enriched = enrich_guest_findings(audited(INCIDENT_GUEST), {"pve-gpu-01": audited(CLIQUE_OK)})
    remedy = finding(enriched, "p2p_not_supported")["remedy"]
    assert "finds nothing in that VM's config that blocks P2P" in remedy and "qm shutdown 120 && qm start 120" in remedy


def test_byte_swapped_smbios_uuid_still_links() -> None:
    variants = uuid_variants("f9ded56e-907b-5993-99cb-04cf02e12f2c")
    assert variants["6ed5def9-7b90-9359-99cb-04cf02e12f2c"] == "smbios1 uuid (byte-swapped fields)"
    guest = audited(INCIDENT_GUEST)
    guest["virtualization"]["product_uuid"] = "6ED5DEF9-7B90-9359-99CB-04CF02E12F2C"
    link = link_guest_to_host(guest, audited(NO_CLIQUE))
    assert link is not None and link["matched_by"] == "smbios1 uuid (byte-swapped fields)"
    assert link["host"] == "pve-gpu-01"  # the node name when no inventory name is given


def test_the_report_module_links_guests_in_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = {"glm5-guest": audited(INCIDENT_GUEST), "pve-gpu-01": audited(NO_CLIQUE)}
    run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": hosts}, capsys)
    guest = json.loads((tmp_path / "glm5-guest.json").read_text())
    assert finding(guest, "p2p_not_supported")["evidence"]["vmid"] == 120
    markdown = (tmp_path / "glm5-guest.md").read_text()
    assert "on the Proxmox host pve-gpu-01" in markdown and "qm set 120 --cpu host" in markdown
    assert "## Proxmox VMs" in (tmp_path / "pve-gpu-01.md").read_text()


def test_the_report_module_returns_the_links_in_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = {"glm5-guest": audited(INCIDENT_GUEST), "pve-gpu-01": audited(NO_CLIQUE),
             "h100": audited("baremetal-8xH100-SXM")}
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": hosts}, capsys, check_mode=True)
    assert list(tmp_path.iterdir()) == []  # check mode writes nothing
    assert set(result["guest_links"]) == {"glm5-guest"}
    link = result["guest_links"]["glm5-guest"]
    assert (link["proxmox_host"], link["vmid"], link["proxmox_vm"]) == ("pve-gpu-01", 120, "glm5-tp8")
    assert "qm set 120 --cpu host" in link["remedies"]["p2p_not_supported"]


def test_of_two_clones_the_one_whose_config_blocks_p2p_is_named_first() -> None:
    # Sorted by name the fixed clone would come first; its config does not explain the guest's finding.
    hosts = {"pve-a": audited(CLIQUE_OK), "pve-b": audited(NO_CLIQUE)}
    enriched = enrich_guest_findings(audited(INCIDENT_GUEST), hosts)
    evidence = finding(enriched, "p2p_not_supported")["evidence"]
    assert (evidence["proxmox_host"], evidence["also_matched"]) == ("pve-b", ["pve-a VM 120"])


def test_a_pending_secret_never_reaches_the_facts() -> None:
    # Pending changes are kept in the facts (they take effect at the next start), and so reach the reports:
    # a cloud-init password or key set but not yet applied must not travel with them.
    config = parse_vm_config(four_gpu_vm() + "\n[PENDING]\ncipassword: hunter2-secret\nsshkeys: ssh-ed25519%20AAAAC3\n"
                             "balloon: 8192\n")
    vm = vm_facts(7, config, HostView(phys_bits=46))
    assert vm["pending"] == {"balloon": "8192", "cipassword": "<redacted>", "sshkeys": "<redacted>"}
    assert "hunter2" not in str(vm) and "AAAAC3" not in str(vm)
