"""NVIDIA's CUDA apt repositories per distribution: the one table the provisioning roles and the test repository read.

Each row is one of NVIDIA's repository directories (``<distro>/<arch>/`` under
https://developer.download.nvidia.com/compute/cuda/repos/): which distribution release it serves, its CPU
architectures, the key its ``Release`` is signed with, the driver branches it publishes, and how its driver
packages are named (Debian's packaging or Ubuntu's). Every fact names its source (``SOURCES``); a fact NVIDIA does
not publish is None, never a guess. The nvidia_driver and cuda_toolkit roles read the table through the
``gpuhost.gpu.nvidia_repo`` filters (plugins/filter/nvidia_repo.py), and tests/aptrepo/build.py generates the
stand-in repository's driver packages from it, so a wrong name or a missing branch fails a test.

Pure functions over the table; no I/O. A problem raises ``RepoError`` with a message that says what to choose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

BASE_URL = "https://developer.download.nvidia.com/compute/cuda/repos/"

SOURCES = {
    "keys": "NVIDIA/cuda-repo-management README (GPG key table) and issues #30, #34, #39: debian13 is signed with "
            "the new key 8793F200; the older repositories keep 3bf863cc "
            "(EB693B3035CD5710E231E123A4B469963BF863CC), whose SHA-1 binding apt's sqv on Debian 13 rejects since "
            "2026-02-01",
    "debian13_branches": "NVIDIA/cuda-repo-management issues #38 (open) and #40: the debian13 repository holds "
                         "no 580 driver, only the newer branches",
    "debian13_arches": "NVIDIA/cuda-repo-management issue #39: there is no aarch64 (sbsa) repository for Debian 13",
    "debian_names": "NVIDIA Driver Installation Guide, Debian: compute-only install with nvidia-driver-cuda and "
                    "nvidia-kernel-open-dkms (open) or nvidia-kernel-dkms (proprietary); the branch is held by an "
                    "apt pin, not by the names",
    "ubuntu_names": "NVIDIA Driver Installation Guide, Ubuntu: compute-only install with nvidia-dkms-<branch>-open, "
                    "libnvidia-compute-<branch>, nvidia-utils-<branch>, nvidia-compute-utils-<branch>; its "
                    "\"590 package renames\" table drops the branch from these names from 590 on; "
                    "NVIDIA/ubuntu-packaging-nvidia-driver lists the per-branch names",
    "fabricmanager": "NVIDIA Fabric Manager user guide: from 580 the package is nvidia-fabricmanager (providing "
                     "nvidia-fabricmanager-<branch>); before, nvidia-fabricmanager-<branch>",
    "lts": "NVIDIA datacenter driver lifecycle (docs.nvidia.com/datacenter/tesla/drivers): R535 and R580 are long "
           "term support branches; R580 is the last branch for Maxwell, Pascal and Volta (CUDA toolkit, driver "
           "and architecture matrix)",
    "blackwell": "NVIDIA Driver Installation Guide: Blackwell needs the open kernel modules, branch 570 or newer",
}

# Long term support branches, oldest first (SOURCES["lts"]).
LTS_BRANCHES = ("535", "580")
# The last branch that drives GPUs older than Turing (compute capability below 7.5) (SOURCES["lts"]).
LAST_PRE_TURING_BRANCH = "580"
# The first branch that drives Blackwell (compute capability 10.0 and up) (SOURCES["blackwell"]).
FIRST_BLACKWELL_BRANCH = "570"
# Ubuntu's names lose the branch from this one on (SOURCES["ubuntu_names"]).
UBUNTU_RENAME_BRANCH = "590"
# The fabric manager's name loses the branch from this one on (SOURCES["fabricmanager"]).
FABRICMANAGER_RENAME_BRANCH = "580"

KEYS: dict[str, dict[str, Any]] = {
    "3bf863cc": {"file": "3bf863cc.pub", "fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC",
                 "source": "keys"},
    # Only the short id is published with the repository; the full fingerprint is not in NVIDIA's text.
    "8793F200": {"file": "8793F200.pub", "fingerprint": None, "source": "keys"},
}

_BRANCH = re.compile(r"^[0-9]{3,4}$")
_VERSION = re.compile(r"^[0-9]{3,4}\.[0-9]+(\.[0-9]+)?$")
FLAVORS = ("open", "proprietary")


class RepoError(ValueError):
    """A request the table cannot serve; the message says what to choose instead."""


@dataclass(frozen=True)
class Repo:
    name: str  # NVIDIA's directory name, e.g. debian12
    distribution: str  # as Ansible's ansible_facts.distribution says it
    major: str  # ansible_facts.distribution_major_version
    version: str  # ansible_facts.distribution_version on Ubuntu (24.04), the major on Debian
    arches: tuple[str, ...]  # NVIDIA's architecture directories
    key: str  # a key of KEYS
    packaging: str  # "debian" or "ubuntu"
    branches: tuple[str, ...]  # driver branches the repository publishes, oldest first
    sources: tuple[str, ...]  # keys of SOURCES behind this row

    def as_dict(self) -> dict[str, Any]:
        key = KEYS[self.key]
        return {
            "name": self.name, "distribution": self.distribution, "major": self.major, "version": self.version,
            "arches": list(self.arches), "packaging": self.packaging, "branches": list(self.branches),
            "key_id": self.key, "key_file": key["file"], "key_fingerprint": key["fingerprint"],
            "sources": [SOURCES[s] for s in self.sources],
        }


REPOSITORIES: tuple[Repo, ...] = (
    Repo("debian12", "Debian", "12", "12", ("x86_64", "sbsa"), "3bf863cc", "debian", ("580", "590"),
         ("keys", "debian_names", "fabricmanager")),
    Repo("debian13", "Debian", "13", "13", ("x86_64",), "8793F200", "debian", ("590",),
         ("keys", "debian13_branches", "debian13_arches", "debian_names", "fabricmanager")),
    Repo("ubuntu2204", "Ubuntu", "22", "22.04", ("x86_64", "sbsa"), "3bf863cc", "ubuntu", ("580", "590"),
         ("keys", "ubuntu_names", "fabricmanager")),
    Repo("ubuntu2404", "Ubuntu", "24", "24.04", ("x86_64", "sbsa"), "3bf863cc", "ubuntu", ("580", "590"),
         ("keys", "ubuntu_names", "fabricmanager")),
)
ARCH_DIRS = {"x86_64": "x86_64", "aarch64": "sbsa"}


def _supported() -> str:
    return ", ".join(f"{r.distribution} {r.version} ({'/'.join(r.arches)})" for r in REPOSITORIES)


def find(distribution: str, version: str, architecture: str = "x86_64") -> Repo:
    """The repository for a host as Ansible describes it, or RepoError saying which hosts NVIDIA serves."""
    arch_dir = ARCH_DIRS.get(str(architecture))
    for repo in REPOSITORIES:
        # Debian names a point release (12.5); its repository serves the major. Ubuntu's 24.10 is not 24.04.
        same = str(version) == repo.version or (
            repo.distribution == "Debian" and str(version).split(".", maxsplit=1)[0] == repo.major)
        if repo.distribution == distribution and same:
            if arch_dir not in repo.arches:
                raise RepoError(
                    f"NVIDIA publishes no {repo.name} repository for {architecture} (it has "
                    f"{', '.join(repo.arches)}); NVIDIA serves {_supported()}.")
            return repo
    raise RepoError(f"NVIDIA publishes no CUDA apt repository for {distribution} {version}; it serves "
                    f"{_supported()}. Point the repository URL and key at a mirror that fits this host, or "
                    "choose one of those releases.")


def _key(branch: str) -> tuple[int, ...]:
    return tuple(int(p) for p in branch.split("."))


def branch_range(compute_capabilities: list[str]) -> tuple[str | None, str | None, str]:
    """The lowest and highest branch the GPUs allow (None: no bound), and why."""
    low, high, why = None, None, []
    caps = [c for c in compute_capabilities if isinstance(c, str) and re.match(r"^[0-9]+\.[0-9]+$", c)]
    if any(_key(c) >= (10, 0) for c in caps):
        low = FIRST_BLACKWELL_BRANCH
        why.append(f"Blackwell GPUs need branch {FIRST_BLACKWELL_BRANCH} or newer")
    if any(_key(c) < (7, 5) for c in caps):
        high = LAST_PRE_TURING_BRANCH
        why.append(f"GPUs older than Turing end with branch {LAST_PRE_TURING_BRANCH}")
    return low, high, "; ".join(why)


def default_branch(repo: Repo, compute_capabilities: list[str] | None = None) -> dict[str, Any]:
    """The branch to install by default: the newest LTS branch the repository has that the GPUs allow, else the
    newest branch it has that they allow. ``branch`` None with ``problem`` set when none fits."""
    low, high, why = branch_range(compute_capabilities or [])
    fits = [b for b in repo.branches
            if (low is None or _key(b) >= _key(low)) and (high is None or _key(b) <= _key(high))]
    lts = [b for b in fits if b in LTS_BRANCHES]
    if lts:
        branch = max(lts, key=_key)
        return {"branch": branch, "lts": True, "problem": None,
                "why": f"the newest long term support branch in {repo.name}" + (f" ({why})" if why else "")}
    if fits:
        branch = max(fits, key=_key)
        return {"branch": branch, "lts": False, "problem": None,
                "why": f"{repo.name} has no long term support branch ({', '.join(LTS_BRANCHES)}) that fits; "
                       f"{branch} is its newest" + (f" ({why})" if why else "")}
    return {"branch": None, "lts": False, "why": why,
            "problem": f"{repo.name} publishes branches {', '.join(repo.branches)}, and none fits these GPUs "
                       f"({why}). Use a distribution whose repository has a fitting branch "
                       f"(e.g. {', '.join(r.name for r in REPOSITORIES if r.name != repo.name)}), or set "
                       "nvidia_driver_branch and nvidia_driver_repo_url to a repository that has one."}


def driver_packages(repo: Repo, branch: str, flavor: str) -> dict[str, Any]:
    """The package names of one branch and flavor in this repository, and the relations between them."""
    if not _BRANCH.match(str(branch)):
        raise RepoError(f"a driver branch is three or four digits such as \"580\"; got {branch!r}")
    if flavor not in FLAVORS:
        raise RepoError(f"the kernel module flavor is open or proprietary; got {flavor!r}")
    suffix = f"-{branch}" if repo.packaging == "ubuntu" and _key(branch) < _key(UBUNTU_RENAME_BRANCH) else ""
    fabricmanager = ("nvidia-fabricmanager" if _key(branch) >= _key(FABRICMANAGER_RENAME_BRANCH)
                     else f"nvidia-fabricmanager-{branch}")
    if repo.packaging == "debian":
        kmods = {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"}
        userspace = ["nvidia-driver-cuda"]
        persistenced = "nvidia-persistenced"
        smi = "nvidia-smi"
        module_names = ["nvidia", "nvidia-current"]
    else:
        kmods = {"open": f"nvidia-dkms{suffix}-open", "proprietary": f"nvidia-dkms{suffix}"}
        userspace = [f"libnvidia-compute{suffix}", f"nvidia-utils{suffix}"]
        persistenced = f"nvidia-compute-utils{suffix}"
        smi = f"nvidia-utils{suffix}"
        module_names = ["nvidia"]
    kmod = kmods[flavor]
    other = kmods["proprietary" if flavor == "open" else "open"]
    return {
        "branch": str(branch),
        "flavor": flavor,
        "packages": [userspace[0], kmod, *userspace[1:]] if repo.packaging == "debian" else [kmod, *userspace],
        "kmod_package": kmod,
        "other_kmod_package": other,
        "persistenced_package": persistenced,
        "smi_package": smi,
        "fabricmanager_package": fabricmanager,
        "module_names": module_names,
        # The open and the proprietary modules exclude each other (both install nvidia.ko).
        "conflicts": [[kmod, other]],
        "names_carry_branch": bool(suffix),
    }


def probe_names(repo: Repo, flavor: str) -> list[str]:
    """The kernel module package names to ask apt about, one per naming the table knows, to list the branches."""
    return sorted({driver_packages(repo, b, flavor)["kmod_package"] for b in repo.branches}
                  | {driver_packages(repo, UBUNTU_RENAME_BRANCH, flavor)["kmod_package"]})


_MADISON = re.compile(r"^[^\S\n]*([a-z0-9][a-z0-9+.-]*)[^\S\n]*\|[^\S\n]*(\S+)[^\S\n]*\|")


def madison_versions(text: str) -> dict[str, list[str]]:
    """``apt-cache madison`` output as package -> versions (upstream part, epoch and revision dropped)."""
    found: dict[str, list[str]] = {}
    for line in str(text).splitlines():
        match = _MADISON.match(line)
        if not match:
            continue
        version = match.group(2).split(":", 1)[-1].rsplit("-", 1)[0]
        found.setdefault(match.group(1), [])
        if version not in found[match.group(1)]:
            found[match.group(1)].append(version)
    return found


def branches_offered(versions: dict[str, list[str]], kmod_names: list[str]) -> list[str]:
    """The branches the repository offers a kernel module package for, oldest first."""
    out = {v.split(".", 1)[0] for name in kmod_names for v in versions.get(name, []) if _VERSION.match(v)}
    return sorted(out, key=_key)


def check_offered(versions: dict[str, list[str]], packages: list[str], branch: str, version: str = "") -> list[str]:
    """The packages of the plan that the repository does not offer at this branch (or exact version)."""
    def fits(v: str) -> bool:
        return v == version if version else v.split(".", 1)[0] == branch
    return [p for p in packages if not any(fits(v) for v in versions.get(p, []))]


# CUDA 12.x's crt/math_functions.h (12.8.93 and the other 12.x releases) declares sinpi, cospi, sinpif and cospif
# without noexcept; glibc 2.41 declares them noexcept, so every host compile that includes it fails ("declaration
# ... is incompatible with previous"). CUDA 13.x's header guards against it (NVIDIA/cuda-samples#378,
# 1CatAI/1Cat-vLLM#215; shown by tests/cuda_ext/test_glibc_clash.py on Debian 13 with the real 12.8 headers).
GLIBC_NOEXCEPT_MATH = "2.41"
FIRST_CUDA_WITH_GUARD = "13.0"


def glibc_clash(cuda_releases: list[str], glibc: str | None) -> str | None:
    """Why these CUDA releases cannot compile on this glibc, or None (also when the glibc version is unknown)."""
    if not glibc or not re.match(r"^[0-9]+\.[0-9]+", str(glibc)):
        return None
    glibc_key = _key(re.match(r"^[0-9]+\.[0-9]+", str(glibc)).group(0))
    if glibc_key < _key(GLIBC_NOEXCEPT_MATH):
        return None
    old = [r for r in cuda_releases
           if re.match(r"^[0-9]+\.[0-9]+$", str(r)) and _key(str(r)) < _key(FIRST_CUDA_WITH_GUARD)]
    if not old:
        return None
    return (f"CUDA {', '.join(old)} cannot compile host code on glibc {glibc}: its crt/math_functions.h declares "
            f"sinpi, cospi, sinpif and cospif without noexcept, and glibc {GLIBC_NOEXCEPT_MATH} and later declare them "
            "noexcept, so nvcc stops on every .cu file (NVIDIA/cuda-samples#378). CUDA "
            f"{FIRST_CUDA_WITH_GUARD} and later guard against it: install CUDA 13.x only (e.g. [\"13.1\"]), or use "
            f"a distribution with glibc below {GLIBC_NOEXCEPT_MATH} (Debian 12: 2.36, Ubuntu 24.04: 2.39) for "
            "CUDA 12.x.")
