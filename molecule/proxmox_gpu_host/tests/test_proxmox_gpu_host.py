"""What the role left on both hosts: the kernel command line, the module files (exact lines), each
stand-in called once by the handlers, and nothing else changed."""

import pytest
from check_run import changed_files

testinfra_hosts = ["podman://pgh-grub", "podman://pgh-systemd-boot"]

STANDIN_LOG = "/var/log/proxmox-gpu-host-standins.log"
HEADER = "# Ansible managed (role proxmox_gpu_host)."


def lines(host, path):
    """The file's lines without its comments; fails when it is absent or not 0644 root:root."""
    file = host.file(path)
    assert file.exists, path
    assert (file.mode, file.user, file.group) == (0o644, "root", "root")
    assert file.content_string.splitlines()[0] == HEADER
    return [line for line in file.content_string.splitlines() if line and not line.startswith("#")]


def is_grub(host):
    return host.backend.get_hostname() == "pgh-grub"


def test_kernel_command_line(host):
    if is_grub(host):
        grub = host.file("/etc/default/grub").content_string
        assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"\n' in grub
        assert 'GRUB_CMDLINE_LINUX=""\n' in grub
        assert grub.count("GRUB_CMDLINE_LINUX_DEFAULT=") == 1
    else:
        assert host.file("/etc/kernel/cmdline").content_string == "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n"


def test_vfio_modules_at_boot(host):
    assert lines(host, "/etc/modules-load.d/vfio.conf") == ["vfio", "vfio_iommu_type1", "vfio_pci"]


def test_vfio_pci_claims_the_gpus_first(host):
    assert lines(host, "/etc/modprobe.d/vfio.conf") == [
        "options vfio-pci ids=10de:2bb4,10de:22e8",
        "softdep nvidia pre: vfio-pci",
        "softdep nouveau pre: vfio-pci",
        "softdep snd_hda_intel pre: vfio-pci",
    ]


def test_host_drivers_blacklisted_but_not_hda(host):
    assert lines(host, "/etc/modprobe.d/blacklist-gpu-passthrough.conf") == [
        "blacklist nouveau", "blacklist nvidia", "blacklist nvidiafb", "blacklist nvidia_drm"]


def test_modprobe_reads_the_files(host):
    config = host.check_output("modprobe --showconfig")
    assert "options vfio_pci ids=10de:2bb4,10de:22e8" in config
    assert "blacklist nouveau" in config
    assert "softdep snd_hda_intel pre: vfio-pci" in config


def test_each_handler_ran_once(host):
    calls = host.file(STANDIN_LOG).content_string.splitlines()
    refresh = "update-grub " if is_grub(host) else "proxmox-boot-tool refresh"
    assert sorted(calls) == sorted(["update-initramfs -u -k all", refresh])


@pytest.mark.parametrize("path", ["/etc/default/grub", "/etc/kernel/cmdline"])
def test_only_the_boot_loader_in_use_is_edited(host, path):
    in_use = "/etc/default/grub" if is_grub(host) else "/etc/kernel/cmdline"
    assert (path in changed_files(host)) == (path == in_use)


def test_nothing_else_changed(host):
    expected = {"/etc/modules-load.d/vfio.conf", "/etc/modprobe.d/vfio.conf",
                "/etc/modprobe.d/blacklist-gpu-passthrough.conf",
                "/etc/default/grub" if is_grub(host) else "/etc/kernel/cmdline"}
    changed = set(changed_files(host)) - {"/etc/modules-load.d", "/etc/modprobe.d", "/etc/default", "/etc/kernel"}
    assert changed == expected
