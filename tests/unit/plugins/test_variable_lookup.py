"""Renamed variables, read in one place (plugins/plugin_utils/renamed_variables.py) through the lookup
gpuhost.gpu.variable, as Ansible runs it: the former name still works, and says so once."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.lookup import variable
from ansible_collections.gpuhost.gpu.plugins.plugin_utils.renamed_variables import RENAMED_VARIABLES

from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from tests.paths import ROOT


@pytest.fixture
def warned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(variable.display, "warning", said.append)
    return said


def lookup(*terms: str, **variables: object) -> list[object]:
    loader = DataLoader()
    plugin = variable.LookupModule(loader=loader, templar=Templar(loader=loader, variables=variables))
    return plugin.run(list(terms), variables=variables)


def test_the_current_name_is_read_templated(warned):
    assert lookup("gpu_bench_model", gpu_bench_model="glm-5") == ["glm-5"]
    shape = {"name": "m", "layers": 2, "hidden_size": 8}
    assert lookup("gpu_bench_model", gpu_bench_model=trust_as_template("{{ shape }}"), shape=shape) == [shape]
    assert warned == []


@pytest.mark.parametrize(("name", "former"), sorted(RENAMED_VARIABLES.items()))
def test_the_former_name_is_read_in_its_place_and_warned_about(warned, name, former):
    # The role's default fills the current name; the former one was set on purpose, so it wins.
    assert lookup(name, **{name: "glm-5", former: "llama-3-70b"}) == ["llama-3-70b"]
    assert lookup(name, **{former: ""}) == [""]  # "" meant "no model" under the former name too
    assert warned == [f"{former} is renamed {name}: this run reads {former}, and {name} is left aside; set {name} "
                      f"instead of {former}."] * 2


def test_an_unset_variable_fails_naming_it():
    with pytest.raises(AnsibleError, match=r"found 'gpu_bench_model' unset"):
        lookup("gpu_bench_model")


def test_the_documentation_reads_as_yaml():
    doc = yaml.safe_load(variable.DOCUMENTATION)
    assert doc["name"] == "variable" and doc["short_description"] and doc["description"]
    assert yaml.safe_load(variable.EXAMPLES) and yaml.safe_load(variable.RETURN)["_raw"]["description"]


def test_the_former_names_are_named_nowhere_else_in_roles_and_playbooks():
    """A role or playbook reads a renamed variable through the lookup, never by its former name."""
    files = [ROOT / "site.yml", *ROOT.glob("playbooks/**/*.yml"), *ROOT.glob("roles/**/*.yml"),
             *ROOT.glob("roles/**/*.j2")]
    offenders = sorted(f"{f.relative_to(ROOT)}: {former}" for f in files for former in RENAMED_VARIABLES.values()
                       if f"{{{{ {former}" in f.read_text(encoding="utf-8")
                       or f"{former}:" in f.read_text(encoding="utf-8"))
    assert offenders == []
