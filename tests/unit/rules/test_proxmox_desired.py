"""The GPU passthrough config a Proxmox VM needs for P2P, the changes to it and the `qm set` that makes them.

Real-format fixtures (tests/fixtures/proxmox/, sources in its SOURCES.md), then generated configs: whatever
the config, writing the changes gives a config that needs none.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    clique_of,
    parse_args,
    parse_vm_config,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config_edit import apply_to_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_desired import DesiredStateError, desired_state
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import (
    proposed_args,
    qm_set,
    qm_set_argv,
    without_kvm_off,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import paths

FIXTURES = paths.FIXTURES / "proxmox"


def config_of(name: str) -> Any:
    return parse_vm_config((FIXTURES / name).read_bytes())


def changes(state: Any) -> dict[str, tuple[str | None, str | None]]:
    return {c.key: (c.old, c.new) for c in state.changes}


def test_hidden_whole_devices_are_named_and_shown_kvm() -> None:
    config = config_of("q35-4gpu-hidden-short-form_pve7.4.conf")
    state = desired_state(config, 210, ["hostpci0", "hostpci1", "hostpci2", "hostpci3"], host_numa_nodes=2)
    assert changes(state) == {
        "hostpci0": ("0000:01:00,pcie=1,x-vga=1", "0000:01:00.0,pcie=1"),
        "hostpci1": ("0000:41:00,pcie=1", "0000:41:00.0,pcie=1"),
        "cpu": ("host,hidden=1,flags=+pdpe1gb", "host,flags=+pdpe1gb"),
        "args": ("-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0",
                 "-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0 "
                 "-set device.hostpci2.x-nv-gpudirect-clique=0 -set device.hostpci3.x-nv-gpudirect-clique=0"),
        "balloon": ("16384", "0"),
        "numa": ("0", "1"),
    }
    # Short ids (81:00.0) already name their function; machine pc-q35-7.2 is q35: both stay as written.
    assert state.values["hostpci2"] == "81:00.0,pcie=1,rombar=0" and state.values["machine"] == "pc-q35-7.2"
    argv = state.argv()
    assert argv[:3] == ["qm", "set", "210"] and argv[argv.index("--args") + 1].count("-set") == 4
    assert shlex.split(state.command()) == argv
    assert state.restart_command() == "qm shutdown 210 && qm start 210"


def test_i440fx_becomes_q35_with_pcie_and_named_functions() -> None:
    state = desired_state(config_of("i440fx-default-machine_2gpu_pve6.conf"), 105, ["hostpci0", "hostpci1"],
                          host_numa_nodes=1)
    assert state.command() == (
        "qm set 105 --machine q35 --hostpci0 0000:0f:00.0,pcie=1 --hostpci1 0000:10:00.0,rombar=0,pcie=1 "
        "--cpu host --args '-set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0'"
        " --balloon 0")
    assert "numa" not in changes(state)  # one host node: numa=auto leaves it


def test_a_config_already_right_gives_no_change() -> None:
    config = config_of("q35-8gpu-clique-ok_pve8.3.conf")
    state = desired_state(config, 130, [f"hostpci{i}" for i in range(8)], host_numa_nodes=2)
    assert not state.changed and state.argv() == [] and state.command() is None
    assert state.mismatches(config.effective()) == [] and state.pending_keys(config) == []


def test_existing_shared_clique_is_kept_and_pending_deletions_count() -> None:
    config = config_of("odd-spacing-crlf-pending-cloudinit.conf")
    state = desired_state(config, 140, ["hostpci0", "hostpci1"], host_numa_nodes=2)
    # Both GPUs are in clique 2 already; cpu cputype=host and machine q35,viommu=virtio mean the target.
    assert changes(state) == {"balloon": ("8192", "0"), "numa": (None, "1")}  # numa: deleted in [PENDING]
    assert [g.clique for g in state.gpus] == [2, 2]


def test_mapped_gpus_keep_their_mapping_and_lose_kvm_off() -> None:
    state = desired_state(config_of("q35-mapping-global-clique_pve8.2.conf"), 150, ["hostpci0", "hostpci1"],
                          numa=False)
    assert changes(state)["args"][1] == ("-global vfio-pci.x-nv-gpudirect-clique=1 -cpu host,+invtsc "
                                         "-set device.hostpci0.x-nv-gpudirect-clique=1 "
                                         "-set device.hostpci1.x-nv-gpudirect-clique=1")
    assert "hostpci0" not in changes(state) and [g.bdf for g in state.gpus] == [None, None]
    assert any("mapping pro6000-a" in w for w in state.warnings)


def test_gpu_by_function_gets_the_lowest_free_line_and_cliques_by_group() -> None:
    config = parse_vm_config("machine: q35\nhostpci1: 0000:41:00.0,pcie=1\nhostpci2: 0000:02:00.0\n")
    state = desired_state(config, 160, ["41:00.0", "0000:42:00.0", "0000:43:00.0"],
                          cliques=[["hostpci1", "0000:42:00.0"], ["0000:43:00.0"]], numa=True)
    assert [(g.id, g.bdf, g.clique, g.added) for g in state.gpus] == [
        ("hostpci0", "0000:42:00.0", 0, True), ("hostpci1", "0000:41:00.0", 0, False),
        ("hostpci3", "0000:43:00.0", 1, True)]
    assert changes(state)["hostpci0"] == (None, "0000:42:00.0,pcie=1")
    assert "hostpci2" not in state.values  # not a GPU of this change, and nothing to take off it
    by_mapping = desired_state(config, 160, ["hostpci1", "0000:42:00.0"], cliques={"3": ["hostpci1"],
                                                                                  5: ["0000:42:00.0"]})
    assert [g.clique for g in by_mapping.gpus] == [5, 3]


def test_hidden_goes_from_every_line_and_x_vga_elsewhere_keeps_kvm_shown() -> None:
    config = parse_vm_config("machine: q35\ncpu: host\nhostpci0: 0000:41:00.0,pcie=1\n"
                             "hostpci1: 0000:05:00.0,x-vga=1,hidden=1\n")
    state = desired_state(config, 170, ["hostpci0"], numa=False)
    assert changes(state)["hostpci1"] == ("0000:05:00.0,x-vga=1,hidden=1", "0000:05:00.0,x-vga=1")
    assert changes(state)["cpu"] == ("host", "host,hidden=0")


@pytest.mark.parametrize(("gpus", "cliques", "numa", "message"), [
    (["hostpci7"], None, "auto", "among the VM's hostpci lines"),
    (["41:00"], None, "auto", "with its function"),
    (["gpu0"], None, "auto", "host PCI function"),
    ([], None, "auto", "non-empty list"),
    (["hostpci0", "0000:41:00.0"], None, "auto", "each GPU once"),
    (["hostpci0"], [["hostpci0"], ["hostpci0"]], "auto", "in one clique"),
    (["hostpci0"], {"16": ["hostpci0"]}, "auto", "clique ids 0..15"),
    (["hostpci0"], [["hostpci5"]], "auto", "among the GPUs managed"),
    (["hostpci0", "0000:42:00.0"], [["hostpci0"]], "auto", "found none for 0000:42:00.0"),
    (["hostpci0"], "0,1", "auto", "list of GPU groups"),
    (["hostpci0"], [[]], "auto", "non-empty list of GPUs"),
    (["hostpci0"], None, "maybe", "auto, true or false"),
])
def test_bad_choices_say_what_was_expected(gpus: list, cliques: Any, numa: Any, message: str) -> None:
    config = parse_vm_config("hostpci0: 0000:41:00.0\n")
    with pytest.raises(DesiredStateError, match=message):
        desired_state(config, 100, gpus, cliques=cliques, numa=numa)


def test_unsplittable_args_and_a_full_vm_are_refused() -> None:
    with pytest.raises(DesiredStateError, match="Fix its quoting by hand"):
        desired_state(parse_vm_config("hostpci0: 0000:41:00.0\nargs: -set 'device\n"), 100, ["hostpci0"])
    full = parse_vm_config("".join(f"hostpci{i}: 0000:{i + 16:02x}:00.0\n" for i in range(16)))
    with pytest.raises(DesiredStateError, match="free hostpci line"):
        desired_state(full, 100, ["0000:99:00.0"])


def test_unknown_host_numa_is_a_warning_not_a_guess() -> None:
    state = desired_state(parse_vm_config("hostpci0: 0000:41:00.0\n"), 100, ["hostpci0"])
    assert "numa" not in changes(state) and any("NUMA node count is unknown" in w for w in state.warnings)


def test_shared_helpers_of_the_audit_plans() -> None:
    assert qm_set_argv(5, [("args", "-set a=1")], ["numa", "hugepages"]) == [
        "qm", "set", "5", "--args", "-set a=1", "--delete", "numa,hugepages"]
    assert qm_set(5, ("args", "-set a=1")) == "qm set 5 --args '-set a=1'"
    assert without_kvm_off("host, kvm=off,+invtsc") == "host,+invtsc" and without_kvm_off("kvm=off") == ""
    # A -cpu left with nothing once kvm=off is gone is dropped, never passed to QEMU empty.
    vm = {"vmid": 7, "args": "-cpu kvm=off -device x", "hostpci": []}
    plan = type("Plan", (), {"vm": vm, "gpus": [], "several_gpus": True, "mmio_small": False})()
    assert proposed_args(plan) == "-device x"


# ---------------------------------------------------------------------------
# Generated configs: the written change needs no further change, whatever the config was

HOSTS = ["0000:41:00.0", "41:00", "0000:42:00.0;0000:42:00.1", "c1:00.0"]
HOSTPCI_OPTIONS = ["pcie=1", "x-vga=1", "hidden=1", "rombar=0", "pcie=on"]


@st.composite
def vm_configs(draw: st.DrawFn) -> tuple[str, list[str]]:
    lines = ["#generated", "cores: 8"]
    for key, choices in (("machine", ["q35", "pc-q35-8.1", "pc", "pc-i440fx-7.2", "q35,viommu=virtio"]),
                         ("cpu", ["host", "host,hidden=1", "kvm64", "cputype=host,flags=+pdpe1gb",
                                  "x86-64-v2,hidden=1"]),
                         ("balloon", ["0", "4096"]), ("numa", ["0", "1"])):
        value = draw(st.one_of(st.none(), st.sampled_from(choices)))
        if value is not None:
            lines.append(f"{key}: {value}")
    indexes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True))
    for n, index in enumerate(indexes):
        host = HOSTS[n].replace("4", str(n + 4), 1)
        extra = draw(st.lists(st.sampled_from(HOSTPCI_OPTIONS), max_size=2, unique=True))
        lines.append(f"hostpci{index}: " + ",".join([host, *extra]))
    words = draw(st.lists(st.sampled_from([
        "-set device.hostpci{i}.x-nv-gpudirect-clique=3", "-cpu host,kvm=off", "-device virtio-rng-pci",
        "'-set' 'device.hostpci{i}.x-nv-gpudirect-clique=1'", "-global vfio-pci.x-nv-gpudirect-clique=2"]),
        max_size=3))
    if words:
        lines.append("args: " + " ".join(w.format(i=draw(st.sampled_from(indexes))) for w in words))
    if draw(st.booleans()):
        lines += ["", "[PENDING]", f"cpu: {draw(st.sampled_from(['host,hidden=1', 'kvm64']))}"]
    gpus = draw(st.lists(st.sampled_from([f"hostpci{i}" for i in indexes] + ["0000:91:00.0", "0000:92:00.0"]),
                         min_size=1, max_size=4, unique=True))
    return "\n".join(lines) + "\n", gpus


@settings(max_examples=120, deadline=None)
@given(vm_configs(), st.sampled_from(["auto", True, False]), st.sampled_from([None, 1, 2]), st.booleans(),
       st.booleans())
def test_the_written_change_is_the_target(generated: tuple[str, list[str]], numa: Any, nodes: int | None,
                                          grouped: bool, pending: bool) -> None:
    text, gpus = generated
    cliques = [gpus[::2], gpus[1::2]] if grouped and len(gpus) > 1 else None
    state = desired_state(parse_vm_config(text), 300, gpus, cliques=cliques, numa=numa, host_numa_nodes=nodes)
    written = parse_vm_config(apply_to_text(text, state.text_changes(), pending=pending))
    assert state.mismatches(written.effective()) == []
    again = desired_state(written, 300, gpus, cliques=cliques, numa=numa, host_numa_nodes=nodes)
    assert again.changes == [], again.changes
    args = parse_args(written.effective().get("args"))
    assert {g.id: clique_of(args, g.id)[0] for g in state.gpus} == {g.id: g.clique for g in state.gpus}
    effective = written.effective()
    assert "hidden" not in effective.get("cpu", "") or "hidden=0" in effective["cpu"]
    assert all("hidden" not in v for k, v in effective.items() if k.startswith("hostpci"))
    assert (state.pending_keys(written) != []) == (pending and state.changed)
