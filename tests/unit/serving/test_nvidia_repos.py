"""NVIDIA's repository table (module_utils/serving/nvidia_repos.py): its facts, the default branch per distribution,
the package names per packaging and branch, the roles reading it, and the stand-in repository built from it, read by
apt itself."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.filter import nvidia_repo as filters
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving import nvidia_repos as table

from tests.paths import ROOT

_spec = importlib.util.spec_from_file_location("aptrepo_build", ROOT / "tests/aptrepo/build.py")
assert _spec is not None and _spec.loader is not None
build = importlib.util.module_from_spec(_spec)
sys.modules["aptrepo_build"] = build
_spec.loader.exec_module(build)

TOOLS = all(shutil.which(t) for t in ("dpkg-deb", "gpg", "gpgv", "gpgconf", "apt-get", "apt-cache"))


def repo(name: str) -> table.Repo:
    return next(r for r in table.REPOSITORIES if r.name == name)


def test_keys_per_repository() -> None:
    # debian13 is signed with 8793F200; the others keep 3bf863cc, which Debian 13's apt rejects.
    assert {r.name: r.key for r in table.REPOSITORIES} == {
        "debian12": "3bf863cc", "debian13": "8793F200", "ubuntu2204": "3bf863cc", "ubuntu2404": "3bf863cc"}
    assert table.KEYS["3bf863cc"]["fingerprint"] == "EB693B3035CD5710E231E123A4B469963BF863CC"
    assert table.KEYS["8793F200"]["fingerprint"] is None  # not published in NVIDIA's text: unknown, not guessed


def test_every_row_cites_its_sources() -> None:
    for row in table.REPOSITORIES:
        assert row.sources and all(s in table.SOURCES for s in row.sources), row.name
        assert "keys" in row.sources
        assert ("debian_names" if row.packaging == "debian" else "ubuntu_names") in row.sources
    assert "debian13_branches" in repo("debian13").sources


def test_debian13_has_no_580_and_no_arm() -> None:
    assert "580" not in repo("debian13").branches
    assert filters.nvidia_repo("Debian", "13", "aarch64")["problem"].startswith("NVIDIA publishes no debian13")


@pytest.mark.parametrize(("distribution", "version", "name"), [
    ("Debian", "12", "debian12"), ("Debian", "13", "debian13"), ("Ubuntu", "22.04", "ubuntu2204"),
    ("Ubuntu", "24.04", "ubuntu2404")])
def test_find_by_ansible_facts(distribution: str, version: str, name: str) -> None:
    row = filters.nvidia_repo(distribution, version, "x86_64")
    assert row["name"] == name and row["problem"] is None
    assert row["url"] == f"https://developer.download.nvidia.com/compute/cuda/repos/{name}/x86_64/"


@pytest.mark.parametrize(("distribution", "version"), [("Ubuntu", "24.10"), ("Debian", "11"), ("Fedora", "41")])
def test_unserved_hosts_get_a_sentence(distribution: str, version: str) -> None:
    problem = filters.nvidia_repo(distribution, version, "x86_64")["problem"]
    assert "NVIDIA publishes no CUDA apt repository" in problem and "Debian 13 (x86_64)" in problem


@pytest.mark.parametrize(("name", "caps", "branch", "lts"), [
    ("debian12", [], "580", True), ("ubuntu2404", ["12.0"], "580", True), ("ubuntu2204", ["9.0"], "580", True),
    ("debian13", [], "590", False), ("debian13", ["12.0", "12.0"], "590", False)])
def test_default_branch_is_one_the_repository_has(name: str, caps: list[str], branch: str, lts: bool) -> None:
    choice = table.default_branch(repo(name), caps)
    assert (choice["branch"], choice["lts"], choice["problem"]) == (branch, lts, None)
    assert choice["branch"] in repo(name).branches


def test_no_branch_for_pre_turing_on_debian13() -> None:
    choice = filters.nvidia_driver_packages(filters.nvidia_repo("Debian", "13"), "", "proprietary", ["6.0"])
    assert choice["problem"].startswith("debian13 publishes branches 590, and none fits these GPUs")
    assert "older than Turing end with branch 580" in choice["problem"]


def test_the_role_default_is_the_table() -> None:
    defaults = yaml.safe_load((ROOT / "roles/nvidia_driver/defaults/main.yml").read_text())
    assert defaults["nvidia_driver_branch"] == ""


@pytest.mark.parametrize(("name", "branch", "flavor", "packages", "persistenced"), [
    ("debian13", "590", "open", ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"], "nvidia-persistenced"),
    ("debian12", "580", "proprietary", ["nvidia-driver-cuda", "nvidia-kernel-dkms"], "nvidia-persistenced"),
    ("ubuntu2404", "580", "open", ["nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-utils-580"],
     "nvidia-compute-utils-580"),
    # NVIDIA's 590 renames: the branch leaves the Ubuntu names.
    ("ubuntu2404", "590", "open", ["nvidia-dkms-open", "libnvidia-compute", "nvidia-utils"], "nvidia-compute-utils"),
    ("ubuntu2204", "590", "proprietary", ["nvidia-dkms", "libnvidia-compute", "nvidia-utils"],
     "nvidia-compute-utils")])
def test_package_names(name: str, branch: str, flavor: str, packages: list[str], persistenced: str) -> None:
    names = table.driver_packages(repo(name), branch, flavor)
    assert names["packages"] == packages and names["persistenced_package"] == persistenced
    assert names["fabricmanager_package"] == "nvidia-fabricmanager"
    assert names["other_kmod_package"] != names["kmod_package"]
    assert table.driver_packages(repo(name), "570", flavor)["fabricmanager_package"] == "nvidia-fabricmanager-570"


@pytest.mark.parametrize(("branch", "flavor"), [("58", "open"), ("580", "closed")])
def test_bad_requests_say_what_to_choose(branch: str, flavor: str) -> None:
    assert filters.nvidia_driver_packages(filters.nvidia_repo("Debian", "12"), branch, flavor)["problem"]


def test_both_roles_read_the_table_and_no_key_is_written_elsewhere() -> None:
    for role in ("nvidia_driver", "cuda_toolkit"):
        assert "gpuhost.gpu.nvidia_repo(" in (ROOT / "roles" / role / "vars/main.yml").read_text()
    # One keyring name shared by two roles with different keys was the conflict: no role names a key file itself.
    for path in (ROOT / "roles").rglob("*.yml"):
        if path.parent.name in ("vars", "defaults", "tasks"):
            text = path.read_text().lower()
            assert "3bf863cc.pub" not in text and "8793f200.pub" not in text, path


def test_madison_and_offer() -> None:
    madison = ("nvidia-kernel-open-dkms | 590.48.01-1 | file:/srv/m/debian13/x86_64  Packages\n"
               "nvidia-driver-cuda | 1:590.48.01-1 | file:/srv/m/debian13/x86_64  Packages\nN: junk\n")
    offer = filters.nvidia_apt_offer(madison, ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"], "580", "",
                                     ["nvidia-kernel-open-dkms"])
    assert offer["branches"] == ["590"] and offer["missing"] == ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"]
    assert filters.nvidia_apt_offer(madison, ["nvidia-driver-cuda"], "590", "590.48.01", [])["missing"] == []


@pytest.mark.parametrize(("releases", "glibc", "refused"), [
    (["12.8", "13.1"], "2.41", True), (["12.8"], "2.42", True), (["13.1"], "2.41", False),
    (["12.8"], "2.39", False), (["12.8"], "2.36", False), (["12.8"], "", False), (["12.8"], "unknown", False)])
def test_cuda_12_refused_on_glibc_241(releases: list[str], glibc: str, refused: bool) -> None:
    clash = filters.cuda_glibc_clash(releases, glibc)
    assert (clash is not None) == refused
    if refused:
        assert "CUDA 12.8" in clash and "noexcept" in clash and "13.x" in clash


def test_cuda_toolkit_refuses_in_its_checks() -> None:
    tasks = yaml.safe_load((ROOT / "roles/cuda_toolkit/tasks/main.yml").read_text())
    names = [t["name"] for t in tasks]
    refusal = names.index("Refuse CUDA releases whose headers clash with this C library")
    assert refusal < names.index("Install the toolkits")
    assert "gpuhost.gpu.cuda_glibc_clash" in str(tasks[refusal])


# --- the stand-in repository, generated from the table and read by apt ----------------------------------------------


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not TOOLS:
        pytest.skip("needs dpkg-deb, gnupg and apt")
    out = tmp_path_factory.mktemp("repo")
    specs = tmp_path_factory.mktemp("specs")
    shutil.copy(ROOT / "tests/aptrepo/packages/cuda-common.yml", specs)
    build.build(out, [r.name for r in table.REPOSITORIES], "x86_64", specs, ROOT / "tests/aptrepo/templates",
                "nvidia-test", build.DEFAULT_DRIVERS)
    return out


def apt(out: Path, distro: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """apt-get or apt-cache over this repository alone, as the role's offer check runs them."""
    lists = tmp / distro / "lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    source = tmp / distro / "nvidia.list"
    source.write_text(f"deb [signed-by={out}/nvidia-test.asc] file://{out}/{distro}/x86_64/ /\n")
    options = ["-o", f"Dir::Etc::SourceList={source}", "-o", f"Dir::Etc::SourceParts={tmp}/none",
               "-o", f"Dir::State::Lists={lists}", "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
               "-o", f"Dir::State::status={tmp}/status", "-o", "APT::Sandbox::User=root",
               "-o", "Debug::NoLocking=1", "-o", f"Dir::Cache::archives={tmp}/archives"]
    (tmp / "status").touch()
    (tmp / "archives/partial").mkdir(parents=True, exist_ok=True)
    return subprocess.run([args[0], *options, *args[1:]], capture_output=True, text=True, check=False,
                          env={"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


@pytest.mark.parametrize("name", [r.name for r in table.REPOSITORIES])
def test_standin_offers_every_default_plan(standin: Path, tmp_path: Path, name: str) -> None:
    assert apt(standin, name, tmp_path, "apt-get", "update", "-qq").returncode == 0
    for flavor in table.FLAVORS:
        choice = filters.nvidia_driver_packages(filters.nvidia_repo(*_facts(name)), "", flavor, [])
        wanted = choice["packages"] + [choice["persistenced_package"], choice["fabricmanager_package"]]
        madison = apt(standin, name, tmp_path, "apt-cache", "madison", *wanted, *choice["probe_names"]).stdout
        offer = filters.nvidia_apt_offer(madison, wanted, choice["branch"], "", choice["probe_names"])
        assert offer["missing"] == [] and offer["branches"] == list(repo(name).branches), (flavor, offer)
        pinned = [f"{p}={build.STANDIN_VERSIONS[choice['branch']]}-1" for p in wanted]
        done = apt(standin, name, tmp_path, "apt-get", "install", "--simulate", "-q", *pinned)
        assert done.returncode == 0, done.stdout + done.stderr


def _facts(name: str) -> tuple[str, str]:
    row = repo(name)
    return row.distribution, row.version


def test_standin_refuses_580_on_debian13(standin: Path, tmp_path: Path) -> None:
    assert apt(standin, "debian13", tmp_path, "apt-get", "update", "-qq").returncode == 0
    choice = table.driver_packages(repo("debian13"), "580", "open")
    madison = apt(standin, "debian13", tmp_path, "apt-cache", "madison", *choice["packages"]).stdout
    offer = filters.nvidia_apt_offer(madison, choice["packages"], "580", "", ["nvidia-kernel-open-dkms"])
    assert offer["missing"] == choice["packages"] and offer["branches"] == ["590"]


@pytest.mark.parametrize(("name", "together"), [
    ("debian12", ["nvidia-kernel-open-dkms", "nvidia-kernel-dkms"]),
    ("ubuntu2404", ["nvidia-dkms-580-open", "nvidia-dkms-580"]),
    ("ubuntu2404", ["nvidia-dkms-580-open", "nvidia-dkms-open"]),
    ("ubuntu2404", ["libnvidia-compute-580", "libnvidia-compute"]),
    ("ubuntu2404", ["nvidia-utils-580", "nvidia-utils"])])
def test_standin_conflicts_hold(standin: Path, tmp_path: Path, name: str, together: list[str]) -> None:
    assert apt(standin, name, tmp_path, "apt-get", "update", "-qq").returncode == 0
    done = apt(standin, name, tmp_path, "apt-get", "install", "--simulate", "-q", *together)
    assert done.returncode != 0 and "conflict" in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
