"""GPUs the host cannot use are critical, with their cause, and never leave a host "fit".

The captures of tests/captures (MISMATCH: the incident guest after a driver upgrade without a reboot;
GPU_LOST: a GPU fallen off the bus; NO_NVML: the incident guest without nvidia-ml-py) and in-memory
changes to them; the NVML reader over a stand-in for nvidia-ml-py; and roles/gpu_audit's
gpu_audit_fail_on logic, rendered by Ansible's own templar over the module's result.
"""

from __future__ import annotations

import copy
import sys
import tempfile
import types
from typing import Any

import gpu_audit_report
import gpu_host_facts
import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import nvml
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CAPTURE_FORMAT
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import QUERY_GPU_FIELDS
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine

from tests.paths import ROOT
from tests.unit.captures import CAPTURES, GPU_LOST, INCIDENT, MISMATCH, NO_NVML, PRO6000, audit, audited, capture
from tests.unit.modules import run_module

pytestmark = pytest.mark.capture


def by_id(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in result["findings"]}


def criticals(result: dict[str, Any]) -> set[str]:
    return {f["id"] for f in result["findings"] if f["severity"] == "critical"}


# ---------------------------------------------------------------------------
# The captures


def test_driver_library_mismatch_is_unfit_with_reboot_as_the_remedy() -> None:
    result = audited(MISMATCH)
    assert result["summary"]["verdict"] == "unfit"
    assert result["summary"]["worst_finding"] == {"id": "gpu_driver_library_mismatch", "severity": "critical"}
    finding = by_id(result)["gpu_driver_library_mismatch"]
    assert "590.44.01" in finding["summary"] and "590.48" in finding["summary"]
    assert finding["evidence"]["kernel_module_version"] == "590.44.01"
    assert finding["evidence"]["nvml_library_version"] == "590.48"
    assert finding["evidence"]["nvml"].startswith("NVMLError_LibRmVersionMismatch")
    assert finding["evidence"]["nvidia_smi"].startswith("version_mismatch: Failed to initialize NVML")
    assert len(finding["evidence"]["pci_gpus_bound_to_nvidia"]) == 8
    assert "reload the kernel modules (rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia)" \
        in finding["remedy"] and finding["remedy"].startswith("Reboot")


def test_the_mismatch_report_says_the_driver_is_bound() -> None:
    result = audited(MISMATCH)
    text = render.host_markdown(MISMATCH, result)
    assert "no driver" not in text.split("## Findings")[0]
    assert "the nvidia driver is loaded but NVML and nvidia-smi cannot read the GPUs" in text
    assert "| 0000:01:00.0 | gpu | nvidia |" in text
    # The fleet row reads only the gpus facts and says the same.
    assert "nvidia driver is loaded" in render.fleet_markdown({MISMATCH: result})


def test_the_incident_with_nvml_and_nvidia_smi_failing_as_after_an_upgrade() -> None:
    """The report of the issue: NVML LibRmVersionMismatch, nvidia-smi exit 18, on the incident capture itself."""
    data = capture(INCIDENT)
    data["nvml"] = {"error": "NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.",
                    "kind": "version_mismatch"}
    failed = {"rc": 18, "stdout": "Failed to initialize NVML: Driver/library version mismatch\n", "stderr": ""}
    data["commands"] = {key: (failed if key.startswith("nvidia-smi") else value)
                        for key, value in data["commands"].items()}
    data["commands"][f"nvidia-smi --query-gpu={','.join(QUERY_GPU_FIELDS)} --format=csv,noheader,nounits"] = failed
    result = audit(data)
    assert result["summary"]["verdict"] == "unfit"
    assert criticals(result) == {"gpu_driver_library_mismatch"}


def test_the_incident_without_any_nvml_reading_is_not_fit() -> None:
    """NVML not read and nvidia-smi not in the capture: nothing shows the 8 bound GPUs work."""
    data = capture(INCIDENT)
    del data["nvml"]
    result = audit(data)
    assert result["summary"]["verdict"] == "unfit"
    finding = by_id(result)["gpus_unusable"]
    assert finding["severity"] == "critical" and finding["evidence"]["cause"] == "not_verifiable"
    assert "nothing shows that the GPUs work" in finding["summary"]
    assert "nvidia-ml-py" in finding["remedy"]


@pytest.mark.parametrize(("nvml_error", "smi_error", "cause", "remedy"), [
    ("NVMLError_NoPermission: Insufficient Permissions", "nvml_init_failed: Failed to initialize NVML: "
     "Insufficient Permissions", "no_permission", "become: true"),
    ("NVMLError_DriverNotLoaded: Driver Not Loaded", "driver_not_loaded: NVIDIA-SMI has failed because it couldn't "
     "communicate with the NVIDIA driver.", "driver_not_answering", "nvidia-modprobe"),
    ("NVMLError_LibraryNotFound: NVML Shared Library Not Found", "nvidia-smi is not installed", "user_space_missing",
     "libnvidia-ml.so"),
    ("NVMLError_Unknown: Unknown Error", "timeout: nvidia-smi gave no answer in time", "hung", "wedged"),
    ("NVMLError_GpuIsLost: GPU is lost", "gpu_lost: Unable to determine the device handle: GPU is lost", "gpu_lost",
     "gpu_lost"),
    ("NVMLError_Unknown: Unknown Error", "no_devices: No devices were found", "no_devices", "RmInitAdapter"),
    ("NVMLError_Unknown: Unknown Error", "failed: exit status 2: ???", "other", "by hand"),
])
def test_every_other_cause_of_unusable_bound_gpus(nvml_error: str, smi_error: str, cause: str, remedy: str) -> None:
    facts = audited(PRO6000)
    facts["gpus"] = {"source": None, "count": 0, "devices": [], "nvml_error": nvml_error, "nvidia_smi_error": smi_error}
    finding = by_id({"findings": engine.evaluate(facts)})["gpus_unusable"]
    assert finding["severity"] == "critical" and finding["evidence"]["cause"] == cause
    assert remedy in finding["remedy"]


def test_nvml_answering_with_no_gpu_while_eight_are_bound() -> None:
    facts = audited(PRO6000)
    facts["gpus"] = {"source": "nvml", "count": 0, "devices": [], "driver_version": "580.95.05"}
    finding = by_id({"findings": engine.evaluate(facts)})["gpus_unusable"]
    assert finding["evidence"]["cause"] == "no_devices"


def test_a_gpu_fallen_off_the_bus() -> None:
    result = audited(GPU_LOST)
    assert result["summary"]["verdict"] == "unfit"
    assert result["findings"][0]["id"] == "gpu_lost"  # the cause first, the count after
    lost = by_id(result)["gpu_lost"]
    assert lost["evidence"]["nvml_handles_lost"] == ["GPU3"]
    assert lost["evidence"]["pci_gpus_not_listed"] == ["0000:42:00.0"]
    assert lost["evidence"]["kernel_log"][0].startswith("Xid 79 on 0000:42:00.0, 1 time(s)")
    assert "power-cycle" in lost["remedy"]
    assert by_id(result)["gpu_count_mismatch"]["evidence"]["nvml_device_count"] == 8
    assert by_id(result)["pcie_aer_errors"]["severity"] == "critical"  # the root port's Surprise Down
    assert {"what": "NVML GPU3 (nvmlDeviceGetHandleByIndex)", "error": "NVMLError_GpuIsLost"} in result["problems"]
    assert result["gpus"]["nvml_handle_errors"] == {"3": "NVMLError_GpuIsLost"}


def test_matrices_are_keyed_by_nvml_index_when_a_gpu_is_lost() -> None:
    result = audited(GPU_LOST)
    read = result["p2p"]["read"]
    assert len(read) == 8 and read[3] == [None, None, None, "X", None, None, None, None]
    assert all(row[3] is None for i, row in enumerate(read) if i != 3)
    assert read[7][6] == "OK" and result["topology"]["gpus"][3] == "GPU3"
    assert result["topology"]["numa_affinity"][3] is None and result["topology"]["numa_affinity"][7] == 0
    assert result["summary"]["p2p"] == "ok"  # over the 7 GPUs that answer; GPU3 is not claimed


def test_a_real_pair_without_p2p_beyond_a_lost_gpu_is_not_taken_for_another() -> None:
    """GPU7 and GPU6 report NS; the lost GPU3 shifts the rows NVML read. Before the matrices were keyed by NVML
    index the rules read row 6 of a 7-row matrix for GPU7 and called the host's P2P ok."""
    data = capture(GPU_LOST)
    covered = data["nvml"]["matrix_gpus"]
    row, col = covered.index(7), covered.index(6)
    for matrix in (data["nvml"]["p2p"]["read"], data["nvml"]["p2p"]["write"]):
        matrix[row][col] = matrix[col][row] = 5
    result = audit(data)
    assert result["summary"]["p2p"] == "partial (40 of 42 pairs)"
    p2p = by_id(result)["p2p_not_supported"]
    assert p2p["evidence"]["examples"] == ["GPU6->GPU7: NS", "GPU7->GPU6: NS"]


def test_pairs_not_read_are_unknown_not_missing_p2p() -> None:
    facts = audited(PRO6000)
    for row in facts["p2p"]["read"]:
        row[5] = None
    facts["p2p"]["read"][5] = [None] * 5 + ["X"] + [None] * 2
    findings = by_id({"findings": engine.evaluate(facts)})
    assert "p2p_not_supported" not in findings
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import p2p_verdict

    assert p2p_verdict(facts, list(range(8))) == "unknown (14 of 56 pairs not read)"
    facts["p2p"]["read"][0][1] = "NS"
    assert p2p_verdict(facts, list(range(8))) == "partial (41 of 56 pairs)"
    p2p = by_id({"findings": engine.evaluate(facts)})["p2p_not_supported"]
    assert p2p["evidence"]["pairs_not_read"] == 14 and p2p["evidence"]["pairs_without_p2p"] == 1


def test_without_nvidia_ml_py_nvidia_smi_tells_the_same_story() -> None:
    result = audited(NO_NVML)
    assert result["gpus"]["source"] == "nvidia-smi" and result["gpus"]["count"] == 8
    assert result["summary"]["verdict"] == "unfit"
    assert criticals(result) == {"p2p_not_supported"}
    assert "nvml_unavailable" in by_id(result)
    # Its health readings came from nvidia-smi -q -x: ECC counters and row remapping (test_no_nvml.py has more).
    health = result["health"]
    assert health["gpus_source"] == "nvidia-smi -q -x" and len(health["gpus"]) == 8
    assert health["gpus"][0]["ecc"]["uncorrected_volatile"] == 0 and health["gpus"][0]["row_remap"]["pending"] is False
    assert health["gpus"][0]["clocks_event_reasons"]["active"] == ["gpu_idle"]


def test_a_gpu_nvml_counts_but_cannot_open_for_another_reason() -> None:
    facts = audited(PRO6000)
    facts["gpus"]["nvml_handle_errors"] = {"5": "NVMLError_InsufficientPower", "6": "NVMLError_SomethingNew"}
    facts["gpus"]["nvml_device_count"] = 10
    finding = by_id({"findings": engine.evaluate(facts)})["gpu_handle_failed"]
    assert finding["severity"] == "critical"
    assert "power cables" in finding["evidence"]["gpus"]["GPU5"]
    assert "GPU5: NVMLError_InsufficientPower" in finding["remedy"] and "Xid" in finding["evidence"]["gpus"]["GPU6"]


# ---------------------------------------------------------------------------
# The NVML reader, over a stand-in for nvidia-ml-py


class NVMLError(Exception):
    pass


def _error(name: str) -> type[NVMLError]:
    return type(f"NVMLError_{name}", (NVMLError,), {})


NotSupported, GpuIsLost, LibRm = _error("NotSupported"), _error("GpuIsLost"), _error("LibRmVersionMismatch")


def fake_pynvml(count: int = 4, lost: tuple[int, ...] = (2,), ns_pairs: tuple[tuple[int, int], ...] = ((0, 3),),
                old_binding: bool = True) -> types.SimpleNamespace:
    """Enough of pynvml for read_nvml: ``count`` GPUs, handles of ``lost`` failing with GpuIsLost."""

    def unsupported(*_args: Any) -> Any:
        raise NotSupported()

    def handle(index: int) -> int:
        if index in lost:
            raise GpuIsLost()
        return index

    def p2p(a: int, b: int, cap: int) -> int:
        return 5 if (a, b) in ns_pairs or (b, a) in ns_pairs else 0

    class FabricInfo:
        state = 3
        status = 0

    def fabric(h: int, info: FabricInfo) -> int:
        info.state, info.status = (2, 0) if h == 1 else (3, 0)
        return 0

    module = types.SimpleNamespace(
        NVMLError=NVMLError, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: b"580.95.05", nvmlSystemGetCudaDriverVersion=lambda: 13000,
        nvmlSystemGetNVMLVersion=lambda: "13.580.95.05", nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=handle, nvmlDeviceGetP2PStatus=p2p,
        nvmlDeviceGetTopologyCommonAncestor=lambda a, b: 40,
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=f"00000000:{h + 1:02X}:00.0".encode()),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=96 << 30),
        nvmlDeviceGetBAR1MemoryInfo=lambda h: types.SimpleNamespace(bar1Total=128 << 30),
        nvmlDeviceGetEccMode=lambda h: [1, 1], nvmlDeviceGetMigMode=unsupported,
        nvmlDeviceGetName=lambda h: "NVIDIA H100 80GB HBM3", nvmlDeviceGetUUID=lambda h: f"GPU-{h}",
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0), nvmlDeviceGetCurrPcieLinkGeneration=lambda h: 5,
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: 5, nvmlDeviceGetCurrPcieLinkWidth=lambda h: 16,
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: 16, nvmlDeviceGetPersistenceMode=lambda h: 1,
        nvmlDeviceGetBrand=lambda h: 14, nvmlDeviceGetVirtualizationMode=lambda h: 0,
        nvmlDeviceGetNvLinkState=unsupported, nvmlDeviceGetNvLinkRemotePciInfo=unsupported,
        nvmlDeviceGetTotalEccErrors=lambda h, kind, counter: 2 if (h, kind, counter) == (3, 1, 0) else 0,
        nvmlDeviceGetRetiredPagesPendingStatus=unsupported, nvmlDeviceGetRetiredPages=unsupported,
        nvmlDeviceGetRemappedRows=lambda h: (0, 1, 1, 0) if h == 3 else (0, 0, 0, 0),
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x1,
        c_nvmlGpuFabricInfo_t=FabricInfo, nvmlDeviceGetGpuFabricInfo=fabric,
    )
    if not old_binding:
        module.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x40
    return module


def replay(snapshot: dict[str, Any]) -> dict[str, Any]:
    return audit({"format": CAPTURE_FORMAT, "note": "fake", "files": {}, "dirs": {}, "links": {}, "realpaths": {},
                  "commands": {}, "nvml": snapshot})


def test_the_reader_keys_the_matrices_by_the_gpus_they_cover() -> None:
    snapshot = nvml._read_initialised(fake_pynvml())
    assert snapshot["device_count"] == 4 and snapshot["matrix_gpus"] == [0, 1, 3]
    assert snapshot["errors"] == {"gpu2.handle": "NVMLError_GpuIsLost"}
    assert [d["index"] for d in snapshot["devices"]] == [0, 1, 3]
    result = replay(snapshot)
    read = result["p2p"]["read"]
    assert read[0][3] == read[3][0] == "NS" and read[0][1] == "OK" and read[2] == [None, None, "X", None]
    assert result["summary"]["p2p"] == "partial (4 of 6 pairs)"
    assert {"gpu_lost", "p2p_not_supported"} <= criticals(result)
    assert by_id(result)["p2p_not_supported"]["evidence"]["examples"] == ["GPU0->GPU3: NS", "GPU3->GPU0: NS"]
    assert {"what": "NVML GPU2 (nvmlDeviceGetHandleByIndex)", "error": "NVMLError_GpuIsLost"} in result["problems"]


def test_the_reader_takes_health_through_every_guard() -> None:
    snapshot = nvml._read_initialised(fake_pynvml(lost=()))
    health = snapshot["devices"][3]["health"]
    assert health["ecc_uncorrected_volatile"] == 2 and health["remapped_rows"]["pending"] == 1
    assert health["clocks_event_reasons"] == 0x1  # an older binding: ...ThrottleReasons
    assert health["errors"]["retired_pages_pending"] == "NVMLError_NotSupported"
    assert health["fabric"] == {"state": 3, "status": 0}
    result = replay(snapshot)
    assert {"ecc_uncorrectable_errors", "gpu_fabric_not_ready"} <= criticals(result)
    assert "row_remap_pending" in by_id(result)
    newer = nvml._read_initialised(fake_pynvml(lost=(), old_binding=False))
    assert newer["devices"][0]["health"]["clocks_event_reasons"] == 0x40


def test_a_binding_without_the_health_functions_still_reads_the_gpus() -> None:
    module = fake_pynvml(lost=())
    for name in ("nvmlDeviceGetRemappedRows", "nvmlDeviceGetCurrentClocksThrottleReasons", "c_nvmlGpuFabricInfo_t"):
        delattr(module, name)
    module.nvmlDeviceGetTotalEccErrors = lambda *args: (_ for _ in ()).throw(TypeError("wrong arity"))
    snapshot = nvml._read_initialised(module)
    health = snapshot["devices"][0]["health"]
    assert health["remapped_rows"] is None and health["clocks_event_reasons"] is None and health["fabric"] is None
    assert health["errors"]["remapped_rows"] == "not in this nvidia-ml-py"
    assert health["errors"]["ecc_uncorrected_volatile"].startswith("TypeError")
    assert replay(snapshot)["summary"]["gpu_count"] == 4


def test_a_version_mismatch_at_init_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_pynvml()

    def refuse() -> None:
        raise LibRm()

    module.nvmlInit = refuse
    monkeypatch.setitem(sys.modules, "pynvml", module)
    snapshot = nvml.read_nvml()
    assert snapshot["kind"] == "version_mismatch" and snapshot["error"].startswith("NVMLError_LibRmVersionMismatch")


# ---------------------------------------------------------------------------
# gpu_audit_fail_on=critical fails these hosts: the module's facts through the role's own expressions


def role_blocking(facts: dict[str, Any], fail_on: str, capsys: pytest.CaptureFixture[str],
                  dest: str | None = None) -> list[str]:
    """roles/gpu_audit's 'Say what the audit found' (its when, that and vars, as Ansible renders them, over what
    the report task returned for these facts): the ids it fails the host on; [] when the task is skipped or
    passes."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    tasks = yaml.safe_load((ROOT / "roles" / "gpu_audit" / "tasks" / "main.yml").read_text(encoding="utf-8"))
    task = next(t for t in tasks if t.get("name") == "Say what the audit found")
    variables = {name: trust_as_template(value) for name, value in (task.get("vars") or {}).items()}
    with tempfile.TemporaryDirectory() as empty:
        reports = run_module(gpu_audit_report.main, {"dest": dest or empty, "hosts": {"h": facts}}, capsys)
    variables.update({"gpu_audit_fail_on": fail_on, "ansible_facts": {"gpu_host": facts}, "inventory_hostname": "h",
                      "gpuhost_report_dir": "reports", "gpu_audit_guest_link": {}, "gpu_audit_reports": reports})
    templar = Templar(loader=DataLoader(), variables=variables)

    def holds(conditions: Any) -> bool:
        conditions = conditions if isinstance(conditions, list) else [conditions]
        return all(templar.template(trust_as_template("{{ " + str(c) + " }}")) for c in conditions)

    if "when" in task and not holds(task["when"]):
        return []
    if holds(task["ansible.builtin.assert"]["that"]):
        return []
    blocking = templar.template(trust_as_template("{{ __gpu_audit_blocking | map(attribute='id') | list }}"))
    assert blocking, "the task fails the host, so it names what blocks"
    return list(blocking)


@pytest.mark.parametrize(("name", "cause"), [(MISMATCH, "gpu_driver_library_mismatch"), (GPU_LOST, "gpu_lost"),
                                             (NO_NVML, "p2p_not_supported")])
def test_fail_on_critical_fails_the_unusable_hosts(name: str, cause: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_host_facts.main, {"capture": str(CAPTURES / f"{name}.json")}, capsys)
    facts = result["ansible_facts"]["gpu_host"]
    assert facts["summary"]["verdict"] == "unfit"
    assert cause in role_blocking(facts, "critical", capsys)
    assert role_blocking(facts, "", capsys) == []


def test_fail_on_critical_passes_a_healthy_host(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_host_facts.main, {"capture": str(CAPTURES / f"{PRO6000}.json")}, capsys)
    assert role_blocking(result["ansible_facts"]["gpu_host"], "critical", capsys) == []


def test_fail_on_reads_the_findings_drift_adds(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A benchmark proved P2P on one driver; the host now runs another: the audit alone finds nothing, the report
    finds the proof stale, and gpu_audit_fail_on=warning fails the host on it."""
    bench = {"probe": {"source": "probe", "tool": "torch", "status": "ok", "devices": [], "access": None,
                       "proof": None, "matrices": [], "hung_at": None, "findings": [], "changed": False}, "nccl": None}
    run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": audited(PRO6000)}, "bench": {"h": bench}},
               capsys)
    data = capture(PRO6000)
    data["nvml"]["driver_version"] = "590.44.01"
    upgraded = audit(data)
    assert [f["id"] for f in upgraded["findings"] if f["severity"] in ("critical", "warning")] == []
    assert role_blocking(upgraded, "warning", capsys, str(tmp_path)) == ["p2p_proof_stale"]


def test_a_damaged_lost_gpu_capture_still_gets_a_verdict() -> None:
    data = capture(GPU_LOST)
    for damage in ({"matrix_gpus": "three"}, {"device_count": -1}, {"matrix_gpus": [0, 1, 2, 4, 5, 6, 7, 9]},
                   {"errors": {"gpu3.handle": 42, "gpu.handle": "x"}}):
        damaged = copy.deepcopy(data)
        damaged["nvml"].update(damage)
        assert audit(damaged)["summary"]["verdict"] in ("fit", "fit, with warnings", "unfit")


def test_a_mismatch_audited_without_the_pci_subset_is_named_too() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import ReplaySource
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

    result = facts.audit(ReplaySource(capture(MISMATCH)), ["gpus"], RuleOptions())
    assert [f["id"] for f in result["findings"]] == ["gpu_driver_library_mismatch"]
    finding = result["findings"][0]
    assert finding["evidence"]["pci_gpus_bound_to_nvidia"] == "PCI not gathered"
    assert finding["summary"].startswith("The GPUs are bound to the nvidia driver but unusable")
