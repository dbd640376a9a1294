"""The converged container: both toolkits from the stand-in repository, one of them the default.

verify runs twice: after converge (default 12.8) and after side_effect switched the default to
13.1, which side_effect records in the scenario's ephemeral directory.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

# podman exec directly: through Ansible every command costs seconds.
testinfra_hosts = ["podman://cuda-apt"]

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
KERNEL = PROJECT / "roles/cuda_toolkit/files/verify_kernel.cu"

# What NVIDIA's packages for these releases are versioned as, and what their nvcc prints.
RELEASES = {
    "12.8": {"toolkit": "12.8.1-1", "sdk": "12.8.1", "nvcc": "V12.8.93"},
    "13.1": {"toolkit": "13.1.2-1", "sdk": "13.1.2", "nvcc": "V13.1.115"},
}
PACKAGES = {
    "cuda-toolkit-12-8": "12.8.1-1",
    "cuda-nvcc-12-8": "12.8.93-1",
    "cuda-cudart-dev-12-8": "12.8.90-1",
    "cuda-toolkit-12-8-config-common": "12.8.90-1",
    "cuda-nvtx-12-8": "12.8.90-1",  # the component asked for in cuda_toolkit_components
    "cuda-toolkit-13-1": "13.1.2-1",
    "cuda-nvcc-13-1": "13.1.115-1",
    "cuda-cudart-dev-13-1": "13.1.80-1",
    "cuda-toolkit-13-1-config-common": "13.1.80-1",
    "cuda-toolkit-config-common": "13.1.80-1",
}
# NVIDIA's directory for the release the containers boot (make molecule PLATFORM=...).
REPOSITORY = {"bookworm": "debian12", "trixie": "debian13", "noble": "ubuntu2404"}[
    os.environ.get("GPUHOST_PLATFORM", "bookworm")]
REPO_URI = f"file:///srv/nvidia-repo/{REPOSITORY}/x86_64/"


@pytest.fixture(scope="module")
def default_release() -> str:
    marker = EPHEMERAL / "expected-default"
    return marker.read_text().strip() if marker.exists() else "12.8"


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_toolkit_lives_under_its_own_prefix(host, release: str) -> None:
    home = host.file(f"/usr/local/cuda-{release}")
    assert home.is_directory and not home.is_symlink
    assert host.file(f"/usr/local/cuda-{release}/bin/nvcc").mode & 0o111
    # As in NVIDIA's toolkits: include and lib64 lead into targets/x86_64-linux.
    assert host.file(f"/usr/local/cuda-{release}/include").linked_to == (
        f"/usr/local/cuda-{release}/targets/x86_64-linux/include"
    )
    assert host.file(f"/usr/local/cuda-{release}/lib64").linked_to == (
        f"/usr/local/cuda-{release}/targets/x86_64-linux/lib"
    )
    assert host.file(f"/usr/local/cuda-{release}/include/cuda_runtime.h").is_file
    version = json.loads(host.file(f"/usr/local/cuda-{release}/version.json").content_string)
    assert version["cuda"]["version"] == RELEASES[release]["sdk"]
    assert "V" + version["cuda_nvcc"]["version"] == RELEASES[release]["nvcc"]


@pytest.mark.parametrize(("name", "version"), sorted(PACKAGES.items()))
def test_package_installed_at_nvidia_version(host, name: str, version: str) -> None:
    package = host.package(name)
    assert package.is_installed
    assert package.version == version


def test_packages_came_from_the_local_repository(host) -> None:
    policy = host.check_output("apt-cache policy cuda-toolkit-12-8 cuda-toolkit-13-1")
    # Installed version, the pin's priority, and the repository it came from.
    assert "*** 12.8.1-1 600" in policy
    assert "*** 13.1.2-1 600" in policy
    assert f"file:/srv/nvidia-repo/{REPOSITORY}/x86_64" in policy


def test_apt_source_is_deb822_with_signed_by(host) -> None:
    source = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert source.mode == 0o644
    fields = dict(
        line.split(": ", 1) for line in source.content_string.splitlines() if ": " in line and not line[0].isspace()
    )
    assert fields["Types"] == "deb"
    assert fields["URIs"] == REPO_URI
    assert fields["Suites"] == "/"
    assert "Components" not in fields
    assert fields["Signed-By"] == "/etc/apt/keyrings/nvidia-cuda.asc"
    # The key in place is the one this run's repository was signed with.
    key = host.file("/etc/apt/keyrings/nvidia-cuda.asc")
    assert key.content_string.strip() == (EPHEMERAL / "aptrepo/nvidia-test.asc").read_text().strip()
    assert not host.file("/etc/apt/trusted.gpg").exists  # no apt-key


def test_repository_signature_is_checked(host) -> None:
    # apt keeps a repository's InRelease only once its signature checked out against Signed-By
    # (it escapes "_" in the file name).
    lists = host.check_output("ls /var/lib/apt/lists").split()
    assert f"_srv_nvidia-repo_{REPOSITORY}_x86%5f64_InRelease" in lists
    update = host.run(
        "apt-get update -o Dir::Etc::SourceList=/etc/apt/sources.list.d/nvidia-cuda.sources "
        "-o Dir::Etc::SourceParts=- -o APT::Get::List-Cleanup=0"
    )
    assert update.rc == 0, update.stderr
    assert "NO_PUBKEY" not in update.stdout + update.stderr
    assert "W:" not in update.stdout + update.stderr


def test_pin_covers_only_the_toolkit(host) -> None:
    pin = host.file("/etc/apt/preferences.d/cuda-toolkit.pref")
    assert pin.mode == 0o644
    text = pin.content_string
    assert "Pin: release l=NVIDIA CUDA" in text
    assert "Pin-Priority: 600" in text
    package_line = next(line for line in text.splitlines() if line.startswith("Package:"))
    names = package_line.split(":", 1)[1].split()
    assert "cuda-*" in names
    assert "*" not in names
    assert not any(name.startswith(("nvidia", "libnvidia", "libnccl", "libcudnn")) for name in names)


def test_cuda_alternative_points_at_the_default(host, default_release: str) -> None:
    assert host.file("/usr/local/cuda").linked_to == f"/usr/local/cuda-{default_release}"
    assert host.file("/usr/local/cuda").is_symlink
    assert host.check_output("readlink /usr/local/cuda") == "/etc/alternatives/cuda"
    query = host.check_output("update-alternatives --query cuda")
    assert "Status: manual" in query
    assert f"Value: /usr/local/cuda-{default_release}" in query
    for release in RELEASES:
        assert f"Alternative: /usr/local/cuda-{release}" in query


@pytest.mark.parametrize(("group", "release"), [("cuda-12", "12.8"), ("cuda-13", "13.1")])
def test_major_release_alternatives(host, group: str, release: str) -> None:
    assert host.file(f"/usr/local/{group}").linked_to == f"/usr/local/cuda-{release}"


def test_profile_sets_the_default_environment(host, default_release: str) -> None:
    profile = host.file("/etc/profile.d/cuda.sh")
    assert profile.mode == 0o644
    assert profile.user == "root"
    assert "CUDA_HOME=/usr/local/cuda\n" in profile.content_string
    assert f"CUDA {default_release}." in profile.content_string
    shell = host.run("bash -lc 'command -v nvcc; nvcc --version; echo \"$CUDA_HOME|$LD_LIBRARY_PATH\"'")
    assert shell.rc == 0, shell.stderr
    lines = shell.stdout.splitlines()
    assert lines[0] == "/usr/local/cuda/bin/nvcc"
    assert f"release {default_release}," in shell.stdout
    assert lines[-1].startswith("/usr/local/cuda|/usr/local/cuda/lib64")
    # Sourcing twice does not stack the same directories.
    twice = host.check_output("bash -lc '. /etc/profile.d/cuda.sh; echo \"$PATH\"'")
    assert twice.split(":").count("/usr/local/cuda/bin") == 1


def test_loader_path_from_the_config_package(host) -> None:
    assert host.file("/etc/ld.so.conf.d/000_cuda.conf").content_string.strip() == (
        "/usr/local/cuda/targets/x86_64-linux/lib"
    )


@pytest.fixture(scope="module")
def kernel(host) -> str:
    encoded = base64.b64encode(KERNEL.read_bytes()).decode()
    host.check_output(f"install -d /tmp/cuda-apt-test && echo {encoded} | base64 -d > /tmp/cuda-apt-test/k.cu")
    return "/tmp/cuda-apt-test/k.cu"


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_nvcc_reports_its_release(host, release: str) -> None:
    out = host.check_output(f"/usr/local/cuda-{release}/bin/nvcc --version")
    assert f"Cuda compilation tools, release {release}, {RELEASES[release]['nvcc']}" in out


@pytest.mark.parametrize("arch", ["sm_120", "sm_90"])
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_kernel_builds_for_each_arch(host, kernel: str, release: str, arch: str) -> None:
    nvcc = f"/usr/local/cuda-{release}/bin/nvcc"
    base = f"/tmp/cuda-apt-test/k_{release}_{arch}"
    host.check_output(f"{nvcc} -arch={arch} -c {kernel} -o {base}.o")
    host.check_output(f"{nvcc} -arch={arch} {base}.o -o {base}")
    assert host.file(base).mode & 0o111
    assert arch in host.check_output(base)


def test_stand_in_rejects_what_the_release_cannot_build(host, kernel: str) -> None:
    # CUDA 13 dropped Maxwell to Volta: the stand-in fails as the real nvcc does, so a wrong
    # architecture list would fail the role's verify step.
    result = host.run(f"/usr/local/cuda-13.1/bin/nvcc -arch=sm_52 -c {kernel} -o /tmp/cuda-apt-test/x.o")
    assert result.rc != 0
    assert "Unsupported gpu architecture 'sm_52'" in result.stderr
