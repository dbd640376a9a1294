"""Without NVML the audit reads nvidia-smi: `-q -x` once for what `--query-gpu` cannot give (BAR1, virtualization
mode, brand, row remapping, fabric), `--query-gpu` for the rest, and `--query-gpu` alone, exactly as before,
when `-q -x` does not answer. The incident guest audited without nvidia-ml-py (NO_NVML) and changes of it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CommandResult, ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import FIXTURES
from tests.unit import schemas
from tests.unit.captures import I440FX, MISMATCH, NO_NVML, audit, audited, capture

pytestmark = pytest.mark.capture

SMI_Q = "nvidia-smi -q -x"


class CountingReplay(ReplaySource):
    """A replay that counts the commands asked; unlike a live source it keeps no answer, so a second
    run of a command shows."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.asked: Counter[str] = Counter()

    def run(self, argv: list[str]) -> CommandResult:
        self.asked[" ".join(argv)] += 1
        return super().run(argv)


def without_q(data: dict[str, Any]) -> dict[str, Any]:
    del data["commands"][SMI_Q]
    return data


def problems_about_q(result: dict[str, Any]) -> list[dict[str, str]]:
    return [p for p in result["problems"] if p["what"] == SMI_Q]


def test_the_guest_without_nvml_ml_py_has_bar1_and_health_from_q() -> None:
    result = audited(NO_NVML)
    gpus = result["gpus"]
    assert gpus["source"] == "nvidia-smi" and gpus["count"] == 8
    assert gpus["cuda_driver_version"] == "13.1" and gpus["driver_version"] == "590.44.01"
    for index, device in enumerate(gpus["devices"]):
        assert device["index"] == index and device["pci_bus_id"] == f"0000:{index + 1:02x}:00.0"
        assert (device["bar1_total_mib"], device["virtualization_mode"], device["brand"]) == \
            (131072, "passthrough", "nvidia_rtx")
        assert device["unsupported"] == []
    health = result["health"]
    assert health["gpus_source"] == "nvidia-smi -q -x" and len(health["gpus"]) == 8
    first = health["gpus"][0]
    assert (first["index"], first["pci_bus_id"], first["source"]) == (0, "0000:01:00.0", "nvidia-smi -q -x")
    # What --query-gpu never had: row remapping, read and fine.
    assert first["row_remap"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False}
    assert first["ecc"]["uncorrected_volatile"] == 0 and first["ecc"]["corrected_aggregate"] == 0
    assert first["clocks_event_reasons"] == {"mask": 0x1, "active": ["gpu_idle"]}
    # A Blackwell board outside an NVLink fabric prints its fabric as N/A: unknown, and said so.
    assert first["fabric"] == {"state": None, "status": None} and first["unsupported"] == \
        ["fabric", "retired_pages_dbe", "retired_pages_pending", "retired_pages_sbe"]
    assert problems_about_q(result) == []


def test_q_is_read_once_in_an_audit() -> None:
    source = CountingReplay(capture(NO_NVML))
    facts.audit(source, facts.resolve_subsets(["all"]), RuleOptions())
    assert source.asked[SMI_Q] == 1
    # Its health readings replace the --query-gpu health query, which is not asked.
    assert not any(key.startswith("nvidia-smi --query-gpu=index,pci.bus_id,ecc") for key in source.asked)


def test_a_capture_without_q_falls_back_to_query_gpu() -> None:
    result = audit(without_q(capture(NO_NVML)))
    assert [d["bar1_total_mib"] for d in result["gpus"]["devices"]] == [None] * 8
    assert {d["virtualization_mode"] for d in result["gpus"]["devices"]} == {None}
    assert "cuda_driver_version" not in result["gpus"]
    health = result["health"]
    assert health["gpus_source"] == "nvidia-smi" and len(health["gpus"]) == 8
    assert health["gpus"][0]["row_remap"]["pending"] is None
    assert health["gpus"][0]["clocks_event_reasons"]["active"] == ["gpu_idle"]
    # nvidia-smi answered the rest: a missing -q -x alone is not worth a line.
    assert problems_about_q(result) == [] and result["problems"] == audited(NO_NVML)["problems"]


def test_the_fallback_gives_what_it_gave_before() -> None:
    """The i440fx guest's capture has no -q -x: its facts are the --query-gpu ones, as they always were."""
    result = audited(I440FX)
    assert result["health"]["gpus_source"] == "nvidia-smi"
    assert [d["bar1_total_mib"] for d in result["gpus"]["devices"]] == [None, None]
    assert result["problems"] == []


@pytest.mark.parametrize(("answer", "said"), [
    ({"rc": 9, "stdout": "", "stderr": "Unable to write XML output\n"},
     "failed: exit status 9: Unable to write XML output"),
    ({"rc": 0, "stdout": "==============NVSMI LOG==============\n", "stderr": ""}, "unreadable: "),
    ({"rc": 0, "stdout": '<?xml version="1.0" ?>\n<nvidia_smi_log>\n<attached_gpus>0</attached_gpus>\n'
                         "</nvidia_smi_log>\n", "stderr": ""}, "unreadable: the document lists no GPU"),
])
def test_q_failing_where_query_gpu_answers_is_noted_and_falls_back(answer: dict[str, Any], said: str) -> None:
    data = capture(NO_NVML)
    data["commands"][SMI_Q] = answer
    result = audit(data)
    assert result["health"]["gpus_source"] == "nvidia-smi" and len(result["health"]["gpus"]) == 8
    assert [d["bar1_total_mib"] for d in result["gpus"]["devices"]] == [None] * 8
    (problem,) = problems_about_q(result)
    assert problem["error"].startswith(said)
    assert "Traceback" not in problem["error"]


def test_q_failing_like_everything_else_adds_nothing() -> None:
    """A driver/library mismatch fails -q -x as it fails --query-gpu: the GPU facts say it once."""
    data = capture(MISMATCH)
    query = next(key for key in data["commands"] if key.startswith("nvidia-smi --query-gpu="))
    data["commands"][SMI_Q] = data["commands"][query]
    result = audit(data)
    assert problems_about_q(result) == []
    assert result["gpus"]["source"] is None and "mismatch" in result["gpus"]["nvidia_smi_error"].lower()
    assert "gpu_driver_library_mismatch" in {f["id"] for f in result["findings"]}


def test_q_matches_gpus_by_bus_id_not_by_position() -> None:
    """A document listing the GPUs in another order (or only some: nvidia-smi -q -x -i) still fills each
    GPU with its own readings."""
    data = capture(NO_NVML)
    text = data["commands"][SMI_Q]["stdout"]
    head, _, rest = text.partition('\t<gpu id="')
    blocks = ['\t<gpu id="' + block for block in rest.split('\t<gpu id="')]
    tail = blocks[-1][blocks[-1].index("</gpu>\n") + len("</gpu>\n"):]
    blocks[-1] = blocks[-1][:len(blocks[-1]) - len(tail)]
    # GPU2's remap pending, then the document in reverse order with GPU5 left out.
    blocks[2] = blocks[2].replace("<remapped_row_pending>No<", "<remapped_row_pending>Yes<")
    kept = [block for number, block in enumerate(blocks) if number != 5][::-1]
    data["commands"][SMI_Q]["stdout"] = head + "".join(kept) + tail
    result = audit(data)
    by_bus = {g["pci_bus_id"]: g for g in result["health"]["gpus"]}
    assert len(by_bus) == 7 and "0000:06:00.0" not in by_bus
    assert by_bus["0000:03:00.0"]["index"] == 2 and by_bus["0000:03:00.0"]["row_remap"]["pending"] is True
    assert [g for g in by_bus.values() if g["row_remap"]["pending"]] == [by_bus["0000:03:00.0"]]
    devices = result["gpus"]["devices"]
    assert [d["bar1_total_mib"] for d in devices] == [131072] * 5 + [None] + [131072] * 2
    found = {f["id"]: f for f in result["findings"]}
    assert list(found["row_remap_pending"]["evidence"]["gpus"]) == ["GPU2 (0000:03:00.0)"]


def test_a_document_cut_short_gives_what_it_holds_and_says_so() -> None:
    data = capture(NO_NVML)
    text = data["commands"][SMI_Q]["stdout"]
    data["commands"][SMI_Q]["stdout"] = text[:text.index('\t<gpu id="00000000:04:00.0">') + 200]
    result = audit(data)
    health = result["health"]
    assert health["gpus_source"] == "nvidia-smi -q -x"
    assert [g["index"] for g in health["gpus"]] == [0, 1, 2, 3]
    # GPU3 was cut in its first lines: its readings are unknown, not zero.
    assert set(health["gpus"][3]["ecc"].values()) == {None} and health["gpus"][3]["row_remap"]["pending"] is None
    assert [d["bar1_total_mib"] for d in result["gpus"]["devices"]] == [131072] * 3 + [None] * 5
    (problem,) = problems_about_q(result)
    assert "ends before </nvidia_smi_log>" in problem["error"]


def test_what_the_topology_parser_repaired_reaches_the_facts() -> None:
    # nvidia-smi on hosts with ten or more NICs prints some cells without the tab between them; the
    # parser splits them, and the facts say so instead of passing the repair off as what was printed.
    data = capture(NO_NVML)
    data["commands"]["nvidia-smi topo -m"]["stdout"] = (
        FIXTURES / "nvidia-smi" / "topo-m_8xNV18-12nics_NIC4-NIC5-one-field.txt").read_text()
    topology = audit(data)["topology"]
    assert topology["matrix"][0][1] == "NV18"
    assert any("without a tab" in note for note in topology["notes"]), topology["notes"]
    errors = [e.message for e in schemas.validator("facts").iter_errors(audit(data))]
    assert not errors, errors


def test_a_topology_read_as_printed_has_no_notes() -> None:
    assert "notes" not in audited(NO_NVML)["topology"]
