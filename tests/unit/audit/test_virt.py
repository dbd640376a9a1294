"""Virtualization detection: each signal's parser, and the vote over them."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import virt
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CAPTURE_FORMAT, ReplaySource
from hypothesis import given
from hypothesis import strategies as st

CPUINFO_VM = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu vme de pse tsc msr hypervisor lahf_lm\n"
CPUINFO_METAL = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme de pse tsc msr pae mce\n"
CPUINFO_ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1\n"


@pytest.mark.parametrize(("text", "expected"), [
    (CPUINFO_VM, True), (CPUINFO_METAL, False), (CPUINFO_ARM, False), ("", None), ("processor : 0\n", None),
])
def test_cpuinfo_hypervisor_flag(text: str, expected: bool | None) -> None:
    assert virt.cpuinfo_has_hypervisor_flag(text) is expected


@pytest.mark.parametrize(("text", "expected"), [
    ("[    0.000000] Hypervisor detected: KVM\n", "kvm"),
    ("[    0.000000] Hypervisor detected: VMware\n", "vmware"),
    ("[    0.000000] Hypervisor detected: Microsoft Hyper-V\n", "hyperv"),
    ("[    0.000000] Hypervisor detected: Xen HVM\n", "xen"),
    ("[    0.000000] DMI not present or invalid.\n", None),
])
def test_dmesg_hypervisor(text: str, expected: str | None) -> None:
    assert virt.dmesg_hypervisor(text) == expected


@pytest.mark.parametrize(("vendor", "product", "expected_hv", "expected_machine"), [
    ("QEMU", "Standard PC (Q35 + ICH9, 2009)", "kvm", "q35"),
    ("QEMU", "Standard PC (i440FX + PIIX, 1996)", "kvm", "i440fx"),
    ("VMware, Inc.", "VMware Virtual Platform", "vmware", None),
    ("Microsoft Corporation", "Virtual Machine", "hyperv", None),
    ("Microsoft Corporation", "Surface Laptop 5", None, None),
    ("Supermicro", "SYS-421GE-TNRT", None, None),
    ("Amazon EC2", "p5.48xlarge", "kvm", None),
])
def test_dmi(vendor: str, product: str, expected_hv: str | None, expected_machine: str | None) -> None:
    dmi = {"sys_vendor": vendor, "product_name": product}
    assert virt.dmi_hypervisor(dmi) == expected_hv
    assert virt.dmi_machine_type(dmi) == expected_machine


def test_hugepages_and_nodes() -> None:
    meminfo = "MemTotal: 1 kB\nHugePages_Total:     512\nHugePages_Free:      500\nHugepagesize:    1048576 kB\n"
    assert virt.parse_meminfo_hugepages(meminfo) == {"total": 512, "free": 500, "size_kb": 1048576}
    assert virt.parse_node_names(["node1", "node0", "online", "possible", "nodeX"]) == [0, 1]


@given(st.text())
def test_parsers_never_raise(text: str) -> None:
    virt.cpuinfo_has_hypervisor_flag(text)
    virt.dmesg_hypervisor(text)
    virt.parse_meminfo_hugepages(text)
    virt.dmi_hypervisor({"sys_vendor": text, "product_name": text})
    virt.parse_node_names(text.split())


def capture(files: dict | None = None, commands: dict | None = None, dirs: dict | None = None) -> ReplaySource:
    return ReplaySource({"format": CAPTURE_FORMAT, "files": files or {}, "commands": commands or {},
                         "dirs": dirs or {}})


def detect(*, rc_vm: str = "none", rc_container: str = "none", **kw) -> ReplaySource:
    commands = {"systemd-detect-virt --vm": {"rc": 0 if rc_vm != "none" else 1, "stdout": rc_vm + "\n"},
                "systemd-detect-virt --container": {"rc": 0 if rc_container != "none" else 1,
                                                    "stdout": rc_container + "\n"}}
    commands.update(kw.pop("commands", {}))
    return capture(commands=commands, **kw)


def test_microvm_with_stale_dockerenv_is_a_vm_not_a_container() -> None:
    # Our CI machines: KVM microVM, no DMI, a /.dockerenv left by the image build.
    source = detect(rc_vm="kvm", rc_container="docker",
                    files={"/proc/cpuinfo": CPUINFO_VM, "/.dockerenv": "", "/proc/1/cgroup": "0::/\n",
                           "/proc/cmdline": "console=ttyS0 -- --firecracker-init"},
                    commands={"dmesg": {"rc": 0, "stdout": "DMI not present or invalid.\nHypervisor detected: KVM\n"}})
    result = virt.gather_virtualization(source, [("0000:00:01.0", "0x1af4", "0x1041")], 0, [])
    assert (result.type, result.hypervisor, result.container, result.platform) == ("vm", "kvm", None, "firecracker")
    assert result.summary == "KVM virtual machine (firecracker)"
    weak = {e.signal for e in result.evidence if e.weight == "weak"}
    assert {"/.dockerenv", "systemd-detect-virt --container"} <= weak


def test_podman_container_inside_a_vm() -> None:
    source = detect(rc_vm="kvm", rc_container="podman",
                    files={"/proc/cpuinfo": CPUINFO_VM, "/run/.containerenv": "", "/run/systemd/container": "podman\n"})
    result = virt.gather_virtualization(source, [], 0, [])
    assert (result.type, result.hypervisor, result.container) == ("vm", "kvm", "podman")
    assert result.summary == "KVM virtual machine, inside a podman container"


def test_docker_container_on_bare_metal() -> None:
    source = detect(rc_container="docker", files={"/proc/cpuinfo": CPUINFO_METAL, "/.dockerenv": "",
                                                  "/proc/1/cgroup": "0::/system.slice/docker-abc123.scope\n"})
    result = virt.gather_virtualization(source, [], 0, [])
    assert (result.type, result.container) == ("container", "docker")


def test_q35_guest_from_dmi_and_host_bridge() -> None:
    source = detect(rc_vm="kvm", files={
        "/proc/cpuinfo": CPUINFO_VM, "/sys/class/dmi/id/sys_vendor": "QEMU\n",
        "/sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n",
        "/sys/class/dmi/id/product_uuid": "6c1f5b8e-2a1d-4c1e-9f3e-0a1b2c3d4e5f\n"})
    result = virt.gather_virtualization(source, [("0000:00:00.0", "0x8086", "0x29c0")], 0, [])
    assert (result.type, result.hypervisor, result.machine_type) == ("vm", "kvm", "q35")
    assert result.product_uuid == "6c1f5b8e-2a1d-4c1e-9f3e-0a1b2c3d4e5f"
    assert result.virtual_iommu is False


def test_bare_metal() -> None:
    source = detect(files={"/proc/cpuinfo": CPUINFO_METAL, "/sys/class/dmi/id/sys_vendor": "Supermicro\n"},
                    dirs={"/sys/devices/system/node": ["node0", "node1", "online"]})
    result = virt.gather_virtualization(source, [("0000:00:00.0", "0x8086", "0x09a2")], 0, [])
    assert (result.type, result.hypervisor, result.numa_nodes) == ("bare_metal", None, [0, 1])
    assert result.summary == "bare metal"


@pytest.mark.parametrize(("files", "pci_ids", "commands"), [
    ({"/proc/cpuinfo": CPUINFO_METAL}, [], {}),
    ({"/sys/class/dmi/id/sys_vendor": "Supermicro\n"}, [], {}),
    ({}, [("0000:00:00.0", "0x8086", "0x09a2")], {}),
    ({}, [], {"systemd-detect-virt --vm": {"rc": 1, "stdout": "none\n"}}),
], ids=["cpuinfo", "dmi", "pci", "systemd-detect-virt"])
def test_one_signal_read_is_enough_to_say_bare_metal(files, pci_ids, commands) -> None:
    result = virt.gather_virtualization(capture(files=files, commands=commands), pci_ids, 0, [])
    assert (result.type, result.summary) == ("bare_metal", "bare metal")


def test_nothing_read_is_no_verdict_never_bare_metal() -> None:
    result = virt.gather_virtualization(capture(commands={"dmesg": {"rc": 0, "stdout": "[ 0.0] Linux version\n"}}),
                                        [], 0, [])
    assert (result.type, result.hypervisor, result.evidence) == (None, None, [])
    assert result.summary == virt.UNKNOWN and result.virtual_iommu is False


def test_dmesg_refused_is_a_problem_not_an_error() -> None:
    refused = "dmesg: read kernel buffer failed: Operation not permitted"
    source = detect(files={"/proc/cpuinfo": CPUINFO_METAL}, commands={"dmesg": {"rc": 1, "stderr": refused}})
    virt.gather_virtualization(source, [], 0, [])
    assert source.problems == [{"what": "dmesg", "error": refused}]


def test_a_hypervisor_line_padded_with_blanks_is_read_in_linear_time() -> None:
    # The lazy name before \s*$ tried the run of blanks again at each of its characters.
    from tests.cpu_limit import within

    line = "[    0.000000] Hypervisor detected: KVM" + " " * 65536 + "x\n"
    assert within(1.0, lambda: virt.dmesg_hypervisor(line)) == "kvm" + " " * 65536 + "x"


@pytest.mark.parametrize(("text", "name"), [
    ("[    0.000000] Hypervisor detected: KVM  \n", "kvm"),
    ("Hypervisor detected:\n  Microsoft Hyper-V\n", "hyperv"),
    ("Hypervisor detected:   ", ""),
    ("no hypervisor here\n", None),
])
def test_the_hypervisor_line_is_read_as_before(text: str, name: str | None) -> None:
    assert virt.dmesg_hypervisor(text) == name
