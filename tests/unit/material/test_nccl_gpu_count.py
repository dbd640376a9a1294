"""The GPUs of material whose only GPU list is NCCL's: an NCCL_DEBUG=INFO log's communicator init lines
(``rank N nranks M cudaDev D busId B``) or an NCCL topology dump's ``<gpu dev=...>`` under ``<pci busid=...>``.
Never "GPUs: none found" beside them; a log of several hosts cannot tell this host's GPUs and says so."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture

from tests.paths import FIXTURES
from tests.unit.material.test_capture import audit

NCCL = FIXTURES / "nccl"


def audited(*inputs: tuple[str, bytes]) -> tuple[dict, dict]:
    capture = build_capture(list(inputs))
    return capture, audit(capture)


@pytest.mark.parametrize(("name", "buses"), [
    # Real 2.7.8 log of 2 hosts x 4 GPUs, of which the excerpt holds tesla-105's init lines only.
    ("nccl-debug_2.7.8_channel-busid-p2p-ipc-shm-net-socket_2x4gpu_excerpt.log",
     ["0000:18:00.0", "0000:1a:00.0", "0000:af:00.0", "0000:b1:00.0"]),
    # The same records without host:pid:tid.
    ("nccl-debug_2.7.8_rank-only-prefix_constructed-from-excerpt.log",
     ["0000:18:00.0", "0000:1a:00.0", "0000:af:00.0", "0000:b1:00.0"]),
    ("nccl-topo-dump_2xRTXPRO6000-q35-flat-bus-vm_constructed.xml", ["0000:00:10.0", "0000:00:11.0"]),
    # A real guest's dump (NVIDIA/nccl#1329): four A800 on the root bus.
    ("nccl-topo-dump_4xA800-vm-gpus-on-bus-00_no-link-speed.xml",
     ["0000:00:09.0", "0000:00:0a.0", "0000:00:0b.0", "0000:00:0c.0"]),
    # A real dump pasted from the middle of its tree (no <system>): its two GPUs all the same.
    ("nccl-topo-dump_2.1x_8xH100-nvlink-nic_starts-mid-tree_excerpt.xml", ["0000:b8:00.0", "0000:d9:00.0"]),
])
def test_an_nccl_output_alone_gives_the_gpus_it_shows(name, buses) -> None:
    capture, facts = audited((name, (NCCL / name).read_bytes()))
    assert facts["gpus"]["source"] == "nccl"
    assert facts["summary"]["gpu_count"] == len(buses)
    assert sorted(d["pci_bus_id"] for d in facts["gpus"]["devices"]) == buses
    assert "gpus" not in facts["not_seen"]
    assert capture["from_material"]["unmapped"] == []  # read, not "Not used"
    assert any(name in item["from"] for item in capture["from_material"]["seen"])


def test_the_dump_gives_each_gpus_compute_capability_from_its_sm() -> None:
    name = "nccl-topo-dump_2xRTXPRO6000-q35-flat-bus-vm_constructed.xml"
    _, facts = audited((name, (NCCL / name).read_bytes()))
    assert [d["compute_capability"] for d in facts["gpus"]["devices"]] == ["12.0", "12.0"]


def test_an_nccl_log_of_several_hosts_gives_no_gpu_count_and_says_why() -> None:
    # Constructed: two hosts' init lines in one log (NCCL 2.7+ form, src/init.cc "Init COMPLETE").
    log = (b"node-a:10:10 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE\n"
           b"node-b:20:20 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1a000 - Init COMPLETE\n")
    _, facts = audited(("nccl.log", log))
    assert facts["gpus"]["count"] == 0 and facts["gpus"]["source"] is None
    assert "gpus" in facts["not_seen"]
    assert any("2 hosts" in problem.get("error", "") for problem in facts["problems"])


def test_an_nccl_list_never_overrides_nvidia_smis() -> None:
    name = "nccl-topo-dump_2xRTXPRO6000-q35-flat-bus-vm_constructed.xml"
    listed = FIXTURES / "nvidia-smi" / "list-gpus_570_TITAN-V_RTX-5880-Ada.txt"
    _, facts = audited((name, (NCCL / name).read_bytes()), ("gpus.txt", listed.read_bytes()))
    assert facts["gpus"]["source"] == "nvidia-smi"
    assert facts["summary"]["gpu_models"] == ["NVIDIA RTX 5880 Ada Generation", "NVIDIA TITAN V"]


def test_a_real_guests_flat_dump_votes_for_a_vm_once() -> None:
    name = "nccl-topo-dump_4xA800-vm-gpus-on-bus-00_no-link-speed.xml"
    _, facts = audited((name, (NCCL / name).read_bytes()))
    virt = facts["virtualization"]
    assert virt["type"] == "vm"
    assert [e["weight"] for e in virt["evidence"] if e["signal"] == "NCCL topology dump"] == ["strong", "weak", "weak"]


# A guest's dump with each GPU behind one of QEMU's pcie-root-ports (1b36:000c) and a virtio NIC (1af4:1041), in the
# attribute layout of the real dumps above (NCCL's xml.cc writes vendor and device for every <pci>).
QEMU_PORTS_DUMP = (
    '<system version="1">\n  <cpu numaid="-1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">\n'
    + "".join(
        f'    <pci busid="0000:00:1{i}.0" class="0x060400" vendor="0x1b36" device="0x000c" subsystem_vendor="0x0000" '
        f'subsystem_device="0x0000" link_speed="16.0 GT/s PCIe" link_width="32">\n'
        f'      <pci busid="0000:0{i + 1}:00.0" class="0x030200" vendor="0x10de" device="0x2335" subsystem_vendor='
        f'"0x10de" subsystem_device="0x18be" link_speed="32.0 GT/s PCIe" link_width="16">\n'
        f'        <gpu dev="{i}" sm="90" rank="{i}" gdr="1"/>\n      </pci>\n    </pci>\n' for i in range(2))
    + '    <pci busid="0000:00:03.0" class="0x020000" vendor="0x1af4" device="0x1041" subsystem_vendor="0x1af4" '
      'subsystem_device="0x1100" link_speed="" link_width="0">\n'
      '      <nic>\n        <net name="eth0" dev="0" speed="10000" port="0" gdr="0"/>\n      </nic>\n    </pci>\n'
      "  </cpu>\n</system>\n")


def test_qemu_devices_in_a_dump_vote_for_kvm_once_per_kind() -> None:
    _, facts = audited(("topo.xml", QEMU_PORTS_DUMP.encode()))
    virt = facts["virtualization"]
    assert virt["type"] == "vm" and virt["hypervisor"] == "kvm"
    strong = [e["value"] for e in virt["evidence"] if e["weight"] == "strong"]
    assert strong == ["1b36:000c QEMU emulated device (Red Hat) at 0000:00:10.0, 0000:00:11.0",
                      "1af4:1041 virtio device (Red Hat / QEMU) at 0000:00:03.0"]


def test_a_bare_metal_dumps_switches_make_no_claim() -> None:
    name = "nccl-topo-dump_2.2x_8xH200-baremetal-switch-nic_excerpt.xml"
    _, facts = audited((name, (NCCL / name).read_bytes()))
    assert facts["virtualization"]["type"] is None and facts["virtualization"]["evidence"] == []
