"""The project's own modules, roles and filters are named by FQCN (gpuhost.gpu.<name>) wherever YAML uses them.

A short name resolves only where a checkout's ansible.cfg happens to make it: installed as a collection, a
role naming `gpu_host_facts` or `gpu_audit` fails ("couldn't resolve module/action"), and a template calling
`sglang_serve_mask` has no such filter. Every task file, playbook, role meta, template and molecule scenario
is read as YAML (templates as text) and each use checked.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.paths import ROOT

FQCN = "gpuhost.gpu."
MODULES = {path.stem for path in (ROOT / "plugins" / "modules").glob("*.py")}
ROLES = {path.name for path in (ROOT / "roles").iterdir() if path.is_dir()}
FILTERS = {"sglang_serve_exec_arg", "sglang_serve_specifiers", "sglang_serve_value_problems",
           "sglang_serve_api_key_problems", "sglang_serve_mask"}
SET_FACT = {"ansible.builtin.set_fact", "set_fact", "vars"}
ROLE_KEYS = {"ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role"}
# Data, not tasks: variables may share a module's name (serving_stack_profile is a role variable too).
DATA_PARTS = {"defaults", "vars", "host_vars", "group_vars", "fixtures", "captures", "argument_specs.yml"}


def yaml_files() -> list[Path]:
    roots = [ROOT / "roles", ROOT / "playbooks", ROOT / "molecule", ROOT / "tests" / "fleet", ROOT / "site.yml"]
    files = []
    for root in roots:
        candidates = [root] if root.is_file() else [*root.rglob("*.yml"), *root.rglob("*.yaml")]
        files += [path for path in candidates if not DATA_PARTS & set(path.relative_to(ROOT).parts)
                  and "collections" not in path.relative_to(ROOT).parts]
    return sorted(files)


def short_names(node: Any, where: str) -> list[str]:
    """Short module names used as task keys, short role names in role references."""
    problems = []
    if isinstance(node, list):
        for item in node:
            problems += short_names(item, where)
    elif isinstance(node, dict):
        problems += [f"{where}: module {key} (use {FQCN}{key})" for key in node if key in MODULES]
        if node.get("role") in ROLES:
            problems.append(f"{where}: role {node['role']} (use {FQCN}{node['role']})")
        for key in ROLE_KEYS & set(node):
            name = (node[key] or {}).get("name") if isinstance(node[key], dict) else None
            if name in ROLES:
                problems.append(f"{where}: {key} {name} (use {FQCN}{name})")
        if "hosts" in node and isinstance(node.get("roles"), list):  # a play's roles (variable_check has its own)
            problems += [f"{where}: role {entry} (use {FQCN}{entry})" for entry in node["roles"]
                         if isinstance(entry, str) and entry in ROLES]
        if isinstance(node.get("dependencies"), list):
            problems += [f"{where}: dependency {entry} (use {FQCN}{entry})" for entry in node["dependencies"]
                         if isinstance(entry, str) and entry in ROLES]
        for key, value in node.items():
            if key in SET_FACT:  # its keys are variables, which may share a module's name
                continue
            problems += short_names(value, where)
    return problems


def test_yaml_names_the_projects_modules_and_roles_by_fqcn() -> None:
    files = yaml_files()
    assert len(files) > 50  # the scan reaches the roles, playbooks and scenarios
    problems = []
    for path in files:
        problems += short_names(yaml.safe_load(path.read_text()), str(path.relative_to(ROOT)))
    assert problems == []


SHORT_FILTER = re.compile(r"(?:\|\s*|map\(\s*['\"])(" + "|".join(sorted(FILTERS)) + r")\b")


def test_templates_and_tasks_call_the_filters_by_fqcn() -> None:
    texts = [*ROOT.glob("roles/*/templates/*.j2"), *yaml_files()]
    problems = [f"{path.relative_to(ROOT)}: {match}" for path in texts
                for match in SHORT_FILTER.findall(path.read_text())]
    assert problems == []


def test_the_checks_catch_short_names() -> None:
    assert short_names([{"name": "t", "gpu_host_facts": {}}, {"role": "gpu_audit"},
                        {"ansible.builtin.include_role": {"name": "sglang_serve"}}], "x") == [
        "x: module gpu_host_facts (use gpuhost.gpu.gpu_host_facts)", "x: role gpu_audit (use gpuhost.gpu.gpu_audit)",
        "x: ansible.builtin.include_role sglang_serve (use gpuhost.gpu.sglang_serve)"]
    assert short_names([{"ansible.builtin.set_fact": {"proxmox_fix_report": 1}}], "x") == []
    assert SHORT_FILTER.findall("{{ x | sglang_serve_mask(k) }} {{ y | map('sglang_serve_exec_arg') }}") == [
        "sglang_serve_mask", "sglang_serve_exec_arg"]
    assert SHORT_FILTER.findall("{{ x | gpuhost.gpu.sglang_serve_mask(k) }}") == []
