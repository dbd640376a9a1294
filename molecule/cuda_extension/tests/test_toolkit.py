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


def stack_targets() -> list[str]:
    """Every GPU architecture the stack profiles build for: their archs and the gencode targets their extensions
    compile (sgl-kernel's), as nvcc names them (sm_120, sm_90a)."""
    import yaml

    targets: set[str] = set()
    for path in (PROJECT / "roles/serving_stack/vars/stacks").glob("*.yml"):
        profile = yaml.safe_load(path.read_text())["serving_stack"]
        targets.update("sm_" + arch.replace(".", "") for arch in profile["archs"])
        for extension in profile.get("extensions") or []:
            targets.update(extension.get("gencode_targets") or [])
    return sorted(targets)


def test_real_nvcc_builds_every_architecture_the_stacks_target(host, kernel: str) -> None:
    from elf_fatbin import fatbin_entries

    targets = stack_targets()
    assert {"sm_120", "sm_90", "sm_86", "sm_100a"} <= set(targets)
    # One compile with a cubin per target, as an extension build does it.
    gencode = " ".join(f"-gencode arch=compute_{t[3:]},code={t}" for t in targets)
    host.check_output(f"{HOME}/bin/nvcc {gencode} -Xcompiler -fPIC -shared {kernel} -o /tmp/cuda-pip-test/all.so")
    data = base64.b64decode(host.check_output("base64 -w0 /tmp/cuda-pip-test/all.so"))
    built = {sm for kind, sm in fatbin_entries(data) if kind == "elf"}
    assert built == {int(t[3:].rstrip("af")) for t in targets}


CLASH_KERNEL = "__global__ void k(float *x) { x[0] = sinpif(x[0]) + (float)cospi((double)x[0]); }\n"


def test_cuda_12_8_headers_clash_with_glibc_2_41(host) -> None:
    """CUDA 12.8's real headers (NVIDIA's nvidia-cuda-nvcc-cu12 and nvidia-cuda-runtime-cu12 12.8 wheels, which
    carry no nvcc) put before 13.1's, compiled by 13.1's real nvcc: on glibc 2.41 every host compile stops at
    sinpi/cospi, which the roles therefore refuse; 13.1's own headers compile the same kernel."""
    glibc = host.check_output("getconf GNU_LIBC_VERSION").split()[-1]
    if tuple(int(p) for p in glibc.split(".")[:2]) < (2, 41):
        pytest.skip(f"glibc {glibc}: the clash needs 2.41 or newer (make molecule PLATFORM=trixie)")
    work = "/tmp/cuda-12-8-headers"
    host.check_output(
        f"install -d {work}/wheels {work}/include && {VENV}/bin/python -m pip download --quiet --no-deps "
        f"--cert /etc/ssl/certs/ca-certificates.crt -d {work}/wheels nvidia-cuda-nvcc-cu12==12.8.93 "
        "nvidia-cuda-runtime-cu12==12.8.90")
    host.check_output(f"cd {work}/wheels && for w in *.whl; do {VENV}/bin/python -m zipfile -e $w x; done && "
                      f"cp -r x/nvidia/cuda_runtime/include/. x/nvidia/cuda_nvcc/include/. {work}/include/")
    encoded = base64.b64encode(CLASH_KERNEL.encode()).decode()
    host.check_output(f"echo {encoded} | base64 -d > {work}/k.cu")
    clash = host.run(f"{HOME}/bin/nvcc -arch=sm_120 -I {work}/include -c {work}/k.cu -o {work}/k128.o")
    assert clash.rc != 0
    said = clash.stdout + clash.stderr
    assert 'exception specification is incompatible with that of previous function "sinpi"' in said
    assert host.run(f"{HOME}/bin/nvcc -arch=sm_120 -c {work}/k.cu -o {work}/k131.o").rc == 0
