"""The builder: CUDA 13.1 from NVIDIA's wheels (the cuda_toolkit role, pip method), laid out as a toolkit."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

# podman exec directly: through Ansible every command costs seconds.
testinfra_hosts = ["podman://cuda-extension-builder"]

PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
KERNEL = PROJECT / "roles/cuda_toolkit/files/verify_kernel.cu"
HOME = "/usr/local/cuda-13.1"
VENV = "/opt/cuda-pip/13.1"


def test_toolkit_home_leads_into_the_wheels(host) -> None:
    home = host.file(HOME)
    assert home.is_symlink
    assert home.linked_to.startswith(f"{VENV}/lib/python3")
    assert home.linked_to.endswith("/site-packages/nvidia/cu13")
    for path in ("bin/nvcc", "bin/ptxas", "nvvm/bin/cicc", "include/cuda_runtime.h", "lib/libcudart_static.a"):
        assert host.file(f"{HOME}/{path}").exists, path
    assert host.file(f"{HOME}/lib64").linked_to == f"{home.linked_to}/lib"
    assert host.file(f"{HOME}/lib/libcudart.so").linked_to == f"{home.linked_to}/lib/libcudart.so.13"


def test_version_json_names_the_release(host) -> None:
    version = json.loads(host.file(f"{HOME}/version.json").content_string)
    assert version["cuda"]["name"] == "CUDA SDK"
    assert version["cuda"]["version"].startswith("13.1.")
    assert version["cuda_nvcc"]["version"].startswith("13.1.")


def test_wheels_installed_in_the_release_environment(host) -> None:
    listing = json.loads(host.check_output(f"{VENV}/bin/python -m pip list --format json --disable-pip-version-check"))
    versions = {item["name"].lower(): item["version"] for item in listing}
    assert versions["cuda-toolkit"].startswith("13.1.")
    for name in ("nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-cuda-cccl", "nvidia-cuda-crt"):
        assert versions[name].startswith("13.1."), name


def test_cuda_alternatives_point_at_the_wheels(host) -> None:
    assert host.check_output("readlink /usr/local/cuda") == "/etc/alternatives/cuda"
    assert host.check_output("readlink /etc/alternatives/cuda") == HOME
    query = host.check_output("update-alternatives --query cuda")
    assert "Status: manual" in query
    assert f"Value: {HOME}" in query
    assert host.check_output("readlink /etc/alternatives/cuda-13") == HOME


def test_profile_puts_the_default_nvcc_first(host) -> None:
    assert host.file("/etc/profile.d/cuda.sh").mode == 0o644
    shell = host.run("bash -lc 'command -v nvcc; nvcc --version'")
    assert shell.rc == 0, shell.stderr
    assert shell.stdout.splitlines()[0] == "/usr/local/cuda/bin/nvcc"
    assert "Cuda compilation tools, release 13.1, V13.1." in shell.stdout


def test_refused_release_left_nothing_behind(host) -> None:
    for path in ("/usr/local/cuda-12.8", "/opt/cuda-pip/12.8"):
        assert not host.file(path).exists, path


@pytest.fixture(scope="module")
def kernel(host) -> str:
    encoded = base64.b64encode(KERNEL.read_bytes()).decode()
    host.check_output(f"install -d /tmp/cuda-pip-test && echo {encoded} | base64 -d > /tmp/cuda-pip-test/k.cu")
    return "/tmp/cuda-pip-test/k.cu"


@pytest.mark.parametrize("arch", ["sm_120", "sm_90"])
def test_real_nvcc_builds_and_links_the_kernel(host, kernel: str, arch: str) -> None:
    # No -L or -I: the layout alone must let nvcc find its headers and libraries.
    base = f"/tmp/cuda-pip-test/k_{arch}"
    host.check_output(f"{HOME}/bin/nvcc -arch={arch} -c {kernel} -o {base}.o")
    host.check_output(f"{HOME}/bin/nvcc -arch={arch} {base}.o -o {base}")
    # The GPU code for the architecture is embedded in the program, which runs without a GPU.
    assert int(host.check_output(f"grep -c -a {arch} {base}")) > 0
    assert host.check_output(base) == "no CUDA device: built only"


def test_real_nvcc_refuses_dropped_architectures(host, kernel: str) -> None:
    result = host.run(f"{HOME}/bin/nvcc -arch=sm_52 -c {kernel} -o /tmp/cuda-pip-test/x.o")
    assert result.rc != 0
    assert "Unsupported gpu architecture 'sm_52'" in result.stderr
