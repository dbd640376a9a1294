"""The passthrough reader and the two modules of the proxmox_gpu_host role, over the real-shaped Proxmox VE host
capture: replayed, and written out as a fake sysfs tree (molecule/proxmox_gpu_host/files/fake_sysfs.py, the tree
the role's molecule scenario uses)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gpu_passthrough_host
import kernel_cmdline
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.passthrough_host import cpu_vendor, gather_passthrough
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.rooted_source import RootedSource
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import ReplaySource

from tests import paths
from tests.unit import captures
from tests.unit.modules import run_module

FAKE_SYSFS = paths.ROOT / "molecule" / "proxmox_gpu_host" / "files" / "fake_sysfs.py"
GPUS = ["0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"]


def fake_sysfs():
    spec = importlib.util.spec_from_file_location("fake_sysfs", FAKE_SYSFS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(root: Path, *extra: str) -> Path:
    assert fake_sysfs().main([str(captures.CAPTURES / f"{captures.HYPERVISOR}.json"), str(root), *extra]) == 0
    return root


def test_replayed_hypervisor():
    host = gather_passthrough(ReplaySource(captures.capture(captures.HYPERVISOR)))
    assert host["cpu_vendor"] == "amd"
    assert host["cmdline"].endswith("quiet iommu=pt")
    first_gpu = next(d for d in host["devices"] if d["class"] == "0x030000")
    assert first_gpu == {"bdf": "0000:01:00.0", "vendor_id": "10de", "device_id": "2bb4", "class": "0x030000",
                         "driver": "vfio-pci", "iommu_group": "15"}
    result = gpu_passthrough_host.result_of(host, [], "auto")
    # Already done on this host: AMD needs iommu=pt only, and vfio-pci holds every function.
    assert result["ready"] and result["pending"] == []
    assert result["plan"]["vfio_ids"] == ["10de:2bb4", "10de:22e8"]


def test_rooted_source_moves_sysfs_and_the_kernel_files_only(tmp_path):
    root = tree(tmp_path / "root", "--cmdline", "initrd=\\EFI\\proxmox\\initrd.img root=ZFS=rpool/ROOT/pve-1")
    source = RootedSource(str(root))
    assert source.read_value("/sys/bus/pci/devices/0000:41:00.0/vendor") == "0x10de"
    assert source.realpath("/sys/kernel/iommu_groups/17/devices/0000:41:00.0") == "/sys/bus/pci/devices/0000:41:00.0"
    assert source.read_value("/proc/cmdline") == "initrd=\\EFI\\proxmox\\initrd.img root=ZFS=rpool/ROOT/pve-1"
    assert "AuthenticAMD" in (source.read_text("/proc/cpuinfo") or "")
    assert source.read_bytes("/proc/self/status") is not None  # the running system's /proc
    assert source.read_bytes(str(root / "sys/bus/pci/devices/0000:41:00.0/vendor")) is not None  # not moved twice


def test_module_plans_from_a_fake_tree(tmp_path, capsys):
    root = tree(tmp_path / "root", "--host-drivers")
    result = run_module(gpu_passthrough_host.main, {"sysfs_root": str(root), "cpu_vendor": "intel"}, capsys,
                        check_mode=True)
    assert not result["changed"]
    assert result["plan"]["gpus"] == GPUS
    assert result["plan"]["refusals"] == []
    assert result["cmdline_params"][0] == {"name": "intel_iommu", "value": "on", "conflicts": ["off"]}
    assert result["iommu_groups"]["17"] == ["0000:41:00.0", "0000:41:00.1"]
    assert "0000:41:00.1 is bound to snd_hda_intel, not vfio-pci" in result["pending"]
    assert not result["ready"]


def test_module_reports_the_gpu_sharing_its_group_with_the_nic(tmp_path, capsys):
    root = tree(tmp_path / "root", "--host-drivers", "--group", "0000:c2:00.0=21")
    result = run_module(gpu_passthrough_host.main, {"sysfs_root": str(root), "cpu_vendor": "amd"}, capsys)
    assert len(result["plan"]["refusals"]) == 1
    assert "GPU 0000:c1:00.0 shares IOMMU group 21 with 0000:c2:00.0 (Ethernet controller [14e4:" in \
        result["plan"]["refusals"][0]


def test_module_fails_on_a_choice_that_is_no_gpu(tmp_path, capsys):
    root = tree(tmp_path / "root")
    result = run_module(gpu_passthrough_host.main, {"sysfs_root": str(root), "cpu_vendor": "amd",
                                                    "gpus": ["0000:c2:00.0"]}, capsys)
    assert result["failed"]
    assert "found 0000:c2:00.0: 0000:c2:00.0 (Ethernet controller" in result["msg"]


@pytest.mark.parametrize(("cpuinfo", "vendor"), [("vendor_id\t: GenuineIntel\n", "intel"),
                                                 ("vendor_id\t: AuthenticAMD\n", "amd"),
                                                 ("vendor_id\t: HygonGenuine\n", None), ("", None)])
def test_cpu_vendor(cpuinfo, vendor):
    assert cpu_vendor(cpuinfo) == vendor


GRUB = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'
INTEL = [{"name": "intel_iommu", "value": "on", "conflicts": ["off"]}, {"name": "iommu", "value": "pt"}]


def test_kernel_cmdline_check_mode_shows_the_diff_and_writes_nothing(tmp_path, capsys):
    grub = tmp_path / "grub"
    grub.write_text(GRUB)
    args = {"path": str(grub), "format": "grub", "params": INTEL}
    result = run_module(kernel_cmdline.main, args, capsys, check_mode=True, diff=True)
    assert result["changed"]
    assert result["cmdline_after"] == "quiet intel_iommu=on iommu=pt"
    assert result["diff"]["after"] == GRUB.replace('"quiet"', '"quiet intel_iommu=on iommu=pt"')
    assert grub.read_text() == GRUB


def test_kernel_cmdline_writes_once(tmp_path, capsys):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=off\n")
    cmdline.chmod(0o644)
    args = {"path": str(cmdline), "format": "kernel_cmdline", "params": INTEL}
    assert run_module(kernel_cmdline.main, args, capsys)["changed"]
    assert cmdline.read_text() == "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n"
    assert cmdline.stat().st_mode & 0o777 == 0o644
    assert not run_module(kernel_cmdline.main, args, capsys)["changed"]


def test_kernel_cmdline_missing_file(tmp_path, capsys):
    result = run_module(kernel_cmdline.main, {"path": str(tmp_path / "nope"), "format": "kernel_cmdline",
                                              "params": INTEL}, capsys)
    assert result["failed"] and "expected the kernel command line in" in result["msg"]
