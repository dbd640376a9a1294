"""nvidia-smi -q / -q -x readings in the audit's shapes (audit/smi_q.py): health in NVML's raw keys and facts,
device facts completed by PCI bus id, over the -q fixtures of several driver generations; and the health rules
firing from them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import smi_q
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.gpus import smi_device_facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml import BRANDS, VIRTUALIZATION_MODES
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml_health import RAW_KEYS, gpu_health
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q import (
    Fabric,
    GpuQuery,
    parse_nvidia_smi_q,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_build import RAW_FIELDS, build_gpu
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths
from tests.unit import schemas
from tests.unit.captures import H100, audited

FIXTURES = paths.FIXTURES / "nvidia-smi"
Q_FIXTURES = sorted(path.name for path in FIXTURES.iterdir() if path.name.startswith("q_"))


def parsed(name: str) -> Any:
    with open(FIXTURES / name, encoding="utf-8", newline="") as handle:
        return parse_nvidia_smi_q(handle.read())


def health(name: str) -> list[dict[str, Any]]:
    return smi_q.health_facts(parsed(name))


def schema_errors(kind: str, document: Any) -> list[str]:
    return [error.message for error in schemas.validator(f"gpu_host#/$defs/{kind}").iter_errors(document)]


# ---------------------------------------------------------------------------
# Health readings, fixture by fixture


@pytest.mark.parametrize("name", Q_FIXTURES)
def test_every_fixture_gives_declared_health_facts_with_nulls_named(name: str) -> None:
    document = parsed(name)
    gpus = smi_q.health_facts(document)
    assert len(gpus) == len(document.gpus)
    for gpu in gpus:
        assert schema_errors("gpu_health", gpu) == []
        # A document read from nvidia-smi -q's text says so.
        assert gpu["source"] == ("nvidia-smi -q" if document.format == "text" else "nvidia-smi -q -x")
        # Every reading left null is named, so that a null never passes for "read, and fine".
        nulls = {"ecc_mode" if k.startswith("mode_") else k: v for k, v in gpu["ecc"].items() if v is None}
        named = set(gpu["unsupported"])
        assert {"ecc_mode"} & set(nulls) <= named
        assert {f"ecc_{k}" for k in nulls if k != "ecc_mode"} <= named
        if gpu["clocks_event_reasons"]["mask"] is None:
            assert "clocks_event_reasons" in named


def test_legacy_na_sections_give_nulls_never_zeros() -> None:
    (gpu,) = health("q_340_GeForce-8800-GT_legacy-na.txt")
    assert set(gpu["ecc"].values()) == {None}
    assert set(gpu["retired_pages"].values()) == {None}
    assert set(gpu["row_remap"].values()) == {None}
    assert gpu["clocks_event_reasons"] == {"mask": None, "active": []}
    assert gpu["fabric"] == {"state": None, "status": None}
    assert set(gpu["unsupported"]) >= {"ecc_mode", "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
                                       "retired_pages_pending", "retired_pages_sbe", "retired_pages_dbe",
                                       "remapped_rows", "clocks_event_reasons", "fabric"}
    assert (gpu["index"], gpu["pci_bus_id"]) == (0, "0000:01:00.0")


@pytest.mark.parametrize("name", ["q_418_2xV100-SXM2_throttle-retired.xml", "q_418_2xV100-SXM2_throttle-retired.txt"])
def test_v100_with_retired_pages_pending_and_the_old_throttle_names(name: str) -> None:
    healthy, sick = health(name)
    assert healthy["ecc"] == {"mode_current": True, "mode_pending": True, "uncorrected_volatile": 0,
                              "uncorrected_aggregate": 0, "corrected_volatile": 0, "corrected_aggregate": 0}
    assert healthy["clocks_event_reasons"] == {"mask": 0x1, "active": ["gpu_idle"]}
    assert sick["ecc"] == {"mode_current": True, "mode_pending": True, "uncorrected_volatile": 1,
                           "uncorrected_aggregate": 1, "corrected_volatile": 2, "corrected_aggregate": 3}
    assert sick["retired_pages"] == {"pending": True, "single_bit": 1, "double_bit": 1}
    assert sick["clocks_event_reasons"] == {"mask": 0x4, "active": ["sw_power_cap"]}
    # Volta has no row remapper and no fabric: unknown, not "none pending".
    assert set(sick["row_remap"].values()) == {None} and {"remapped_rows", "fabric"} <= set(sick["unsupported"])
    assert (sick["index"], sick["pci_bus_id"]) == (1, "0000:3b:00.0")


def test_a100_with_a_row_remap_pending() -> None:
    (gpu,) = health("q_470_A100-SXM4-40GB_remap-pending.txt")
    assert gpu["row_remap"] == {"correctable": 0, "uncorrectable": 1, "pending": True, "failed": False}
    assert gpu["ecc"]["uncorrected_volatile"] == 1 and gpu["ecc"]["corrected_aggregate"] == 12
    assert set(gpu["retired_pages"].values()) == {None}  # Ampere retires no pages: N/A there


def test_h100_pcie_held_back_by_power_brake() -> None:
    (gpu,) = health("q_535_H100-PCIe_power-brake.xml")
    assert gpu["clocks_event_reasons"] == {"mask": 0x88, "active": ["hw_slowdown", "hw_power_brake_slowdown"]}


@pytest.mark.parametrize("name", ["q_550_2xH100-HBM3_fabric.xml", "q_550_2xH100-HBM3_fabric.txt"])
def test_h100_fabric_words_become_nvml_names(name: str) -> None:
    for gpu in health(name):
        assert gpu["fabric"] == {"state": "completed", "status": "success"}
        assert not {"fabric", "fabric.state", "fabric.status"} & set(gpu["unsupported"])


def test_blackwell_in_a_vm_prints_its_fabric_as_na() -> None:
    for gpu in health("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt"):
        assert gpu["fabric"] == {"state": None, "status": None} and "fabric" in gpu["unsupported"]
        assert gpu["row_remap"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False}


def test_a_paste_of_some_gpus_takes_the_index_from_the_gpu_facts() -> None:
    document = parsed("q_510_A100-SXM4-80GB_paste-elided.txt")
    assert [g["index"] for g in smi_q.health_facts(document)] == [None, None]
    indexes = {"0000:10:1c.0": 0, "0000:20:1c.0": 1}
    assert [g["index"] for g in smi_q.health_facts(document, indexes)] == [0, 1]


@pytest.mark.parametrize(("state", "status", "expected", "unsupported"), [
    ("Completed", "Success", {"state": "completed", "status": "success"}, set()),
    ("In Progress", "Success", {"state": "in_progress", "status": "success"}, set()),
    ("Not Started", None, {"state": "not_started", "status": None}, {"fabric.status"}),
    ("Completed", "Timeout", {"state": "completed", "status": "timeout"}, set()),
    ("Completed", "Not Found", {"state": "completed", "status": "not_found"}, set()),
    ("Degraded", "Something New", {"state": None, "status": None}, {"fabric.state", "fabric.status"}),
])
def test_fabric_words(state: str, status: str | None, expected: dict[str, Any], unsupported: set[str]) -> None:
    gpu = GpuQuery(position=0, index=0, bus_id="0000:19:00.0", fabric=Fabric(state, status, 0, None, None))
    (fact,) = smi_q.health_facts(_document([gpu]))
    assert fact["fabric"] == expected
    assert {u for u in fact["unsupported"] if u.startswith("fabric")} == unsupported


def test_clocks_mask_is_whole_or_null() -> None:
    def mask(reasons: dict[str, bool | None]) -> tuple[Any, list[str]]:
        gpu = GpuQuery(position=0, index=0, bus_id="0000:19:00.0", clocks_event_reasons=reasons)
        (fact,) = smi_q.health_facts(_document([gpu]))
        return fact["clocks_event_reasons"]["mask"], fact["unsupported"]

    assert mask({"gpu_idle": False, "sw_thermal_slowdown": True})[0] == 0x20
    # A reason a newer driver adds, not active: the mask of the known ones is still whole.
    assert mask({"gpu_idle": True, "some_new_reason": False})[0] == 0x1
    for reasons in ({"gpu_idle": True, "some_new_reason": True}, {"gpu_idle": None, "hw_slowdown": True}):
        value, unsupported = mask(reasons)
        assert value is None and "clocks_event_reasons" in unsupported


def test_fabric_status_codes_are_nvml_h_numbers() -> None:
    raw = {"fabric": {"state": 3, "status": 10}}
    assert gpu_health(0, None, raw, "nvml")["fabric"]["status"] == "timeout"
    raw["fabric"]["status"] = 16
    assert gpu_health(0, None, raw, "nvml")["fabric"]["status"] == "reset_required"
    raw["fabric"]["status"] = 12  # NVML_ERROR_LIBRARY_NOT_FOUND: not a fabric status; named by number
    assert gpu_health(0, None, raw, "nvml")["fabric"]["status"] == "nvml return 12"


def _document(gpus: list[GpuQuery]) -> Any:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q import NvidiaSmiQ

    return NvidiaSmiQ(format="xml", gpus=gpus, attached_gpus=len(gpus))


_TEXT = st.text(st.sampled_from("0123456789 ANYESDabcdeinorstx/[]:.-"), max_size=12)
_SECTION = st.one_of(_TEXT, st.dictionaries(st.sampled_from(
    ["volatile", "aggregate", "single_bit", "double_bit", "pending_blacklist", "pending_retirement", "correctable",
     "uncorrectable", "pending", "failure", "state", "status", "gpu_idle", "hw_slowdown", "new_reason",
     "sram_correctable", "dram_uncorrectable", "single_bit_total"]),
    st.one_of(_TEXT, st.dictionaries(st.sampled_from(["sram_correctable", "dram_uncorrectable", "double_bit_total",
                                                      "single_bit_total"]), _TEXT, max_size=3)), max_size=5))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({}, optional={field: _SECTION if field in {
    "ecc_errors", "retired_pages", "remapped_rows", "clocks_event_reasons", "fabric"} else _TEXT
    for field in RAW_FIELDS}))
def test_any_reading_converts_to_declared_facts(fields: dict[str, Any]) -> None:
    gpu = build_gpu(fields, 0, 0)
    reading = smi_q.health_reading(gpu)
    assert set(RAW_KEYS) <= set(reading)
    (fact,) = smi_q.health_facts(_document([gpu]))
    assert schema_errors("gpu_health", fact) == []
    device = smi_q.fill_device(_query_device(), gpu)
    assert schema_errors("gpu_device", device) == []


# ---------------------------------------------------------------------------
# Device facts: what --query-gpu cannot give, by bus id


def _query_device(**row: Any) -> dict[str, Any]:
    base = {"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "uuid": "GPU-1",
            "pci.bus_id": "00000000:01:00.0", "compute_cap": "12.0", "memory.total": 97887,
            "pcie.link.gen.current": 1, "pcie.link.gen.max": 5, "pcie.link.width.current": 16,
            "pcie.link.width.max": 16, "persistence_mode": True, "ecc.mode.current": True, "mig.mode.current": None}
    return smi_device_facts({**base, **row})


def test_fill_device_takes_bar1_brand_and_virtualization_by_bus_id() -> None:
    document = parsed("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt")
    found = smi_q.by_bus_id(document)
    second = _query_device(index=1, **{"pci.bus_id": "00000000:02:00.0"})
    device = smi_q.fill_device(second, found[second["pci_bus_id"]])
    assert (device["bar1_total_mib"], device["brand"], device["virtualization_mode"]) == \
        (131072, "nvidia_rtx", "passthrough")
    assert device["uuid"] == "GPU-1"  # what --query-gpu gave is kept
    assert device["index"] == 1 and device["pcie"]["gen_current"] == 1
    # mig.mode.current was N/A in --query-gpu and is N/A in -q too: still named.
    assert device["mig"] is None and device["unsupported"] == ["mig.mode.current"]
    assert schema_errors("gpu_device", device) == []


def test_fill_device_fills_what_query_gpu_printed_as_na() -> None:
    document = parsed("q_550_2xH100-HBM3_fabric.xml")
    row = _query_device(**{"pci.bus_id": "00000000:19:00.0", "compute_cap": None, "memory.total": None,
                           "pcie.link.width.max": None, "mig.mode.current": None})
    device = smi_q.fill_device(row, smi_q.by_bus_id(document)["0000:19:00.0"])
    assert device["memory_total_mib"] == 81559 and device["pcie"]["width_max"] == 16 and device["mig"] is False
    # -q does not print the compute capability before R510 nor in these fixtures: it stays unknown.
    assert device["compute_capability"] is None and device["unsupported"] == ["compute_cap"]
    assert (device["brand"], device["virtualization_mode"]) == ("nvidia", "none")


def test_fill_device_names_what_neither_tool_gave() -> None:
    document = parsed("q_340_GeForce-8800-GT_legacy-na.txt")
    row = _query_device(**{"pci.bus_id": "00000000:01:00.0"})
    device = smi_q.fill_device(row, document.gpus[0])
    assert device["bar1_total_mib"] is None and device["virtualization_mode"] is None
    assert device["brand"] == "geforce"
    assert {"bar1", "virtualization_mode"} <= set(device["unsupported"]) and "brand" not in device["unsupported"]
    assert device["name"] == row["name"]  # never overwritten


@pytest.mark.parametrize(("printed", "name"), [
    ("NVIDIA RTX", "nvidia_rtx"), ("GeForce RTX", "geforce_rtx"), ("Tesla", "tesla"), ("NVIDIA", "nvidia"),
    ("TITAN RTX", "titan_rtx"), ("Quadro RTX", "quadro_rtx"), ("NVIDIA Virtual Compute Server", "vcs"),
    ("NVIDIA RTX Virtual Workstation", "vws"), ("Unknown", "unknown"), ("Brand New", None), (None, None),
])
def test_brand_words(printed: str | None, name: str | None) -> None:
    assert smi_q.brand_name(printed) == name
    assert name is None or name in BRANDS.values()


@pytest.mark.parametrize(("printed", "name"), [
    ("None", "none"), ("Pass-Through", "passthrough"), ("VGPU", "vgpu"), ("Host VGPU", "host_vgpu"),
    ("Host VSGA", "host_vsga"), ("Something", None), (None, None),
])
def test_virtualization_words(printed: str | None, name: str | None) -> None:
    assert smi_q.virtualization_name(printed) == name
    assert name is None or name in VIRTUALIZATION_MODES.values()


def test_bus_ids_match_in_any_form() -> None:
    assert smi_q.bus_key("00000000:3B:00.0") == smi_q.bus_key("0000:3b:00.0") == "0000:3b:00.0"
    assert smi_q.bus_key("3b:00.0") is None and smi_q.bus_key(None) is None


# ---------------------------------------------------------------------------
# The health rules, from -q readings


@pytest.mark.parametrize(("name", "expected"), [
    ("q_418_2xV100-SXM2_throttle-retired.xml", {"retired_pages_pending", "ecc_uncorrectable_errors"}),
    ("q_418_2xV100-SXM2_throttle-retired.txt", {"retired_pages_pending", "ecc_uncorrectable_errors"}),
    ("q_470_A100-SXM4-40GB_remap-pending.txt", {"row_remap_pending", "ecc_uncorrectable_errors"}),
    ("q_535_H100-PCIe_power-brake.xml", {"gpu_clocks_slowdown"}),
    ("q_550_2xH100-HBM3_fabric.xml", {"ecc_uncorrectable_errors"}),
    ("q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt", set()),
    ("q_340_GeForce-8800-GT_legacy-na.txt", set()),
])
def test_health_rules_fire_from_q_readings(name: str, expected: set[str]) -> None:
    facts = copy.deepcopy(audited(H100))
    facts["health"]["gpus"] = health(name)
    facts["health"]["gpus_source"] = "nvidia-smi -q -x"
    health_ids = {"retired_pages_pending", "ecc_uncorrectable_errors", "row_remap_pending", "row_remap_failed",
                  "gpu_clocks_slowdown", "gpu_fabric_not_ready"}
    found = {f["id"]: f for f in engine.evaluate(facts) if f["id"] in health_ids}
    assert set(found) == expected
    if "retired_pages_pending" in found:
        assert list(found["retired_pages_pending"]["evidence"]["gpus"]) == ["GPU1 (0000:3b:00.0)"]
    if "row_remap_pending" in found:
        assert list(found["row_remap_pending"]["evidence"]["gpus"]) == ["GPU0 (0000:07:00.0)"]
