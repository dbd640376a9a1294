"""variable_check over the project's own roles and playbooks: misspelled variables warn, real ones do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import variable_check
import yaml

from tests.paths import ROOT
from tests.unit.modules import run_module

ROLES = str(ROOT / "roles")
PLAYBOOKS = str(ROOT / "playbooks")


def check(capsys: pytest.CaptureFixture[str], names: list[str], **args: Any) -> dict[str, Any]:
    result = run_module(variable_check.main, {"names": names, "roles_dir": ROLES, "paths": [PLAYBOOKS], **args},
                        capsys, check_mode=True)
    # Warnings as the module gave them (this Ansible wraps each in an event; in one process they accumulate).
    result["warnings"] = [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]
    return result


def messages(result: dict[str, Any]) -> list[str]:
    return [u["message"] for u in result["unknown"]]


def test_a_misspelled_role_variable_warns_with_the_closest(capsys):
    result = check(capsys, ["gpu_audit_captur", "gpu_audit_capture", "inventory_hostname"], roles=["gpu_audit"])
    assert messages(result) == [
        "gpu_audit_captur is not a variable of role gpu_audit; did you mean gpu_audit_capture?"]
    assert messages(result)[0] in result["warnings"]
    assert result["changed"] is False


def test_shared_deploy_variables_are_checked_against_what_the_roles_read(capsys):
    result = check(capsys, ["deploy_modle", "deploy_model", "deploy_known_good_override", "deploy_accept_findings"],
                   roles=["deployment_gate"], shared=["deploy_"])
    assert messages(result) == [
        "deploy_known_good_override is not one of the shared deploy_* variables; did you mean "
        "deploy_known_good_overrides?",
        "deploy_modle is not one of the shared deploy_* variables; did you mean deploy_model?",
    ]


def test_only_the_roles_asked_for_are_checked_and_the_longest_prefix_owns_a_name(capsys):
    names = ["gpu_audit_captur", "sglang_serve_prot", "deployment_gate_fail_on_blok"]
    assert messages(check(capsys, names, roles=["deployment_gate"])) == [
        "deployment_gate_fail_on_blok is not a variable of role deployment_gate; did you mean "
        "deployment_gate_fail_on_block?"]
    assert [u["owner"] for u in check(capsys, names)["unknown"]] == [
        "a variable of role deployment_gate", "a variable of role gpu_audit", "a variable of role sglang_serve"]


def test_the_collection_wide_report_directory_is_checked_as_a_shared_variable(capsys):
    result = check(capsys, ["gpuhost_report_dri", "gpuhost_report_dir"], roles=["gpu_audit"], shared=["gpuhost_"])
    assert messages(result) == [
        "gpuhost_report_dri is not one of the shared gpuhost_* variables; did you mean gpuhost_report_dir?"]


def test_variables_of_the_playbooks_and_results_of_the_roles_are_known(capsys):
    # gpu_audit_hosts is the audit playbook's; gpu_audit_result and deployment_gate_result are set by the roles.
    names = ["gpu_audit_hosts", "gpu_audit_result", "gpu_audit_reports", "deployment_gate_result"]
    assert check(capsys, names)["unknown"] == []


def inventory_names(path: Path) -> set[str]:
    def walk(node: Any) -> set[str]:
        found: set[str] = set()
        if isinstance(node, dict):
            found |= set(node.get("vars") or {})
            for host in (node.get("hosts") or {}).values():
                found |= set(host or {})
            for child in (node.get("children") or {}).values():
                found |= walk(child)
        return found

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return walk(data.get("all", {})) if isinstance(data, dict) and "all" in data else set(data or {})


def test_the_shipped_inventories_raise_no_warning(capsys):
    paths = [ROOT / "tests" / "fleet" / "hosts.yml", ROOT / "tests" / "fleet" / "lost.yml",
             *sorted((ROOT / "inventories").rglob("*.yml"))]
    names = sorted(set().union(*(inventory_names(p) for p in paths)))
    assert "deploy_model" in names
    assert check(capsys, names, shared=["deploy_", "gpuhost_"])["unknown"] == []


def test_a_roles_dir_that_is_not_one_fails_with_what_to_pass(capsys, tmp_path):
    result = run_module(variable_check.main, {"names": [], "roles_dir": str(tmp_path / "nope")}, capsys)
    assert result["failed"] is True
    assert "roles_dir: expected the directory holding the roles" in result["msg"]
    result = run_module(variable_check.main, {"names": [], "roles_dir": ROLES, "roles": ["gpu_audt"]}, capsys)
    assert "found gpu_audt. Name roles that exist" in result["msg"]
