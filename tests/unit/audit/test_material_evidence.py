"""Every output of the material that lists GPUs counts for the GPU count and names, and the driver's own word
on virtualization (nvidia-smi -q's GPU Virtualization Mode) counts as evidence, with its source: the real audit
over captures built from single pasted outputs."""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture

from tests.paths import FIXTURES
from tests.unit.material.test_capture import audit

SMI = FIXTURES / "nvidia-smi"


def audited(*names: str, rename: dict[str, str] | None = None) -> dict:
    rename = rename or {}
    return audit(build_capture([(rename.get(name, name), (SMI / name).read_bytes()) for name in names]))


@pytest.mark.parametrize(("name", "count", "models"), [
    ("list-gpus_570_TITAN-V_RTX-5880-Ada.txt", 2, ["NVIDIA RTX 5880 Ada Generation", "NVIDIA TITAN V"]),
    ("list-gpus_535_A100-80GB-MIG-7x1g.10gb.txt", 1, ["NVIDIA A100-SXM4-80GB"]),
    ("topo-m_2018_8gpu-PIX-PXB-mlx5.txt", 8, []),
    ("topo-p2p-r_8gpu-vm-NS.txt", 8, []),
    ("topo-m_8xH20-vm-NV18-8nics_spaces_cut-after-GPU5_excerpt.txt", 8, []),  # a real paste cut after GPU5's row
    ("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt", 2, ["NVIDIA RTX PRO 6000 Blackwell Server Edition"]),
    ("q_418_2xV100-SXM2_throttle-retired.xml", 2, ["Tesla V100-SXM2-16GB"]),
])
def test_any_output_that_lists_gpus_gives_their_count(name, count, models) -> None:
    facts = audited(name)
    assert facts["summary"]["gpu_count"] == count
    assert facts["summary"]["gpu_models"] == models
    assert "gpus" not in facts["not_seen"]


def test_nvidia_smi_l_names_the_gpus_a_matrix_shows_by_index() -> None:
    capture = build_capture([
        ("p2p_read.txt", b" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n"),
        ("gpus.txt", (SMI / "list-gpus_570_TITAN-V_RTX-5880-Ada.txt").read_bytes()),
    ])
    facts = audit(capture)
    assert [d["name"] for d in facts["gpus"]["devices"]] == ["NVIDIA TITAN V", "NVIDIA RTX 5880 Ada Generation"]
    seen = {s["what"]: s["from"] for s in capture["from_material"]["seen"]}
    assert seen["GPU count from nvidia-smi -L"] == ["gpus.txt"]


def test_nvidia_smi_l_is_unread_where_another_output_names_the_gpus() -> None:
    capture = build_capture([(n, (SMI / n).read_bytes()) for n in (
        "list-gpus_570_TITAN-V_RTX-5880-Ada.txt", "q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt")])
    assert "GPU count from nvidia-smi -L" in {u["what"] for u in capture["from_material"]["unread"]}


def test_a_passed_through_gpu_makes_a_virtual_machine_with_its_source() -> None:
    virt = audited("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt")["virtualization"]
    assert virt["type"] == "vm"
    assert {"signal": "nvidia-smi -q GPU Virtualization Mode", "value": "Pass-Through on 2 GPU(s)", "says": "vm",
            "weight": "strong"} in virt["evidence"]


@pytest.mark.parametrize("name", ["q_550_2xH100-HBM3_fabric.txt", "q_470_A100-SXM4-40GB_remap-pending.txt",
                                  "q_550_2xH100-HBM3_fabric.xml"])
def test_virtualization_mode_none_makes_no_claim(name) -> None:
    virt = audited(name)["virtualization"]
    assert virt["type"] is None and virt["evidence"] == []


LSPCI = FIXTURES / "pci" / "lspci"


@pytest.mark.parametrize(("name", "machine"), [("q35-guest.lspci-3.14.0.vvv-nn-D.root.txt", "q35"),
                                               ("q35-guest.lspci-3.9.0.vvv-nn-D.user.txt", "q35"),
                                               ("i440fx-guest.lspci-3.9.0.vvv-nn-D.root.txt", "i440fx")])
def test_a_pasted_lspci_of_a_guest_shows_the_hypervisor_with_its_source(name, machine) -> None:
    capture = build_capture([(name, (LSPCI / name).read_bytes())])
    virt = audit(capture)["virtualization"]
    assert virt["type"] == "vm" and virt["hypervisor"] == "kvm" and virt["machine_type"] == machine
    assert any(e["signal"] == "lspci 0000:00:00.0" and f"{machine} host bridge" in e["value"] for e in virt["evidence"])
    assert "lspci -vvv -D (ACS and port types when config space is unreadable)" in {
        s["what"] for s in capture["from_material"]["seen"]}


def test_lspci_without_ids_names_the_emulated_devices() -> None:
    # The q35 guest's lspci with its [vendor:device] ids taken out (as lspci prints without -nn).
    text = (LSPCI / "q35-guest.lspci-3.14.0.vvv-nn-D.root.txt").read_text()
    plain = re.sub(r" \[[0-9a-f]{4}:[0-9a-f]{4}\]", "", text)
    assert plain != text
    virt = audit(build_capture([("lspci.txt", plain.encode())]))["virtualization"]
    assert virt["type"] == "vm" and virt["machine_type"] == "q35"
    assert any(e["signal"] == "lspci" and "Red Hat / QEMU" in e["value"] for e in virt["evidence"])


@pytest.mark.parametrize("name", ["host.lspci-3.14.0.vvv-nn-D.root.txt", "host.lspci-3.7.0.vvv-nn-D.root.txt",
                                  "quadro-rtx4000-host.lspci-vvv-s_cut-in-devctl_excerpt.txt"])
def test_a_hosts_lspci_makes_no_virtualization_claim(name) -> None:
    virt = audit(build_capture([(name, (LSPCI / name).read_bytes())]))["virtualization"]
    assert virt["type"] is None and virt["evidence"] == []


P2P_NS = (SMI / "topo-p2p-r_8gpu-vm-NS.txt").read_text()


def test_a_matrix_quoted_whole_in_a_reply_is_read() -> None:
    quoted = "".join(f"> {line}\n" for line in ["$ nvidia-smi topo -p2p r", *P2P_NS.split("\n")])
    facts = audit(build_capture([("reply.txt", quoted.encode())]))
    assert facts["summary"]["p2p"] == "none" and facts["summary"]["gpu_count"] == 8
    assert "p2p_not_supported" in {f["id"] for f in facts["findings"]}


def test_a_matrix_cut_after_some_rows_is_judged_on_the_rows_it_holds_and_says_so() -> None:
    cut = "$ nvidia-smi topo -p2p r\n" + "\n".join(P2P_NS.split("\n")[:6])  # header and GPU0..GPU4
    facts = audit(build_capture([("cut.txt", cut.encode())]))
    found = {f["id"]: f for f in facts["findings"]}
    assert found["p2p_not_supported"]["evidence"]["pairs_without_p2p"] == 35
    assert found["p2p_not_supported"]["evidence"]["pairs_not_read"] == 21
    assert facts["p2p"]["read"][5] == [None] * 8
    assert any("rows GPU5, GPU6, GPU7 are missing" in p["error"] for p in facts["problems"])
    assert facts["summary"]["gpu_count"] == 8


def test_a_cut_matrix_is_refused_where_a_host_printed_it() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo import parse_topo_p2p

    cut = "\n".join(P2P_NS.split("\n")[:6])
    with pytest.raises(NvidiaSmiParseError, match="Rows for GPU5, GPU6, GPU7 are missing"):
        parse_topo_p2p(cut)
    # Rows lost inside the matrix, with its legend after, are no cut paste: refused either way.
    with pytest.raises(NvidiaSmiParseError):
        parse_topo_p2p("\n".join(P2P_NS.split("\n")[:6]) + "\n\nLegend:\n\n  X    = Self\n", cut_ok=True)


NCCL = FIXTURES / "nccl"


def test_the_topology_an_nccl_info_log_prints_in_a_guest_votes_for_kvm() -> None:
    # A real guest's log (nccl-tests#256): QEMU's x3130-upstream ports above each GPU and NIC, the one sign of a
    # hypervisor in it. It counts in the one virtualization vote, with its source, as an lspci of the guest would.
    name = "nccl-debug_topology-print_H200-vm-xio3130-ports_excerpt.log"
    virt = audit(build_capture([(name, (NCCL / name).read_bytes())]))["virtualization"]
    assert virt["type"] == "vm" and virt["hypervisor"] == "kvm"
    assert virt["evidence"] == [{
        "signal": "NCCL_DEBUG=INFO topology", "says": "kvm", "weight": "strong",
        "value": "104c:8232 TI XIO3130 upstream port (QEMU x3130-upstream) at PCI/0-65000, PCI/0-69000, PCI/0-6d000"}]


@pytest.mark.parametrize("ids", ["1b36000c00000000", "1af4104100000000"])
def test_a_qemu_or_virtio_device_in_nccls_topology_names_kvm(ids) -> None:
    log = f"h:1:2 [0] NCCL INFO + PCI[24.0] - PCI/0-1000 ({ids})\n".encode()
    virt = audit(build_capture([("nccl.log", b"h:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + log)]))
    assert virt["virtualization"]["type"] == "vm" and virt["virtualization"]["hypervisor"] == "kvm"


@pytest.mark.parametrize("name", ["nccl-debug_2.1x_p2p-ipc-read_net-socket_16rank.log",
                                  "nccl-debug_2.2x_p2p-cumem_net-ib-gdrdma_2x2xH20.log"])
def test_an_nccl_log_without_emulated_devices_makes_no_virtualization_claim(name) -> None:
    text = (NCCL / name).read_bytes() + b"h:1:2 [0] NCCL INFO + PCI[24.0] - PCI/0-6000 (1000c0101000a000)\n"
    virt = audit(build_capture([(name, text)]))["virtualization"]
    assert virt["type"] is None and virt["evidence"] == []


def test_a_topo_matrix_cut_after_some_rows_is_read_and_says_so() -> None:
    facts = audited("topo-m_8xH20-vm-NV18-8nics_spaces_cut-after-GPU5_excerpt.txt")
    topology = facts["topology"]
    assert topology["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topology["matrix"][1][0] == "NV18" and topology["matrix"][6] == [None] * 8
    assert topology["numa_affinity"] == [0, 0, 0, 0, 1, 1, None, None]
    assert any(p["what"] == "nvidia-smi topo -m" and "rows GPU6, GPU7, NIC0" in p["error"] for p in facts["problems"])
