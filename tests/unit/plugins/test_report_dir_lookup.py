"""The report directory and the controller paths, resolved in one place (plugins/plugin_utils/controller_paths.py)
and read through the lookups gpuhost.gpu.report_dir and gpuhost.gpu.controller_path, as Ansible runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.lookup import controller_path, report_dir
from ansible_collections.gpuhost.gpu.plugins.plugin_utils import controller_paths

from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from tests.paths import ROOT


@pytest.fixture
def launched_from(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PWD", "/srv/gpu")
    return "/srv/gpu"


PLUGINS = {"report_dir": report_dir, "controller_path": controller_path}


def lookup(name: str, *terms: str, **variables: object) -> list[str]:
    """The lookup run as Ansible runs it: with the play's variables and a templar over them."""
    loader = DataLoader()
    options = {key: variables.pop(key) for key in ("base",) if key in variables}
    plugin = PLUGINS[name].LookupModule(loader=loader, templar=Templar(loader=loader, variables=variables))
    return plugin.run(list(terms), variables=variables, **options)


@pytest.mark.parametrize(("path", "resolved"), [
    ("reports", "/srv/gpu/reports"),
    ("out/reports", "/srv/gpu/out/reports"),
    ("/var/lib/gpuhost/reports", "/var/lib/gpuhost/reports"),
    # ~ is the home of whoever reads the path: the module that expands it, maybe on another host.
    ("~/reports", "~/reports"),
    ("", ""),
])
def test_a_relative_path_is_taken_from_the_launch_directory(launched_from, path, resolved):
    assert controller_paths.resolve(path) == resolved


def test_the_root_as_launch_directory_and_no_pwd_at_all(monkeypatch):
    assert controller_paths.resolve("reports", environ={"PWD": "/"}) == "/reports"
    monkeypatch.delenv("PWD")
    monkeypatch.chdir("/tmp")
    assert controller_paths.resolve("reports") == str(Path("/tmp").resolve()) + "/reports"


def test_the_report_dir_defaults_to_reports_under_the_launch_directory(launched_from):
    assert lookup("report_dir") == ["/srv/gpu/reports"]
    assert lookup("report_dir", gpuhost_report_dir="") == ["/srv/gpu/reports"]


def test_the_report_dir_is_the_one_variable_templated_and_resolved(launched_from):
    assert lookup("report_dir", gpuhost_report_dir="out/reports") == ["/srv/gpu/out/reports"]
    # As an inventory's group_vars write it.
    templated = trust_as_template("{{ inventory_dir }}/../../reports/example")
    assert lookup("report_dir", gpuhost_report_dir=templated, inventory_dir="/inv/example") == \
        ["/inv/example/../../reports/example"]


def test_a_playbook_run_from_elsewhere_names_the_users_directory(launched_from):
    assert lookup("report_dir", base="/home/support") == ["/home/support/reports"]
    assert lookup("report_dir", base="/home/support", gpuhost_report_dir="/abs") == ["/abs"]
    assert lookup("controller_path", "a.json", base="/home/support") == ["/home/support/a.json"]
    assert lookup("controller_path", base="/home/support") == ["/home/support"]


def test_a_retired_report_dir_variable_is_warned_about_not_read(launched_from, monkeypatch):
    warned: list[str] = []
    monkeypatch.setattr(report_dir.display, "warning", warned.append)
    assert lookup("report_dir", gpu_audit_report_dir="/old", gpuhost_report_dir="new") == ["/srv/gpu/new"]
    assert warned == ["gpu_audit_report_dir is no longer read: the collection's one report directory is "
                      "gpuhost_report_dir. The reports of this run go to /srv/gpu/new; set gpuhost_report_dir "
                      "instead of gpu_audit_report_dir."]
    warned.clear()
    lookup("report_dir")
    assert warned == []


def test_the_report_dir_refuses_terms_and_a_value_that_is_not_a_path(launched_from):
    with pytest.raises(AnsibleError, match="takes no terms"):
        lookup("report_dir", "reports")
    with pytest.raises(AnsibleError, match=r"gpuhost_report_dir: expected a directory path"):
        lookup("report_dir", gpuhost_report_dir=["a", "b"])


def test_controller_paths_resolve_each_term_and_without_terms_name_the_launch_directory(launched_from):
    assert lookup("controller_path", "captures/gpu-node-1.json", "/abs", "") == \
        ["/srv/gpu/captures/gpu-node-1.json", "/abs", ""]
    assert lookup("controller_path") == ["/srv/gpu"]


@pytest.mark.parametrize("plugin", [report_dir, controller_path], ids=["report_dir", "controller_path"])
def test_the_documentation_reads_as_yaml(plugin):
    doc = yaml.safe_load(plugin.DOCUMENTATION)
    assert doc["name"] == plugin.__name__.rsplit(".", 1)[1] and doc["short_description"] and doc["description"]
    assert yaml.safe_load(plugin.EXAMPLES) and yaml.safe_load(plugin.RETURN)["_raw"]["description"]


def test_no_role_or_playbook_resolves_a_controller_path_itself():
    """The launch directory is read in plugin_utils/controller_paths.py only."""
    files = [ROOT / "site.yml", *ROOT.glob("playbooks/**/*.yml"), *ROOT.glob("roles/**/*.yml"),
             *ROOT.glob("roles/**/*.j2")]
    offenders = [str(f.relative_to(ROOT)) for f in files
                 if "'PWD')" in f.read_text(encoding="utf-8") or '"PWD")' in f.read_text(encoding="utf-8")]
    assert offenders == []
