"""What a Proxmox VE node hands to vfio-pci, and when it refuses: a GPU sharing its IOMMU group with a NIC,
an id shared with a device kept for the host, a choice that is no GPU."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.passthrough_host import (
    AMD_CMDLINE,
    INTEL_CMDLINE,
    Device,
    PassthroughError,
    cmdline_rules,
    pending_reasons,
    plan_host,
)

GPU = "0x030000"
GPU_3D = "0x030200"
AUDIO = "0x040300"
USB = "0x0c0330"
UCSI = "0x0c8000"
ROOT_PORT = "0x060400"
NIC = "0x020000"


def two_gpu_host(**groups_override):
    devices = [
        Device("0000:00:01.1", "1022", "14ab", ROOT_PORT),
        Device("0000:01:00.0", "10de", "2684", GPU, "nouveau"),
        Device("0000:01:00.1", "10de", "22ba", AUDIO, "snd_hda_intel"),
        Device("0000:00:01.2", "1022", "14ab", ROOT_PORT),
        Device("0000:02:00.0", "10de", "2684", GPU, "nouveau"),
        Device("0000:02:00.1", "10de", "22ba", AUDIO, "snd_hda_intel"),
        Device("0000:03:00.0", "8086", "1533", NIC, "igb"),
    ]
    groups = {"10": ["0000:00:01.1", "0000:01:00.0", "0000:01:00.1"], "11": ["0000:00:01.2"],
              "12": ["0000:02:00.0", "0000:02:00.1"], "13": ["0000:03:00.0"], **groups_override}
    return devices, groups


def test_every_nvidia_gpu_and_its_audio_by_default():
    devices, groups = two_gpu_host()
    plan = plan_host(devices, groups)
    assert plan.gpus == ["0000:01:00.0", "0000:02:00.0"]
    assert [f.bdf for f in plan.functions] == ["0000:01:00.0", "0000:01:00.1", "0000:02:00.0", "0000:02:00.1"]
    assert plan.vfio_ids == ["10de:2684", "10de:22ba"]
    assert plan.preceded_drivers == ["nvidia", "nouveau", "snd_hda_intel"]
    assert plan.groups_checked
    # The root port above the first GPU is in its group: a bridge, so no refusal.
    assert plan.refusals == []


def test_gpu_sharing_its_group_with_a_nic_is_refused_with_the_remedies():
    devices, groups = two_gpu_host(**{"12": ["0000:02:00.0", "0000:02:00.1", "0000:03:00.0"], "13": []})
    plan = plan_host(devices, groups)
    assert len(plan.refusals) == 1
    refusal = plan.refusals[0]
    assert "GPU 0000:02:00.0 shares IOMMU group 12 with 0000:03:00.0 (Ethernet controller [8086:1533], driver igb)" \
        in refusal
    assert "another slot" in refusal
    assert "ACS" in refusal
    assert "pcie_acs_override" in refusal and "isolation" in refusal


def test_a_device_in_the_group_that_sysfs_does_not_describe_is_refused_too():
    devices, groups = two_gpu_host(**{"10": ["0000:01:00.0", "0000:01:00.1", "0000:09:00.0"]})
    assert "0000:09:00.0 (class unknown [None:None], no driver)" in plan_host(devices, groups).refusals[0]


def test_gpus_sharing_one_group_are_allowed_and_said_to_go_together():
    devices, groups = two_gpu_host(**{"10": ["0000:00:01.1", "0000:01:00.0", "0000:01:00.1", "0000:02:00.0",
                                             "0000:02:00.1"], "12": []})
    plan = plan_host(devices, groups)
    assert plan.refusals == []
    assert plan.notes == ["GPUs 0000:01:00.0, 0000:02:00.0 share IOMMU group 10 (no ACS between them): they can only "
                          "be given to one VM together"]


def test_all_functions_of_the_board_go_to_vfio_pci():
    devices = [Device("0000:41:00.0", "10de", "1e87", GPU), Device("0000:41:00.1", "10de", "10f8", AUDIO),
               Device("0000:41:00.2", "10de", "1ad8", USB, "xhci_hcd"), Device("0000:41:00.3", "10de", "1ad9", UCSI)]
    plan = plan_host(devices, {"30": [d.bdf for d in devices]})
    assert plan.vfio_ids == ["10de:1e87", "10de:10f8", "10de:1ad8", "10de:1ad9"]
    assert plan.preceded_drivers == ["nvidia", "nouveau", "snd_hda_intel", "xhci_pci", "i2c_nvidia_gpu"]
    assert plan.refusals == []


def test_one_of_two_identical_gpus_is_refused_since_ids_bind_both():
    devices, groups = two_gpu_host()
    plan = plan_host(devices, groups, ["01:00.0"])
    assert plan.gpus == ["0000:01:00.0"]
    assert plan.host_nvidia_gpus == ["0000:02:00.0"]
    assert any("0000:02:00.0 (VGA controller [10de:2684], driver nouveau)" in r and "has the id 10de:2684" in r
               for r in plan.refusals)


def test_without_iommu_groups_the_check_waits_for_the_reboot():
    devices, _ = two_gpu_host()
    plan = plan_host(devices, {})
    assert not plan.groups_checked
    assert plan.refusals == []
    assert "checked after the reboot" in plan.notes[0]


def test_gpu_outside_every_group_while_groups_exist():
    devices, groups = two_gpu_host(**{"12": ["0000:02:00.1"]})
    assert "GPU 0000:02:00.0 is in no IOMMU group" in plan_host(devices, groups).refusals[0]


@pytest.mark.parametrize("choice", ["0000:03:00.0", "0000:7f:00.0"])
def test_a_choice_that_is_no_gpu(choice):
    devices, groups = two_gpu_host()
    with pytest.raises(PassthroughError, match=f"NVIDIA display or 3D controller.*found {choice}"):
        plan_host(devices, groups, [choice])


def test_host_without_nvidia_gpu():
    plan = plan_host([Device("0000:03:00.0", "8086", "1533", NIC)], {"1": ["0000:03:00.0"]})
    assert plan.gpus == [] and plan.vfio_ids == []
    assert "nothing to pass through" in plan.notes[0]


def test_3d_controllers_count_as_gpus():
    plan = plan_host([Device("0000:41:00.0", "10de", "2330", GPU_3D)], {"3": ["0000:41:00.0"]})
    assert plan.gpus == ["0000:41:00.0"]


def test_cmdline_rules_per_vendor():
    assert cmdline_rules("intel") == INTEL_CMDLINE
    assert cmdline_rules("amd") == AMD_CMDLINE
    with pytest.raises(PassthroughError, match=r"Intel or AMD CPU.*found none.*proxmox_gpu_host_cpu_vendor"):
        cmdline_rules(None)


def test_pending_until_the_kernel_has_it_all():
    devices, groups = two_gpu_host()
    plan = plan_host(devices, groups)
    now = {d.bdf: d.as_dict() for d in devices}
    reasons = pending_reasons(plan, now, False, INTEL_CMDLINE)
    assert reasons[0].startswith("the running kernel's command line lacks intel_iommu=on iommu=pt")
    assert "0000:01:00.1 is bound to snd_hda_intel, not vfio-pci" in reasons
    after = {bdf: {**d, "driver": "vfio-pci"} for bdf, d in now.items()}
    assert pending_reasons(plan, after, True, INTEL_CMDLINE) == []
