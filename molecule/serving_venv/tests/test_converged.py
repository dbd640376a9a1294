"""The converged containers: a uv venv owned by the service user, torch's CPU build, SGLang from source."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

# podman exec directly: through Ansible every command costs seconds.
testinfra_hosts = ["podman://serving-venv-primary", "podman://serving-venv-replica"]

VENV = "/opt/sglang/venv"
PYTHON = f"{VENV}/bin/python"
REQUIREMENTS = "/opt/sglang/requirements"
UV = "/opt/uv/0.13.9/bin/uv"
SOURCE = "/opt/sglang/src/sglang/sglang-0.5.10.post1"
LOCKS = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "locks/cpu-test"


def as_service_user(host, command: str) -> str:
    # -B: checking must not leave root-owned bytecode in the venv.
    return host.check_output(f"runuser -u sglang -- {PYTHON} -B -c '{command}'")


def test_service_user_is_a_system_user_without_login(host) -> None:
    user = host.user("sglang")
    assert user.exists
    assert user.uid < 1000
    assert user.shell == "/usr/sbin/nologin"
    assert user.home == "/opt/sglang"
    assert user.group == "sglang"


def test_venv_belongs_to_the_service_user(host) -> None:
    assert host.file(VENV).user == "sglang"
    assert host.file(f"{VENV}/pyvenv.cfg").user == "sglang"
    assert host.check_output(f"find {VENV} ! -user sglang -print -quit") == ""
    # The parent is not handed over: only the venv and the home's own files.
    assert host.file("/opt").user == "root"


def test_venv_was_made_by_uv_with_the_profiles_python(host) -> None:
    config = host.file(f"{VENV}/pyvenv.cfg").content_string
    assert re.search(r"^uv = 0\.13\.9$", config, re.MULTILINE), config
    assert re.search(r"^version_info = 3\.11\.", config, re.MULTILINE), config
    assert host.check_output(f"{UV} --version").startswith("uv 0.13.9")


def test_torch_is_the_profiles_cpu_build(host) -> None:
    found = json.loads(as_service_user(
        host, "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"))
    assert found == ["2.13.0+cpu", None]


def test_sglang_imports_at_the_profiles_version_from_its_source(host) -> None:
    found = json.loads(as_service_user(
        host,
        "import json, sglang; from importlib import metadata as m; d = m.distribution(\"sglang\"); "
        "print(json.dumps([sglang.__version__, d.version, json.loads(d.read_text(\"direct_url.json\"))]))",
    ))
    assert found == ["0.5.10.post1", "0.5.10.post1", {"url": f"file://{SOURCE}", "dir_info": {}}]
    assert host.file(f"{SOURCE}/pyproject.toml").user == "sglang"


def test_source_record_names_the_pypi_source(host) -> None:
    record = json.loads(host.file("/opt/sglang/src/sglang.source.json").content_string)
    assert record["type"] == "pypi"
    assert record["version"] == "0.5.10.post1"
    assert record["subdir"] == "sglang-0.5.10.post1"


def test_uv_pip_check_finds_only_what_sglang_was_installed_without(host) -> None:
    result = host.run(f"{UV} pip check --python {PYTHON}")
    problems = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("The package ")]
    assert problems, "SGLang without its dependencies must leave requirements unmet"
    assert all(line.startswith("The package `sglang` requires") for line in problems), problems
    # What it was given instead is there and consistent.
    assert not any("`transformers`" in line or "`openai`" in line for line in problems), problems


def test_layers_and_locks_are_recorded(host) -> None:
    base_in = host.file(f"{REQUIREMENTS}/base.in").content_string.splitlines()
    assert base_in[1:] == ["torch==2.13.0", "numpy", "packaging"]
    constraints = host.file(f"{REQUIREMENTS}/sglang.constraints.txt").content_string
    assert "torch==2.13.0+cpu\n" in constraints
    base_lock = host.file(f"{REQUIREMENTS}/base.lock").content_string
    assert re.search(r"^torch==2\.13\.0\+cpu$", base_lock, re.MULTILINE)
    sglang_lock = host.file(f"{REQUIREMENTS}/sglang.lock").content_string
    assert sglang_lock.endswith(
        f"# python_venv: installed without its dependencies\nsglang @ file://{SOURCE}\n")
    assert re.search(r"^transformers==5\.3\.0$", sglang_lock, re.MULTILINE)


@pytest.mark.parametrize("layer", ["base", "sglang"])
def test_host_lock_is_the_controllers(host, layer: str) -> None:
    kept = sorted(LOCKS.glob(f"{layer}-*.lock"))
    assert len(kept) == 1, kept
    assert host.file(f"{REQUIREMENTS}/{layer}.lock").content_string == kept[0].read_text()


def test_freeze_file_is_what_is_installed(host) -> None:
    freeze = host.file(f"{REQUIREMENTS}/freeze.txt").content_string
    assert freeze.strip() == host.check_output(f"{UV} pip freeze --python {PYTHON}").strip()
    assert "torch==2.13.0+cpu" in freeze.splitlines()
    assert f"sglang @ file://{SOURCE}" in freeze.splitlines()


def test_launch_server_help_stops_at_the_gpu_stack(host) -> None:
    # The README's claim, kept honest: the pure-Python set is complete, and what is missing is triton with
    # a torchvision built for this torch (PyPI has only CUDA builds of it), so --help is not verified here.
    result = host.run(f"runuser -u sglang -- {PYTHON} -B -m sglang.launch_server --help")
    assert result.rc != 0
    assert result.stderr.strip().splitlines()[-1] == "ModuleNotFoundError: No module named 'triton'"


def test_syncs_kept_the_extension_installed_outside_the_locks(host) -> None:
    # six stands for a wheel cuda_extension built and installed: in the profile's extensions, in no lock.
    freeze = host.file(f"{REQUIREMENTS}/freeze.txt").content_string.splitlines()
    assert "six==1.17.0" in freeze
    for layer in ("base", "sglang"):
        assert not re.search(r"^six==", host.file(f"{REQUIREMENTS}/{layer}.lock").content_string, re.MULTILINE)
    assert "torch==2.13.0+cpu\nsix==1.17.0\n" in host.file(f"{REQUIREMENTS}/sglang.constraints.txt").content_string
