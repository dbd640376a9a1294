"""nvidia-smi -q (text) and -q -x (XML), over reconstructed outputs of several driver generations
(tests/fixtures/nvidia-smi/q_*, see SOURCES.md) and the ways pastes change them."""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q import (
    CLOCKS_EVENT_REASONS,
    health_view,
    parse_nvidia_smi_q,
    parse_nvidia_smi_q_text,
    parse_nvidia_smi_q_xml,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_build import build_gpu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths

FIXTURES = paths.FIXTURES / "nvidia-smi"
Q_FIXTURES = sorted(path.name for path in FIXTURES.iterdir() if path.name.startswith("q_"))
TEXT_FIXTURES = [name for name in Q_FIXTURES if name.endswith(".txt")]
XML_FIXTURES = [name for name in Q_FIXTURES if name.endswith(".xml")]
PAIRS = [name[:-4] for name in XML_FIXTURES if name[:-4] + ".txt" in TEXT_FIXTURES]


def fixture(name: str) -> str:
    with open(FIXTURES / name, encoding="utf-8", newline="") as handle:
        return handle.read()


def summary(gpu: Any) -> dict[str, Any]:
    """What the golden expectations pin, besides health_view: identity and the sections in full."""
    ecc = gpu.ecc_errors
    return {
        "position": gpu.position, "index": gpu.index, "bus_id": gpu.bus_id, "uuid": gpu.uuid,
        "minor_number": gpu.minor_number, "product_name": gpu.product_name, "fb_total_mib": gpu.fb_total_mib,
        "pcie_device_host_max": (gpu.pcie.gen_device_max, gpu.pcie.gen_host_max),
        "ecc": None if ecc is None else (
            ecc.layout,
            ecc.volatile and (ecc.volatile.correctable, ecc.volatile.uncorrectable),
            ecc.aggregate and (ecc.aggregate.correctable, ecc.aggregate.uncorrectable)),
        "retired": None if gpu.retired_pages is None else (
            gpu.retired_pages.single_bit, gpu.retired_pages.double_bit, gpu.retired_pages.pending),
        "rows": None if gpu.remapped_rows is None else (
            gpu.remapped_rows.correctable, gpu.remapped_rows.uncorrectable, gpu.remapped_rows.histogram),
        "fabric": None if gpu.fabric is None else (
            gpu.fabric.state, gpu.fabric.status, gpu.fabric.clique_id, gpu.fabric.cluster_uuid),
        "in_vm": gpu.in_vm,
        "unread": gpu.unread,
    }


def pcie(gen_current: int | None, gen_max: int | None, width_current: int | None, width_max: int | None) -> dict:
    return {"gen_current": gen_current, "gen_max": gen_max, "width_current": width_current, "width_max": width_max}


def health(**fields: Any) -> dict[str, Any]:
    base = {"ecc_mode": None, "ecc_uncorrected_volatile": None, "ecc_uncorrected_aggregate": None,
            "retired_pages_pending": None, "remapped_rows_pending": None, "remapped_rows_failed": None,
            "clocks_event_reasons": None, "persistence_mode": None, "virtualization_mode": None,
            "bar1_total_mib": None, "pcie": pcie(None, None, None, None)}
    unknown = set(fields) - set(base)
    assert not unknown, unknown
    return {**base, **fields}


def gpu_summary(**fields: Any) -> dict[str, Any]:
    base = {"position": 0, "index": 0, "bus_id": None, "uuid": None, "minor_number": None, "product_name": None,
            "fb_total_mib": None, "pcie_device_host_max": (None, None), "ecc": None, "retired": None, "rows": None,
            "fabric": None, "in_vm": None, "unread": {}}
    assert not set(fields) - set(base), set(fields) - set(base)
    return {**base, **fields}


ZERO_HIST = {"max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0}
V100 = {"product_name": "Tesla V100-SXM2-16GB", "fb_total_mib": 16130, "in_vm": False}
V100_HEALTH = {"ecc_mode": True, "persistence_mode": True, "virtualization_mode": "None", "bar1_total_mib": 16384,
               "pcie": pcie(3, 3, 16, 16)}
H100 = {"product_name": "NVIDIA H100 80GB HBM3", "fb_total_mib": 81559, "pcie_device_host_max": (5, 5), "in_vm": False,
        "fabric": ("Completed", "Success", 0, "00000000-0000-0000-0000-000000000000")}
H100_HEALTH = {"ecc_mode": True, "persistence_mode": True, "virtualization_mode": "None", "bar1_total_mib": 131072,
               "pcie": pcie(5, 5, 16, 16), "remapped_rows_pending": False, "remapped_rows_failed": False}
PRO6000 = {"product_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "fb_total_mib": 97887,
           "pcie_device_host_max": (5, None), "ecc": ("sram_dram", (0, 0), (0, 0)),
           "rows": (0, 0, {"max": 512, "high": 0, "partial": 0, "low": 0, "none": 0}), "in_vm": True}
PRO6000_HEALTH = {"ecc_mode": True, "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
                  "remapped_rows_pending": False, "remapped_rows_failed": False, "clocks_event_reasons": ["gpu_idle"],
                  "persistence_mode": True, "virtualization_mode": "Pass-Through", "bar1_total_mib": 131072,
                  "pcie": pcie(1, 5, 16, 16)}

# fixture -> (header: driver, cuda, attached, complete), [(summary, health_view) per GPU]
EXPECTED: dict[str, tuple[tuple[Any, ...], list[tuple[dict[str, Any], dict[str, Any]]]]] = {
    "q_340_GeForce-8800-GT_legacy-na.txt": (("340.106", None, 1, None), [(
        gpu_summary(bus_id="0000:01:00.0", uuid="GPU-5c0d9e41-7a2b-33f8-0e61-b8a4c2d71f90", minor_number=0,
                    product_name="GeForce 8800 GT", fb_total_mib=511),
        health(persistence_mode=False),
    )]),
    # A real 390 paste (DTD v9) behind its shell prompt and a Markdown fence, cut after the part number: what it
    # printed is read, the rest is None and complete is False.
    "q_390_GeForce-410M_dtd-v9_prompt-fence_cut.xml": (("390.157", None, 1, False), [(
        gpu_summary(bus_id="0000:01:00.0", uuid="GPU-xxxxx11f-ce5d-xxxx-xxxx-6ea62fb1xxxx", minor_number=0,
                    product_name="GeForce 410M"),
        health(persistence_mode=False),
    )]),
    # A real R410 `nvidia-smi -a` of a laptop GPU (netdata/netdata#4892), cut after the Inforom section: what it
    # printed is read; PCIe, ECC, memory and virtualization mode are beyond the cut, so None.
    "q_410_GeForce-GTX-960M_nvidia-smi-a_cut-after-inforom_excerpt.txt": (("410.72", "10.0", 1, None), [(
        gpu_summary(bus_id="0000:01:00.0", uuid="GPU-00000000-0000-0000-0000-000000000001", minor_number=0,
                    product_name="GeForce GTX 960M"),
        health(persistence_mode=False),
    )]),
    "q_418_2xV100-SXM2_throttle-retired.txt": (("418.87.01", "10.1", 2, None), [
        (gpu_summary(bus_id="0000:18:00.0", uuid="GPU-6a3b1f0e-2c7d-4e19-8b5a-0f2d9c41e7a3", minor_number=0,
                     ecc=("bit", (0, 0), (0, 0)), retired=(0, 0, False), **V100),
         health(ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0, retired_pages_pending=False,
                clocks_event_reasons=["gpu_idle"], **V100_HEALTH)),
        (gpu_summary(position=1, index=1, bus_id="0000:3b:00.0", uuid="GPU-d81e0c57-93af-6b24-17c0-5e4a8f2b9d16",
                     minor_number=1, ecc=("bit", (2, 1), (3, 1)), retired=(1, 1, True), **V100),
         health(ecc_uncorrected_volatile=1, ecc_uncorrected_aggregate=1, retired_pages_pending=True,
                clocks_event_reasons=["sw_power_cap"], **V100_HEALTH)),
    ]),
    "q_470_A100-SXM4-40GB_remap-pending.txt": (("470.82.01", "11.4", 1, None), [(
        gpu_summary(bus_id="0000:07:00.0", uuid="GPU-3f8e2a61-b04c-7d19-c5e2-9a07d6b1f428", minor_number=2,
                    product_name="NVIDIA A100-SXM4-40GB", fb_total_mib=40536, ecc=("sram_dram", (0, 1), (12, 1)),
                    rows=(0, 1, {"max": 639, "high": 1, "partial": 0, "low": 0, "none": 0}), in_vm=False),
        health(ecc_mode=True, ecc_uncorrected_volatile=1, ecc_uncorrected_aggregate=1, remapped_rows_pending=True,
               remapped_rows_failed=False, clocks_event_reasons=["gpu_idle"], persistence_mode=True,
               virtualization_mode="None", bar1_total_mib=65536, pcie=pcie(4, 4, 16, 16)),
    )]),
    "q_510_A100-SXM4-80GB_paste-elided.txt": (("510.73.08", "11.6", 8, None), [
        (gpu_summary(index=None, bus_id="0000:10:1c.0", product_name="NVIDIA A100-SXM4-80GB",
                     ecc=("sram_dram", (41, 0), (41, 0)),
                     rows=(1, 0, {"max": 639, "high": 1, "partial": 0, "low": 0, "none": 0})),
         health(ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0, remapped_rows_pending=True,
                remapped_rows_failed=False)),
        (gpu_summary(position=1, index=None, bus_id="0000:20:1c.0", product_name="NVIDIA A100-SXM4-80GB",
                     rows=(0, 0, None)),
         health(remapped_rows_pending=False, remapped_rows_failed=False)),
    ]),
    "q_535_H100-PCIe_power-brake.xml": (("535.129.03", "12.2", 1, True), [(
        gpu_summary(bus_id="0000:ca:00.0", uuid="GPU-9d2f6b18-4ce0-a735-1b8f-62e04d7c59a1", minor_number=0,
                    product_name="NVIDIA H100 PCIe", fb_total_mib=81559, pcie_device_host_max=(5, 4),
                    ecc=("sram_dram", (0, 0), (3, 0)), rows=(0, 0, ZERO_HIST), in_vm=False),
        health(ecc_mode=True, ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0, remapped_rows_pending=False,
               remapped_rows_failed=False, clocks_event_reasons=["hw_slowdown", "hw_power_brake_slowdown"],
               persistence_mode=False, virtualization_mode="None", bar1_total_mib=131072, pcie=pcie(4, 4, 16, 16)),
    )]),
    "q_550_2xH100-HBM3_fabric.txt": (("550.54.15", "12.4", 2, None), [
        (gpu_summary(bus_id="0000:19:00.0", uuid="GPU-0b7c4d2e-91f3-5a68-e2d0-7f1c3b9a6e54", minor_number=0,
                     ecc=("sram_dram", (0, 0), (0, 0)), rows=(0, 0, ZERO_HIST), **H100),
         health(ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0, clocks_event_reasons=["gpu_idle"],
                **H100_HEALTH)),
        (gpu_summary(position=1, index=1, bus_id="0000:3b:00.0", uuid="GPU-e45a19c7-08bd-f263-4c7e-d5a2901b83fc",
                     minor_number=1, ecc=("sram_dram", (2, 0), (14, 1)),
                     rows=(1, 0, {"max": 2559, "high": 1, "partial": 0, "low": 0, "none": 0}), **H100),
         health(ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=1, clocks_event_reasons=["sw_power_cap"],
                **H100_HEALTH)),
    ]),
    "q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt": (("580.65.06", "13.0", 2, None), [
        (gpu_summary(bus_id="0000:01:00.0", uuid="GPU-71c8e3a0-5d2b-94f6-0a1e-c83b7f24d690", minor_number=0, **PRO6000),
         health(**PRO6000_HEALTH)),
        (gpu_summary(position=1, index=1, bus_id="0000:02:00.0", uuid="GPU-a29f04d6-c17e-3b85-e64d-0f5a92c8b317",
                     minor_number=1, **PRO6000),
         health(**PRO6000_HEALTH)),
    ]),
}
# The XML of a pair says what its text says, with complete True.
for _pair in PAIRS:
    _header, _gpus = EXPECTED[_pair + ".txt"]
    EXPECTED[_pair + ".xml"] = ((*_header[:3], True), _gpus)
# The same GPUs but for the second one's VBIOS (rules/vbios.py; tests/unit/rules/test_vbios.py reads it).
EXPECTED["q_550_2xH100-HBM3_vbios-differs_constructed.txt"] = EXPECTED["q_550_2xH100-HBM3_fabric.txt"]


def test_every_q_fixture_has_expectations() -> None:
    assert sorted(EXPECTED) == Q_FIXTURES
    assert PAIRS == ["q_418_2xV100-SXM2_throttle-retired", "q_550_2xH100-HBM3_fabric"]


@pytest.mark.parametrize("name", Q_FIXTURES)
def test_q_fixture(name: str) -> None:
    result = parse_nvidia_smi_q(fixture(name))
    (driver, cuda, attached, complete), gpus = EXPECTED[name]

    assert result.format == ("xml" if name.endswith(".xml") else "text")
    assert (result.driver_version, result.cuda_version, result.attached_gpus, result.complete) == (
        driver, cuda, attached, complete)
    assert [(summary(gpu), health_view(gpu)) for gpu in result.gpus] == gpus


@pytest.mark.parametrize("pair", PAIRS)
def test_text_and_xml_of_the_same_gpus_agree(pair: str) -> None:
    text = parse_nvidia_smi_q(fixture(pair + ".txt"))
    xml = parse_nvidia_smi_q(fixture(pair + ".xml"))

    # Every field of every GPU, clocks reasons and ECC counters included.
    assert xml.gpus == text.gpus
    assert [gpu.as_dict() for gpu in xml.gpus] == [gpu.as_dict() for gpu in text.gpus]
    assert (xml.driver_version, xml.cuda_version, xml.attached_gpus) == (
        text.driver_version, text.cuda_version, text.attached_gpus)


def test_readers_refuse_nothing_the_dispatcher_routes_to_them() -> None:
    for name in TEXT_FIXTURES:
        assert parse_nvidia_smi_q_text(fixture(name)) == parse_nvidia_smi_q(fixture(name))
    for name in XML_FIXTURES:
        assert parse_nvidia_smi_q_xml(fixture(name)) == parse_nvidia_smi_q(fixture(name).encode())


def test_clocks_reasons_old_and_new_names_and_nesting() -> None:
    old = parse_nvidia_smi_q(fixture("q_418_2xV100-SXM2_throttle-retired.txt")).gpus[1]
    new = parse_nvidia_smi_q(fixture("q_550_2xH100-HBM3_fabric.txt")).gpus[1]

    # "Clocks Throttle Reasons" (R418) and "Clocks Event Reasons" (R550) give the same names, in
    # nvidia-smi's order, the nested HW Thermal / HW Power Brake Slowdown included.
    assert list(old.clocks_event_reasons) == list(CLOCKS_EVENT_REASONS)
    assert old.clocks_event_reasons == new.clocks_event_reasons
    assert new.active_clocks_event_reasons == ["sw_power_cap"]


def test_clocks_event_reasons_counters_are_not_reasons() -> None:
    gpu = parse_nvidia_smi_q(fixture("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt")).gpus[0]

    assert list(gpu.clocks_event_reasons) == list(CLOCKS_EVENT_REASONS)


def test_ecc_counters_by_layout() -> None:
    old = parse_nvidia_smi_q(fixture("q_418_2xV100-SXM2_throttle-retired.xml")).gpus[1].ecc_errors
    new = parse_nvidia_smi_q(fixture("q_550_2xH100-HBM3_fabric.txt")).gpus[1].ecc_errors

    assert old.volatile.counters["single_bit_device_memory"] == 2
    assert old.volatile.counters["double_bit_total"] == 1
    assert old.volatile.counters["double_bit_texture_shm"] is None
    assert new.aggregate.counters == {"sram_correctable": 0, "sram_uncorrectable_parity": 0,
                                      "sram_uncorrectable_secded": 1, "dram_correctable": 14,
                                      "dram_uncorrectable": 0}


# --------------------------------------------------------------------------------------------------
# What nvidia-smi could not give is None, never a guess


def test_legacy_output_with_na_sections_gives_none() -> None:
    gpu = parse_nvidia_smi_q(fixture("q_340_GeForce-8800-GT_legacy-na.txt")).gpus[0]

    assert gpu.ecc_errors is None  # every counter N/A
    assert gpu.retired_pages is None
    assert gpu.clocks_event_reasons is None  # "Clocks Throttle Reasons : N/A"
    assert gpu.remapped_rows is None and gpu.fabric is None  # not printed at all
    assert gpu.virtualization_mode is None and gpu.in_vm is None
    assert (gpu.ecc_mode_current, gpu.bar1_total_mib) == (None, None)
    assert gpu.unread == {}


def test_na_fabric_section_is_none() -> None:
    gpu = parse_nvidia_smi_q(fixture("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt")).gpus[0]
    pcie_card = parse_nvidia_smi_q(fixture("q_535_H100-PCIe_power-brake.xml")).gpus[0]

    assert gpu.fabric is None
    assert pcie_card.fabric is None


@pytest.mark.parametrize("text, xml", [
    ("    Remapped Rows                         : N/A", "<remapped_rows>N/A</remapped_rows>"),
    ("    Remapped Rows                         : [Not Supported]", "<remapped_rows>[Not Supported]</remapped_rows>"),
    ("    Remapped Rows", "<remapped_rows></remapped_rows>"),
])
def test_section_printed_as_unavailable_is_none(text: str, xml: str) -> None:
    as_text = parse_nvidia_smi_q(f"GPU 00000000:41:00.0\n{text}\n    Persistence Mode : Enabled\n")
    as_xml = parse_nvidia_smi_q(f'<nvidia_smi_log><gpu id="00000000:41:00.0">{xml}'
                                "<persistence_mode>Enabled</persistence_mode></gpu></nvidia_smi_log>")

    for result in (as_text, as_xml):
        gpu = result.gpus[0]
        assert gpu.remapped_rows is None
        assert gpu.persistence_mode is True
        assert gpu.bus_id == "0000:41:00.0"
        assert gpu.unread == {}


@pytest.mark.parametrize("marker", ["N/A", "[N/A]", "Not Supported", "[Not Supported]", "Unknown Error",
                                    "[Unknown Error]", "Requested functionality has been deprecated",
                                    "[Insufficient Permissions]", "[GPU is lost]"])
def test_unavailable_values_are_none(marker: str) -> None:
    text = fixture("q_550_2xH100-HBM3_fabric.txt")
    for label in ("Persistence Mode", "Pending", "Uncorrectable Error", "DRAM Uncorrectable", "Idle"):
        text = re.sub(rf"^( +{label} +: ).*$", rf"\g<1>{marker}", text, flags=re.MULTILINE)
    text = re.sub(r"^( +)Total( +): 131072 MiB", rf"\1Total\2: {marker}", text, flags=re.MULTILINE)
    gpu = parse_nvidia_smi_q(text).gpus[0]

    assert gpu.persistence_mode is None
    assert gpu.bar1_total_mib is None
    assert gpu.remapped_rows.pending is None and gpu.remapped_rows.uncorrectable is None
    assert gpu.clocks_event_reasons["gpu_idle"] is None
    # SRAM says 0, DRAM is unknown: the total cannot be told.
    assert gpu.ecc_errors.volatile.uncorrectable is None
    assert gpu.unread == {}


def test_values_of_an_unknown_form_are_none_and_reported() -> None:
    text = fixture("q_470_A100-SXM4-40GB_remap-pending.txt")
    text = re.sub(r"(Persistence Mode +: )Enabled", r"\1Maybe", text)
    text = text.replace("Max                       : 4", "Max                       : Gen4")
    gpu = parse_nvidia_smi_q(text).gpus[0]

    assert gpu.persistence_mode is None and gpu.pcie.gen_max is None
    assert gpu.unread == {"persistence_mode": "Maybe", "pcie_gen_max": "Gen4"}


def test_a_newer_drivers_reason_is_kept_by_its_label() -> None:
    text = fixture("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt").replace(
        "        Display Clock Setting             : Not Active\n",
        "        Display Clock Setting             : Not Active\n"
        "        Board Power Excursion             : Active\n", 1)
    gpu = parse_nvidia_smi_q(text).gpus[0]

    assert gpu.clocks_event_reasons["board_power_excursion"] is True
    assert health_view(gpu)["clocks_event_reasons"] == ["gpu_idle", "board_power_excursion"]


@pytest.mark.parametrize("counters, correctable, uncorrectable", [
    ({"sram_correctable": "0", "sram_uncorrectable": "0", "dram_correctable": "0", "dram_uncorrectable": "0"}, 0, 0),
    # Unknown counters next to zeros: the totals cannot be told.
    ({"sram_correctable": "0", "sram_uncorrectable": "0", "dram_correctable": "N/A", "dram_uncorrectable": "N/A"},
     None, None),
    # Unknown next to errors: at least that many.
    ({"sram_correctable": "5", "sram_uncorrectable": "N/A", "dram_correctable": "N/A", "dram_uncorrectable": "2"},
     5, 2),
    # A section cut before its DRAM lines.
    ({"sram_correctable": "0", "sram_uncorrectable_parity": "0", "sram_uncorrectable_secded": "3"}, None, 3),
    # Single/Double Bit without Total: the parts printed.
    ({"single_bit_device_memory": "1", "single_bit_register_file": "0", "double_bit_device_memory": "0"}, 1, 0),
    ({"single_bit_total": "7", "double_bit_total": "N/A"}, 7, None),
])
def test_ecc_totals(counters: dict[str, str], correctable: int | None, uncorrectable: int | None) -> None:
    gpu = build_gpu({"ecc_errors": {"volatile": counters}}, 0, 0)

    assert (gpu.ecc_errors.volatile.correctable, gpu.ecc_errors.volatile.uncorrectable) == (correctable, uncorrectable)
    assert gpu.ecc_errors.aggregate is None


def test_retired_pages_pending_under_either_name() -> None:
    old = build_gpu({"retired_pages": {"pending_retirement": "No"}}, 0, 0)
    xml = build_gpu({"retired_pages": {"pending_blacklist": "N/A", "pending_retirement": "Yes"}}, 0, 0)
    new = build_gpu({"retired_pages": {"pending_blacklist": "No", "pending_retirement": "N/A"}}, 0, 0)

    assert (old.retired_pages.pending, xml.retired_pages.pending, new.retired_pages.pending) == (False, True, False)
    assert old.as_dict()["retired_pages"]["pending"] is False


def test_virtualization_modes() -> None:
    modes = {mode: build_gpu({"virtualization_mode": mode}, 0, 0).in_vm
             for mode in ("Pass-Through", "VGPU", "None", "Host VGPU", "Host VSGA", "Something New", "N/A")}

    assert modes == {"Pass-Through": True, "VGPU": True, "None": False, "Host VGPU": False, "Host VSGA": False,
                     "Something New": None, "N/A": None}


def test_health_view_keys_are_the_documented_contract() -> None:
    gpu = parse_nvidia_smi_q(fixture("q_550_2xH100-HBM3_fabric.xml")).gpus[0]

    assert set(health_view(gpu)) == {
        "ecc_mode", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "retired_pages_pending",
        "remapped_rows_pending", "remapped_rows_failed", "clocks_event_reasons", "persistence_mode",
        "virtualization_mode", "bar1_total_mib", "pcie"}
    assert health_view(build_gpu({}, 0, None)) == health()


def test_lookup_by_bus_id_in_any_form() -> None:
    result = parse_nvidia_smi_q(fixture("q_550_2xH100-HBM3_fabric.txt"))

    assert result.gpu("3b:00.0").position == 1
    assert result.gpu("00000000:3B:00.0").position == 1
    assert result.gpu("0000:99:00.0") is None
    assert result.gpu("not an address") is None


def test_compute_capability_when_printed() -> None:
    text = parse_nvidia_smi_q("GPU 00000000:41:00.0\n    Compute Capability : 12.0\n").gpus[0]
    xml = parse_nvidia_smi_q('<nvidia_smi_log><gpu id="00000000:41:00.0"><compute_cap>12.0</compute_cap>'
                             "</gpu></nvidia_smi_log>").gpus[0]
    odd = build_gpu({"compute_capability": "twelve"}, 0, 0)

    assert text.compute_capability == xml.compute_capability == "12.0"
    assert odd.compute_capability is None and odd.unread == {"compute_capability": "twelve"}


def test_mig_devices_do_not_stand_in_for_the_gpu() -> None:
    text = """GPU 00000000:41:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    MIG Devices
        MIG Device
            Index                         : 0
            ECC Errors
                Volatile
                    SRAM Uncorrectable    : 0
            FB Memory Usage
                Total                     : 19968 MiB
            BAR1 Memory Usage
                Total                     : 32767 MiB
    Persistence Mode                      : Enabled
"""
    gpu = parse_nvidia_smi_q(text).gpus[0]

    assert (gpu.ecc_errors, gpu.fb_total_mib, gpu.bar1_total_mib) == (None, None, None)
    assert gpu.persistence_mode is True


# --------------------------------------------------------------------------------------------------
# Pastes


def _scale_indent(text: str, width: int) -> str:
    return re.sub(r"^( +)", lambda match: " " * (len(match.group(1)) // 4 * width), text, flags=re.MULTILINE)


PASTE_VARIANTS = {
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "tabs": lambda text: re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), text, flags=re.MULTILINE),
    "indent-2": lambda text: _scale_indent(text, 2),
    "indent-3": lambda text: _scale_indent(text, 3),
    "indent-8": lambda text: _scale_indent(text, 8),
    "jupyter-indent": lambda text: "\n".join("    " + line if line else line for line in text.split("\n")),
    "mpirun": lambda text: "\n".join("[1,0]<stdout>:" + line for line in text.split("\n")),
    "srun-label": lambda text: "\n".join("0: " + line for line in text.split("\n")),
    "torchrun": lambda text: "\n".join("[rank0]:" + line for line in text.split("\n")),
    "prompts": lambda text: "root@gpu-node-07:~# nvidia-smi -q\n" + text + "root@gpu-node-07:~# \n",
    "ansi": lambda text: text.replace("Product Name", "\x1b[1mProduct Name\x1b[0m").replace("GPU 0", "\x1b[32mGPU 0"),
    "one-space-blank-lines": lambda text: text.replace("\n\n", "\n \n"),
    "aligned-colons-removed": lambda text: re.sub(r"(\S) +: ", r"\1: ", text),
    "elisions": lambda text: text.replace("    Inforom Version\n", "    [...]\n    Inforom Version\n"),
    "bom": lambda text: "\ufeff" + text,
}


@pytest.mark.parametrize("variant", sorted(PASTE_VARIANTS))
@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_pasted_text_reads_the_same(name: str, variant: str) -> None:
    original = parse_nvidia_smi_q(fixture(name))
    pasted = parse_nvidia_smi_q(PASTE_VARIANTS[variant](fixture(name)))

    assert pasted.gpus == original.gpus
    assert (pasted.driver_version, pasted.attached_gpus) == (original.driver_version, original.attached_gpus)


@pytest.mark.parametrize("variant", ["crlf", "mpirun", "srun-label", "prompts", "bom"])
@pytest.mark.parametrize("name", XML_FIXTURES)
def test_pasted_xml_reads_the_same(name: str, variant: str) -> None:
    original = parse_nvidia_smi_q(fixture(name))
    pasted = parse_nvidia_smi_q(PASTE_VARIANTS[variant](fixture(name)))

    assert pasted == original


def test_lines_of_several_ranks_are_refused() -> None:
    text = fixture("q_470_A100-SXM4-40GB_remap-pending.txt")
    mixed = "\n".join(f"[1,{number % 2}]<stdout>:{line}" for number, line in enumerate(text.split("\n")))

    with pytest.raises(NvidiaSmiParseError, match=r"several ranks \(\[1,0\]<stdout>:, \[1,1\]<stdout>:\)"):
        parse_nvidia_smi_q(mixed)


def test_two_outputs_appended_read_as_one() -> None:
    # nvidia-smi -q -i 1; nvidia-smi -q -i 0: two headers, one GPU each, not in index order.
    whole = fixture("q_418_2xV100-SXM2_throttle-retired.txt")
    header, first, second = whole.split("\nGPU ")
    result = parse_nvidia_smi_q(header + "\nGPU " + second + header + "\nGPU " + first)
    expected = parse_nvidia_smi_q(whole)

    assert [gpu.bus_id for gpu in result.gpus] == ["0000:3b:00.0", "0000:18:00.0"]
    assert [gpu.index for gpu in result.gpus] == [None, None]
    assert [health_view(gpu) for gpu in result.gpus] == [health_view(gpu) for gpu in reversed(expected.gpus)]
    assert (result.driver_version, result.attached_gpus) == ("418.87.01", 2)


def test_section_cut_short_is_read_as_far_as_it_goes() -> None:
    text = fixture("q_550_2xH100-HBM3_fabric.txt")
    cut = text[:text.index("            DRAM Correctable")]
    gpu = parse_nvidia_smi_q(cut).gpus[0]

    assert gpu.ecc_errors.volatile.counters == {"sram_correctable": 0, "sram_uncorrectable_parity": 0,
                                                "sram_uncorrectable_secded": 0}
    assert gpu.ecc_errors.volatile.uncorrectable is None  # DRAM unknown
    assert gpu.ecc_errors.aggregate is None
    assert gpu.remapped_rows is None and gpu.fabric is None
    assert gpu.bar1_total_mib == 131072


def test_index_only_when_every_gpu_is_listed() -> None:
    text = fixture("q_550_2xH100-HBM3_fabric.txt")
    one = text[:text.index("GPU 00000000:3B:00.0")]  # as nvidia-smi -q -i 0 would show it, but Attached says 2

    assert [gpu.index for gpu in parse_nvidia_smi_q(one).gpus] == [None]
    assert parse_nvidia_smi_q(one.replace(": 2\n", ": 1\n", 1)).gpus[0].index == 0


# --------------------------------------------------------------------------------------------------
# XML: safety and cut documents


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol9 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<nvidia_smi_log><driver_version>&lol9;</driver_version></nvidia_smi_log>
"""


@pytest.mark.parametrize("document, message", [
    (BILLION_LAUGHS, "declares no entities"),
    ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ELEMENT nvidia_smi_log ANY>]>\n<nvidia_smi_log/>',
     "without an internal subset"),
    ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log SYSTEM "file:///etc/passwd" [<!ENTITY x SYSTEM '
     '"file:///etc/passwd">]>\n<nvidia_smi_log><timestamp>&x;</timestamp></nvidia_smi_log>', "declares no entities"),
    ("<?xml version='1.0'?>\n<html><body>not nvidia-smi</body></html>", "<nvidia_smi_log>"),
    ("<?xml version='1.0'?>\n", "could not be read"),
])
def test_unsafe_or_foreign_xml_is_refused(document: str, message: str) -> None:
    started = time.process_time()
    with pytest.raises(NvidiaSmiParseError, match=re.escape(message)):
        parse_nvidia_smi_q(document)
    assert time.process_time() - started < 1  # CPU time: expanding the entities would take far more


def test_undefined_entity_is_not_expanded_and_ends_the_reading() -> None:
    result = parse_nvidia_smi_q('<nvidia_smi_log><cuda_version>12.4</cuda_version><driver_version>&x;'
                                '</driver_version><gpu id="00000000:41:00.0"/></nvidia_smi_log>')

    assert (result.cuda_version, result.driver_version, result.gpus, result.complete) == ("12.4", None, [], False)


def test_xml_cut_short_keeps_what_it_read() -> None:
    text = fixture("q_550_2xH100-HBM3_fabric.xml")
    cut = text[:text.index("<fabric>", text.index('gpu id="00000000:3B:00.0"'))] + "<fab"
    full = parse_nvidia_smi_q(text)
    result = parse_nvidia_smi_q(cut)

    assert result.complete is False
    assert result.gpus[0] == full.gpus[0]
    assert result.gpus[1].fabric is None
    assert result.gpus[1].remapped_rows == full.gpus[1].remapped_rows


def test_xml_with_trailing_prompt_and_dtd_line_is_complete() -> None:
    text = "$ nvidia-smi -q -x\n" + fixture("q_535_H100-PCIe_power-brake.xml") + "$ \n"

    assert parse_nvidia_smi_q(text).complete is True


# --------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("text, message", [
    ("", "each GPU opened by a line like 'GPU 00000000:41:00.0'"),
    ("        Pending                           : Yes\n        Remapping Failure Occurred        : No\n",
     "a grep of it loses the GPU lines"),
    ("No devices were found\n", "failure (no_devices)"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
     "NVIDIA driver is installed and running.\n", "failure (driver_not_loaded)"),
])
def test_outputs_without_gpus_are_errors(text: str, message: str) -> None:
    with pytest.raises(NvidiaSmiParseError, match=re.escape(message)):
        parse_nvidia_smi_q(text)


def test_no_gpu_attached_is_an_empty_result() -> None:
    result = parse_nvidia_smi_q("==============NVSMI LOG==============\n\nTimestamp : x\n"
                                "Driver Version : 550.54.15\n\nAttached GPUs : 0\n")

    assert (result.gpus, result.attached_gpus, result.driver_version) == ([], 0, "550.54.15")


def test_input_that_is_not_text_is_an_error() -> None:
    with pytest.raises(NvidiaSmiParseError, match="expected the command's output as text; found int"):
        parse_nvidia_smi_q(42)


# --------------------------------------------------------------------------------------------------
# Properties: no input makes the parser raise anything but NvidiaSmiParseError; a cut never invents


PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_TOKENS = st.sampled_from([
    "GPU 00000000:41:00.0", "GPU 0000:01:00.0", "    ", "        ", "\t", "\n", " : ", ":", "N/A", "[N/A]",
    "Remapped Rows", "ECC Errors", "Volatile", "Aggregate", "Single Bit", "SRAM Correctable", "DRAM Uncorrectable",
    "Total", "Pending", "Yes", "No", "Active", "Not Active", "Clocks Event Reasons", "Clocks Throttle Reasons",
    "HW Slowdown", "Fabric", "CliqueId", "Enabled", "16x", "131072 MiB", "639 bank(s)", "99999999999999999999999",
    "Attached GPUs : 2", "[1,0]<stdout>:", "0: ", "[...]", "$ nvidia-smi -q", "\x1b[1m", "\x1b", "\r", "\x00",
    "<?xml version=\"1.0\" ?>", "<!DOCTYPE nvidia_smi_log SYSTEM \"v.dtd\">", "<nvidia_smi_log>", "</nvidia_smi_log>",
    '<gpu id="00000000:41:00.0">', "</gpu>", "<remapped_rows>", "</remapped_rows>", "<remapped_row_pending>",
    "<ecc_errors>", "<volatile>", "<sram_correctable>", "&amp;", "&lol;", "<!ENTITY", "<![CDATA[", "]]>",
])
SMI_LIKE_TEXT = st.lists(_TOKENS, max_size=80).map("".join)
PARSERS = {"any": parse_nvidia_smi_q, "text": parse_nvidia_smi_q_text, "xml": parse_nvidia_smi_q_xml}


def _only_own_errors(parse, text: Any) -> Any:
    with contextlib.suppress(NvidiaSmiParseError):
        return parse(text)
    return None


@PROPERTY_SETTINGS
@given(parser=st.sampled_from(sorted(PARSERS)), text=st.one_of(st.text(), SMI_LIKE_TEXT, st.binary()))
def test_property_arbitrary_input(parser: str, text: Any) -> None:
    _only_own_errors(PARSERS[parser], text)


@PROPERTY_SETTINGS
@given(name=st.sampled_from(Q_FIXTURES), parser=st.sampled_from(sorted(PARSERS)), data=st.data())
def test_property_truncated_and_garbled_fixtures(name: str, parser: str, data: st.DataObject) -> None:
    text = fixture(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    _only_own_errors(PARSERS[parser], text[:cut])
    _only_own_errors(PARSERS[parser], text[cut:])
    lines = text.split("\n")
    garbled = data.draw(st.lists(st.sampled_from(lines), max_size=len(lines)))
    _only_own_errors(PARSERS[parser], "\n".join(garbled))
    noise = data.draw(st.lists(st.tuples(st.integers(0, len(text)), _TOKENS), max_size=6))
    for position, token in sorted(noise, reverse=True):
        text = text[:position] + token + text[position:]
    _only_own_errors(PARSERS[parser], text)


ANSI = st.sampled_from(["\x1b[4m", "\x1b[0m", "\x1b[1;31m", "\x1b[K", "\x1b]0;title\x07", "\x1b(B"])


@PROPERTY_SETTINGS
@given(name=st.sampled_from(Q_FIXTURES), data=st.data())
def test_property_ansi_anywhere_changes_nothing(name: str, data: st.DataObject) -> None:
    base = fixture(name)
    positions = data.draw(st.lists(st.integers(min_value=0, max_value=len(base)), min_size=1, max_size=8))
    text = base
    for position in sorted(positions, reverse=True):
        text = text[:position] + data.draw(ANSI) + text[position:]

    assert parse_nvidia_smi_q(text) == parse_nvidia_smi_q(base)


def _consistent(cut: dict[str, Any], full: dict[str, Any]) -> None:
    """What a cut output says is what the whole says; ECC totals may be lower (fewer counters read)."""
    for key, value in cut.items():
        if key == "pcie":
            _consistent(value, full[key])
        elif value is None:
            continue
        elif key.startswith("ecc_uncorrected_"):
            assert full[key] is not None and value <= full[key], key
        elif key == "clocks_event_reasons":
            assert set(value) <= set(full[key]), key
        else:
            assert value == full[key], key


@PROPERTY_SETTINGS
@given(name=st.sampled_from(TEXT_FIXTURES), data=st.data())
def test_property_text_cut_at_a_line_never_invents(name: str, data: st.DataObject) -> None:
    lines = fixture(name).split("\n")
    cut = "\n".join(lines[:data.draw(st.integers(min_value=0, max_value=len(lines)))])
    result = _only_own_errors(parse_nvidia_smi_q, cut)
    full = parse_nvidia_smi_q(fixture(name))
    for gpu in result.gpus if result else []:
        assert gpu.bus_id == full.gpus[gpu.position].bus_id
        _consistent(health_view(gpu), health_view(full.gpus[gpu.position]))


@PROPERTY_SETTINGS
@given(name=st.sampled_from(XML_FIXTURES), data=st.data())
def test_property_xml_cut_anywhere_never_invents(name: str, data: st.DataObject) -> None:
    text = fixture(name)
    cut = text[:data.draw(st.integers(min_value=0, max_value=len(text)))]
    result = _only_own_errors(parse_nvidia_smi_q, cut)
    full = parse_nvidia_smi_q(text)
    if result is None:
        return
    # A fixture that is itself a cut paste (q_390_...) is complete nowhere.
    assert result.complete is (full.complete and cut.rstrip() == text.rstrip())
    for gpu in result.gpus:
        assert gpu.bus_id == full.gpus[gpu.position].bus_id
        _consistent(health_view(gpu), health_view(full.gpus[gpu.position]))
        assert gpu.unread == {}
