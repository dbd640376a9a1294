"""VBIOS and driver consistency across the hosts of one class: hosts built from a real `nvidia-smi -q` paste
(2x H100 80GB HBM3, VBIOS 96.00.89.00.01, driver 550.54.15), one of them given another VBIOS or driver; the
odd host gets the warning naming every host and version, hosts that agree are silent, and the finding reaches
the report, fleet.md and the metrics through gpu_audit_report."""

from __future__ import annotations

import json
from pathlib import Path

import gpu_audit_report
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.fleet_class import class_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import load
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import FIXTURES
from tests.unit import schemas
from tests.unit.modules import run_module

REAL = (FIXTURES / "nvidia-smi" / "q_550_2xH100-HBM3_fabric.txt").read_text()
MODEL = "NVIDIA H100 80GB HBM3"


CLASS = {"format": "gpuhost-manifest/1", "class": "hgx-h100", "gpus": {"count": 2, "model": MODEL}}


def host(vbios: str = "96.00.89.00.01", driver: str = "550.54.15", manifest: dict | None = CLASS) -> dict:
    text = REAL.replace("96.00.89.00.01", vbios).replace("550.54.15", driver)
    capture = build_capture([("nvidia-smi-q.txt", text.encode())])
    options = RuleOptions(manifest=load(manifest, "manifest") if manifest else None)
    return facts.audit(replay(capture), facts.resolve_subsets(["all"]), options)


def ids(found: dict) -> dict[str, set[str]]:
    return {h: {f.id for f in fs} for h, fs in found.items()}


def test_the_real_paste_reads_one_vbios_and_driver() -> None:
    one = host()
    assert {d["vbios_version"] for d in one["gpus"]["devices"]} == {"96.00.89.00.01"}
    assert one["gpus"]["driver_version"] == "550.54.15"


def test_hosts_that_agree_are_silent() -> None:
    assert class_findings({"a": host(), "b": host(), "c": host()}) == {}


def test_hosts_without_a_manifest_class_are_compared_with_nobody() -> None:
    """The defaults stay quiet: one GPU model is no class (a bare-metal host and a VM guest differ rightly)."""
    assert class_findings({"a": host(manifest=None), "b": host(manifest=None),
                           "c": host(vbios="96.00.74.00.1C", driver="550.120", manifest=None)}) == {}


def test_the_odd_vbios_is_told_on_its_host_naming_every_host_and_version() -> None:
    found = class_findings({"a": host(), "b": host(), "c": host(vbios="96.00.74.00.1C")})
    assert ids(found) == {"c": {"fleet_vbios_mismatch"}}
    [finding] = found["c"]
    assert (finding.severity, finding.action) == ("warning", "none")
    assert finding.summary == (f"Hosts of class hgx-h100 run different VBIOS versions of the {MODEL}: "
                               "96.00.89.00.01 on a, b; 96.00.74.00.1C on c (this host: 96.00.74.00.1C).")
    assert finding.evidence["vbios_by_host"] == {"a": "96.00.89.00.01", "b": "96.00.89.00.01",
                                                 "c": "96.00.74.00.1C"}


def test_two_hosts_that_differ_are_both_told_and_a_driver_differs_too() -> None:
    found = class_findings({"a": host(), "b": host(vbios="96.00.74.00.1C", driver="550.120")})
    assert ids(found) == {"a": {"fleet_vbios_mismatch", "fleet_driver_mismatch"},
                          "b": {"fleet_vbios_mismatch", "fleet_driver_mismatch"}}


def test_the_manifest_class_decides_and_separates_hosts_of_one_model() -> None:
    manifest = CLASS
    other = dict(manifest, **{"class": "lab-h100"})
    found = class_findings({"a": host(manifest=manifest), "b": host(manifest=manifest),
                            "c": host(vbios="96.00.74.00.1C", manifest=other)})
    assert found == {}, "c is alone in its class"
    found = class_findings({"a": host(manifest=manifest), "b": host(vbios="96.00.74.00.1C", manifest=manifest),
                            "c": host(manifest=manifest)})
    assert ids(found) == {"b": {"fleet_vbios_mismatch"}}
    assert found["b"][0].summary.startswith("Hosts of class hgx-h100 run different VBIOS versions")


def test_the_facts_with_a_manifest_class_follow_the_published_schema() -> None:
    manifest = {"format": "gpuhost-manifest/1", "class": "hgx-h100", "gpus": {"count": 2, "model": MODEL}}
    judged = host(manifest=manifest)
    assert judged["manifest_class"] == "hgx-h100"
    errors = sorted(schemas.validator("facts").iter_errors(judged), key=str)
    assert not errors, errors[0].message


def test_a_vbios_not_read_is_never_counted_as_different() -> None:
    unread = host()
    for device in unread["gpus"]["devices"]:
        device["vbios_version"] = None
    assert class_findings({"a": host(), "b": unread}) == {}


def test_gpu_audit_report_folds_it_into_each_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = {"a": host(), "b": host(), "c": host(vbios="96.00.74.00.1C")}
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": hosts}, capsys)
    assert result["changed"]
    report = (tmp_path / "c.json").read_text()
    assert '"fleet_vbios_mismatch"' in report and '"fleet_vbios_mismatch"' not in (tmp_path / "a.json").read_text()
    assert "fleet_vbios_mismatch" in (tmp_path / "c.md").read_text()
    # The one record's counts carry it (fleet.md, set_stats and the metrics read them from there).
    counts = {h: json.loads((tmp_path / f"{h}.json").read_text())["summary"]["counts"] for h in "ac"}
    assert counts["c"]["warning"] == counts["a"]["warning"] + 1
    # Again with the same facts: nothing changes (the finding is made once per run, never piled up).
    again = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": hosts}, capsys)
    assert again["written"] == []
